"""The crash suite's faults: the plan of when each comes, and the threads that inject them while executions are
due (``chaos.suite``): scans killed mid-partition, a broker restart, a database restart under submissions,
minutes with no tick, and a tick delivered three times.

A fault meets what it is meant to meet by construction, not by luck, within a bound: a kill waits for a scan
to run, the database stays down until the API has refused a submission with 503, and the run goes on until
the ticker has passed the silent minutes and the tripled tick. What cannot be made to happen is reported
(``Report.unmet``) and fails the run."""

from __future__ import annotations

import functools
import logging
import os
import random
import signal
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from chaos.common import Fault, poll
from devstack import servers
from jobrunner.domain.time import MINUTE, minute_bucket, rfc3339

if TYPE_CHECKING:
    from collections.abc import Callable

    from chaos.suite_load import Load
    from chaos.suite_report import Report
    from devstack.process_invoker import ProcessInvoker, ScanProcess
    from devstack.stack import LocalStack

log = logging.getLogger(__name__)

#: How long a kill waits for a scan to run, after its planned instant.
KILL_PATIENCE_S = 30.0
#: How long the database stays down, at most, until the API has refused a submission with 503.
REFUSAL_PATIENCE_S = 45.0


@dataclass(frozen=True)
class Plan:
    executions: int  # one-time jobs submitted up front; 10 % more come as recurring fires
    spread_minutes: int
    segments: int
    lead_s: float
    kills: int
    kafka_restart_at_s: float  # seconds after the first due minute
    cassandra_restart_at_s: float
    submit_during_restart_s: float
    no_tick_from_s: float
    no_tick_minutes: int
    drain_timeout_s: float
    #: The kills are spread over this many seconds from the first due minute (0: the whole spread).
    kill_span_s: float = 0


# The full plan keeps the faults apart, so that each one's time to recover is its own: the kills, the
# broker restart and the database restart in the first two and a half minutes (a killed scan's lease
# expires before the tick of minute 3), then no tick in minutes 4 to 6.
FULL = Plan(executions=5000, spread_minutes=7, segments=8, lead_s=90, kills=5, kafka_restart_at_s=45,
            cassandra_restart_at_s=100, submit_during_restart_s=40, no_tick_from_s=240, no_tick_minutes=3,
            drain_timeout_s=480, kill_span_s=150)
SMALL = Plan(executions=400, spread_minutes=2, segments=4, lead_s=60, kills=2, kafka_restart_at_s=30,
             cassandra_restart_at_s=60, submit_during_restart_s=25, no_tick_from_s=60, no_tick_minutes=1,
             drain_timeout_s=360)


