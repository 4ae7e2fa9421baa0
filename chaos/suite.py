"""The fault suite: thousands of executions, real servers, and the faults the design promises to survive.

Faults injected while executions are due (``chaos.suite_faults``):
- ``kill -9`` of scan processes in the middle of their partition, several times;
- a Kafka broker restart;
- a Cassandra restart while jobs are being submitted over HTTP (the API must answer 503 while it is
  down, and every job it acknowledged must run);
- minutes with no tick at all, then ticks again;
- the same tick delivered twice (at once, and again late).
Then it counts, from the ``jobs`` topic: executions expected, published, lost (must be 0), duplicates
and their causes, and the time to recover from each fault (``chaos.suite_report``). The jobs are submitted
by ``chaos.suite_load``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict
from datetime import UTC, datetime, timedelta

from chaos.common import Collector, run_suite, start_stack
from chaos.suite_faults import FULL, SMALL, Faults, Plan
from chaos.suite_load import Load
from chaos.suite_report import Report, Seen, Tally, execution
from jobrunner.domain.placement import OPEN_AHEAD
from jobrunner.domain.time import MINUTE, minute_bucket

__all__ = ["FULL", "SMALL", "Plan", "Report", "Suite", "first_due_minute", "run"]

#: Jobs the API takes a second, at least, when the suite submits them (tens of ms a job, 8 at a time).
SUBMISSIONS_PER_S = 25


def first_due_minute(plan: Plan, now: datetime) -> datetime:
    """The minute the plan's first executions are due in, for jobs submitted from ``now``.

    Every job is submitted before its minute's late lane opens (``OPEN_AHEAD`` before the minute), so that it
    is a planned row: all of them before the first minute's at ``SUBMISSIONS_PER_S``, and since the jobs go in
    soonest first (``Load.submit_all``), those due first still in time at about half that rate. A late row
    wakes its partition's scan (``services.wake``), and until the scan the tick dispatches holds the lease,
    each submission starts a scan process: hundreds on two cores. That happened whenever the suite started
    late in its minute (about half the time with a lead of 76 s, which ignored the late lane): submitting
    took minutes, and one small run took 13."""
    lead = max(plan.lead_s, OPEN_AHEAD.total_seconds() + plan.executions / SUBMISSIONS_PER_S)
    return minute_bucket(now + timedelta(seconds=lead)) + MINUTE


class Suite:
    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.report = Report(plan=asdict(plan))
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def start(self) -> None:
        self.chaos = start_stack(self.plan.segments, "chaos")
        self.endpoints, self.invoker, self.stack = self.chaos.endpoints, self.chaos.invoker, self.chaos.stack
        self.collector: Collector[Seen] = Collector(self.endpoints.kafka_bootstrap, execution)
        self.load = Load(self.stack.url, self.stack.token, self.report, self.lock)
        self.faults = Faults(self.plan, self.stack, self.invoker, self.load, self.report, self.lock, self.stop)

    def run(self) -> Report:
        started = time.monotonic()
        plan = self.plan
        first = first_due_minute(plan, datetime.now(UTC))
        self.faults.silence_from(first)
        threading.Thread(target=self.faults.ticker, daemon=True).start()
        self.load.submit_all(first, plan.executions, plan.spread_minutes)
        self.report.submit_s = time.monotonic() - started
        # On a loaded machine submitting can outlast the lead: faults start once the jobs are in.
        first = max(first, datetime.now(UTC))
        faults = self.faults.threads(first)
        for thread in faults:
            thread.start()
        last_due = first + timedelta(minutes=plan.spread_minutes)
        deadline = time.monotonic() + (last_due - datetime.now(UTC)).total_seconds() + plan.drain_timeout_s
        while time.monotonic() < deadline:
            for thread in faults:
                thread.join(timeout=0)
            if all(not t.is_alive() for t in faults) and self.faults.ticks_done() and not self._missing():
                break
            time.sleep(2)
        self.stop.set()
        self._count()
        self.report.wall_s = time.monotonic() - started
        return self.report

    def _missing(self) -> set[tuple[str, datetime]]:
        return self.load.missing({(job, scheduled) for _, job, scheduled, _ in list(self.collector.seen)})

    def _count(self) -> None:
        self.collector.stop()
        tally = Tally(self.report, self.plan.segments, self.faults.kills, self.faults.kafka_window,
                      self.stack.url, self.stack.token)
        tally.count(self.load.expected, self.collector.seen)

    def close(self, keep_servers: bool) -> None:
        self.stop.set()
        self.chaos.close(keep_servers)


def run(plan: Plan, keep_servers: bool = False) -> Report:
    return run_suite(Suite(plan), keep_servers)