class Faults:
    """Injects the plan's faults into ``stack`` and records each in ``report``; ``stop`` ends them all.
    ``kill`` signals a scan's process (``os.kill``)."""

    #: Seconds between two looks for a scan to kill, or for the API's first 503.
    poll_s = 0.5

    def __init__(self, plan: Plan, stack: LocalStack, invoker: ProcessInvoker, load: Load, report: Report,
                 lock: threading.Lock, stop: threading.Event, *, kill: Callable[[int, int], None] = os.kill) -> None:
        self.plan, self.stack, self.invoker, self.load = plan, stack, invoker, load
        self.report, self.lock, self.stop = report, lock, stop
        self._kill = kill
        self.skip_ticks: set[datetime] = set()
        self.double_ticks: set[datetime] = set()
        #: The minutes the ticker has dealt with (ticked, kept silent, or ticked three times).
        self.ticked: set[datetime] = set()
        self.kills: list[tuple[datetime, int, datetime]] = []  # when, segment, bucket
        self.kafka_window: tuple[datetime, datetime] | None = None

    def silence_from(self, first: datetime) -> None:
        """No tick in the plan's silent minutes after ``first``; the minute after them ticked three times."""
        gap_start = minute_bucket(first + timedelta(seconds=self.plan.no_tick_from_s))
        self.skip_ticks = {gap_start + k * MINUTE for k in range(self.plan.no_tick_minutes)}
        self.double_ticks = {gap_start + self.plan.no_tick_minutes * MINUTE}

    def threads(self, first: datetime) -> list[threading.Thread]:
        """The threads that kill scans and restart the broker and the database, from ``first`` on."""
        return [
            threading.Thread(target=self.kill_scans, args=(first,), daemon=True),
            threading.Thread(target=self.restart_kafka, args=(first,), daemon=True),
            threading.Thread(target=self.restart_cassandra_while_submitting, args=(first,), daemon=True),
        ]

    def ticker(self) -> None:
        sent: set[datetime] = set()
        while not self.stop.is_set():
            now = datetime.now(UTC)
            minute = minute_bucket(now)
            if minute not in sent and now >= minute + timedelta(seconds=1):
                sent.add(minute)
                self.tick(minute)
            time.sleep(0.2)

    def tick(self, minute: datetime) -> None:
        """The minute's tick as the plan has it: none, once, or three times (twice at once, once 20 s late)."""
        if minute in self.skip_ticks:
            self.fault("no tick", minute, "EventBridge silent for this minute")
        else:
            self.stack.tick(minute)
            if minute in self.double_ticks:
                self.stack.tick(minute)  # the same event again at once
                late = threading.Timer(20, self.stack.tick, args=(minute,))  # and late
                late.daemon = True  # a run over by then does not wait for it
                late.start()
                self.fault("duplicate tick", minute, "the same event three times (twice at once, once 20 s late)")
        with self.lock:
            self.ticked.add(minute)

    def ticks_done(self) -> bool:
        """Whether the ticker has passed every silent minute and the tripled tick: the run goes on until it
        has (executions all published sooner do not make those faults happen)."""
        with self.lock:
            return (self.skip_ticks | self.double_ticks) <= self.ticked

    def fault(self, kind: str, at: datetime, detail: str) -> Fault:
        fault = Fault(kind=kind, at=rfc3339(at), detail=detail)
        with self.lock:
            self.report.faults.append(fault)
        return fault

    def unmet(self, text: str) -> None:
        log.error("plan not met: %s", text)
        with self.lock:
            self.report.unmet.append(text)

    def _sleep_until(self, instant: datetime) -> bool:
        return not self.stop.wait(max(0.0, (instant - datetime.now(UTC)).total_seconds()))

    def kill_scans(self, first: datetime) -> None:
        span = self.plan.kill_span_s or self.plan.spread_minutes * 60
        for k in range(1, self.plan.kills + 1):
            planned = first + timedelta(seconds=span * k / (self.plan.kills + 1))
            if not self._sleep_until(planned):
                return
            # A scan may not be running at the planned instant (one ended, the next not started): wait for one.
            victim = poll(functools.partial(self._victim, k), within_s=KILL_PATIENCE_S, every_s=self.poll_s,
                          sleep=self.stop.wait)
            if victim is None:
                if not self.stop.is_set():
                    self.unmet(f"kill {k}: no scan of a due minute ran within {KILL_PATIENCE_S:.0f} s of "
                               f"{planned:%H:%M:%S}")
                continue
            now = datetime.now(UTC)
            self._kill(victim.process.pid, signal.SIGKILL)
            self.kills.append((now, victim.request.segment, victim.request.bucket))
            self.fault("kill -9 scan", now,
                       f"segment {victim.request.segment}, minute {victim.request.bucket:%H:%M}, mid-partition")

    def _victim(self, k: int) -> ScanProcess | None:
        """A running scan of a minute that is due, preferring the running minute's (the one in the middle of
        publishing); None if there is none."""
        now = datetime.now(UTC)
        running = self.invoker.running()
        candidates = [p for p in running if p.request.bucket == minute_bucket(now)] or [
            p for p in running if p.request.bucket <= now]
        return random.Random(k).choice(candidates) if candidates else None

    def restart_kafka(self, first: datetime) -> None:
        if not self._sleep_until(first + timedelta(seconds=self.plan.kafka_restart_at_s)):
            return
        began = datetime.now(UTC)
        fault = self.fault("Kafka broker restart", began, "stop (SIGTERM) and start again during publishing")
        servers.restart("kafka")
        self.kafka_window = (began, datetime.now(UTC))
        fault.detail += f"; broker back after {(self.kafka_window[1] - began).total_seconds():.1f} s"

    def restart_cassandra_while_submitting(self, first: datetime) -> None:
        at = first + timedelta(seconds=self.plan.cassandra_restart_at_s)
        if not self._sleep_until(at - timedelta(seconds=5)):
            return
        submitting = threading.Event()
        submitting.set()
        accepted_after: list[datetime] = []

        def submitter() -> None:
            n = 0
            while submitting.is_set():
                body = {"schedule": {"at": rfc3339(datetime.now(UTC) + timedelta(seconds=75))},
                        "payload": {"during_restart": n}}
                response = self.load.submit(body)
                self.load.accept(body, response)
                if response is not None and response.status_code == 201:
                    accepted_after.append(datetime.now(UTC))
                n += 1
                time.sleep(0.1)

        thread = threading.Thread(target=submitter, daemon=True)
        thread.start()
        self._sleep_until(at)
        began = datetime.now(UTC)
        fault = self.fault("Cassandra restart", began, "while jobs are being submitted over HTTP")
        self._restart_cassandra_until_refused()
        back = datetime.now(UTC)
        self._sleep_until(began + timedelta(seconds=self.plan.submit_during_restart_s))
        deadline = time.monotonic() + 60  # keep submitting until the API accepts again (bounded)
        while not any(t > back for t in accepted_after) and time.monotonic() < deadline:
            time.sleep(0.5)
        submitting.clear()
        thread.join()
        first_ok = next((t for t in accepted_after if t > back), None)
        fault.recovery_s = (first_ok - began).total_seconds() if first_ok else None
        fault.detail += f"; node back after {(back - began).total_seconds():.1f} s; API refused with 503 meanwhile"

    def _restart_cassandra_until_refused(self) -> None:
        """Stop the node, keep it down until the API has answered a submission 503 (at most
        ``REFUSAL_PATIENCE_S``: a request in flight may hang for a while before it is refused), then start it."""
        with self.lock:
            rejected = self.report.rejected_503
        if not servers.stop("cassandra"):
            self.unmet("the Cassandra on the suite's port was not started by this run's devstack: not restarted")
            servers.ensure_cassandra()  # if none answers, one is started
            return
        try:
            refused = poll(lambda: self._rejected() > rejected, within_s=REFUSAL_PATIENCE_S, every_s=self.poll_s,
                           sleep=self.stop.wait)
            if not refused and not self.stop.is_set():
                self.unmet(f"the API refused no submission with 503 in {REFUSAL_PATIENCE_S:.0f} s of the database "
                           "being down")
        finally:
            servers.ensure_cassandra()

    def _rejected(self) -> int:
        with self.lock:
            return self.report.rejected_503
