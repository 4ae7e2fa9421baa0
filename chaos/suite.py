"""The fault suite: thousands of executions, real servers, and the faults the design promises to survive.

Faults injected while executions are due:
- ``kill -9`` of scan processes in the middle of their partition, several times;
- a Kafka broker restart;
- a Cassandra restart while jobs are being submitted over HTTP (the API must answer 503 while it is
  down, and every job it acknowledged must run);
- minutes with no tick at all, then ticks again;
- the same tick delivered twice (at once, and again late).
Then it counts, from the ``jobs`` topic: executions expected, published, lost (must be 0), duplicates
and their causes, and the time to recover from each fault.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import requests

from chaos.common import Collector, Fault, fault_table, run_suite, start_stack
from devstack import servers
from jobrunner.domain.schedules import parse_instant
from jobrunner.domain.segments import segment_of
from jobrunner.domain.time import MINUTE, minute_bucket, rfc3339


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
             cassandra_restart_at_s=60, submit_during_restart_s=25, no_tick_from_s=60, no_tick_minutes=2,
             drain_timeout_s=360)


@dataclass
class Report:
    plan: dict[str, Any]
    expected: int = 0
    published: int = 0
    lost: int = 0
    lost_ids: list[str] = field(default_factory=list)
    messages: int = 0
    duplicates: int = 0
    duplicate_causes: dict[str, int] = field(default_factory=dict)
    submitted: int = 0
    rejected_503: int = 0
    refused_late: int = 0
    faults: list[Fault] = field(default_factory=list)
    max_lateness_s: float = 0.0
    wall_s: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    def markdown(self) -> str:
        lines = [
            "| figure | value |", "|---|---|",
            f"| executions expected | {self.expected} |",
            f"| published (distinct execution ids) | {self.published} |",
            f"| **lost** | **{self.lost}** |",
            f"| messages on `jobs` | {self.messages} |",
            f"| duplicates (same execution_id again) | {self.duplicates} |",
            *(f"| duplicates caused by {cause} | {n} |" for cause, n in sorted(self.duplicate_causes.items())),
            f"| jobs acknowledged (201) / refused with 503 | {self.submitted} / {self.rejected_503} |",
            f"| jobs refused as submitted too late (422) | {self.refused_late} |",
            f"| latest execution, after its due instant | {self.max_lateness_s:.1f} s |",
            f"| wall time of the suite | {self.wall_s:.0f} s |",
            "", *fault_table(self.faults),
        ]
        return "\n".join(lines) + "\n"


class Suite:
    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.report = Report(plan=asdict(plan))
        self.expected: dict[tuple[str, datetime], None] = {}
        self.lock = threading.Lock()
        self.skip_ticks: set[datetime] = set()
        self.double_ticks: set[datetime] = set()
        self.kills: list[tuple[datetime, int, datetime]] = []  # when, segment, bucket
        self.kafka_window: tuple[datetime, datetime] | None = None
        self.stop = threading.Event()

    # -- set-up ---------------------------------------------------------------------------------

    def start(self) -> None:
        self.chaos = start_stack(self.plan.segments, "chaos")
        self.endpoints, self.invoker, self.stack = self.chaos.endpoints, self.chaos.invoker, self.chaos.stack
        self.collector = Collector(self.endpoints.kafka_bootstrap, _execution)

    def submit(self, body: dict[str, Any], attempts: int = 1) -> requests.Response | None:
        """POST a job; with several attempts, retry timeouts (safe: the body carries an idempotency key)."""
        for _ in range(attempts):
            try:
                return requests.post(f"{self.stack.url}/jobs", json=body, timeout=30,
                                     headers={"Authorization": f"Bearer {self.stack.token}"})
            except requests.RequestException:
                time.sleep(1)
        return None

    def accept(self, body: dict[str, Any], response: requests.Response | None) -> None:
        if response is None:
            return
        if response.status_code == 503:
            with self.lock:
                self.report.rejected_503 += 1
            return
        if response.status_code == 422:
            # On a slow machine a job can arrive after its time (more than 5 minutes, or after a
            # recurring job's whole window): the API refuses it, so it is rightly not expected.
            with self.lock:
                self.report.refused_late += 1
            return
        if response.status_code not in (200, 201):  # 200: a retried submission, the same job
            raise AssertionError(f"unexpected answer {response.status_code}: {response.text}")
        job = response.json()
        fires = [parse_instant(job["next_run_at"], "next_run_at")]
        if "every" in body["schedule"]:  # every 30 s from the first fire after submission, through end
            end = parse_instant(body["schedule"]["end"], "end")
            while fires[-1] + timedelta(seconds=30) <= end:
                fires.append(fires[-1] + timedelta(seconds=30))
        with self.lock:
            self.report.submitted += 1
            for fire in fires:
                self.expected[(job["job_id"], fire)] = None

    # -- the run --------------------------------------------------------------------------------

    def run(self) -> Report:
        started = time.monotonic()
        plan = self.plan
        # Submitting goes through one API "execution environment" (tens of ms a job): leave it time.
        lead = max(plan.lead_s, 60 + plan.executions / 25)
        first = minute_bucket(datetime.now(UTC) + timedelta(seconds=lead)) + MINUTE
        self.first_due = first
        gap_start = minute_bucket(first + timedelta(seconds=plan.no_tick_from_s))
        self.skip_ticks = {gap_start + k * MINUTE for k in range(plan.no_tick_minutes)}
        self.double_ticks = {gap_start + plan.no_tick_minutes * MINUTE}
        threading.Thread(target=self._ticker, daemon=True).start()
        self._submit_all(first)
        # On a loaded machine submitting can outlast the lead: faults start once the jobs are in.
        first = max(first, datetime.now(UTC))
        faults = [
            threading.Thread(target=self._kill_scans, args=(first,), daemon=True),
            threading.Thread(target=self._restart_kafka, args=(first,), daemon=True),
            threading.Thread(target=self._restart_cassandra_while_submitting, args=(first,), daemon=True),
        ]
        for thread in faults:
            thread.start()
        last_due = first + timedelta(minutes=plan.spread_minutes)
        deadline = time.monotonic() + (last_due - datetime.now(UTC)).total_seconds() + plan.drain_timeout_s
        while time.monotonic() < deadline:
            for thread in faults:
                thread.join(timeout=0)
            if all(not t.is_alive() for t in faults) and not self._missing():
                break
            time.sleep(2)
        self.stop.set()
        self._count()
        self.report.wall_s = time.monotonic() - started
        return self.report

    def _submit_all(self, first: datetime) -> None:
        rng = random.Random(7)
        span = self.plan.spread_minutes * 60
        bodies: list[dict[str, Any]] = []
        for i in range(self.plan.executions):
            due = first + timedelta(seconds=rng.uniform(0, span))
            bodies.append({"schedule": {"at": rfc3339(due)}, "payload": {"n": i}, "idempotency_key": f"at-{i}"})
        for i in range(self.plan.executions // 30):  # recurring: three fires each
            start = first + timedelta(seconds=rng.uniform(0, span - 60))
            bodies.append({"schedule": {"every": "PT30S", "start": rfc3339(start),
                                        "end": rfc3339(start + timedelta(seconds=60))}, "payload": {"r": i},
                           "idempotency_key": f"every-{i}"})
        with ThreadPoolExecutor(max_workers=8) as pool:
            for body, response in zip(bodies, pool.map(lambda b: self.submit(b, attempts=5), bodies), strict=True):
                self.accept(body, response)

    def _ticker(self) -> None:
        sent: set[datetime] = set()
        while not self.stop.is_set():
            now = datetime.now(UTC)
            minute = minute_bucket(now)
            if minute not in sent and now >= minute + timedelta(seconds=1):
                sent.add(minute)
                if minute in self.skip_ticks:
                    self._fault("no tick", minute, "EventBridge silent for this minute")
                else:
                    self.stack.tick(minute)
                    if minute in self.double_ticks:
                        self.stack.tick(minute)  # the same event again at once
                        threading.Timer(20, self.stack.tick, args=(minute,)).start()  # and late
                        self._fault("duplicate tick", minute,
                                    "the same event three times (twice at once, once 20 s late)")
            time.sleep(0.2)

    def _fault(self, kind: str, at: datetime, detail: str) -> Fault:
        fault = Fault(kind=kind, at=rfc3339(at), detail=detail)
        with self.lock:
            self.report.faults.append(fault)
        return fault

    def _sleep_until(self, instant: datetime) -> bool:
        return not self.stop.wait(max(0.0, (instant - datetime.now(UTC)).total_seconds()))

    def _kill_scans(self, first: datetime) -> None:
        span = self.plan.kill_span_s or self.plan.spread_minutes * 60
        for k in range(1, self.plan.kills + 1):
            if not self._sleep_until(first + timedelta(seconds=span * k / (self.plan.kills + 1))):
                return
            now = datetime.now(UTC)
            running = self.invoker.running()
            # Prefer the scan of the running minute: it is the one in the middle of publishing.
            candidates = [p for p in running if p.request.bucket == minute_bucket(now)] or [
                p for p in running if p.request.bucket <= now]
            if not candidates:
                continue
            victim = random.Random(k).choice(candidates)
            os.kill(victim.process.pid, signal.SIGKILL)
            self.kills.append((now, victim.request.segment, victim.request.bucket))
            self._fault("kill -9 scan", now,
                        f"segment {victim.request.segment}, minute {victim.request.bucket:%H:%M}, mid-partition")

    def _restart_kafka(self, first: datetime) -> None:
        if not self._sleep_until(first + timedelta(seconds=self.plan.kafka_restart_at_s)):
            return
        began = datetime.now(UTC)
        fault = self._fault("Kafka broker restart", began, "stop (SIGTERM) and start again during publishing")
        servers.restart("kafka")
        self.kafka_window = (began, datetime.now(UTC))
        fault.detail += f"; broker back after {(self.kafka_window[1] - began).total_seconds():.1f} s"

    def _restart_cassandra_while_submitting(self, first: datetime) -> None:
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
                response = self.submit(body)
                self.accept(body, response)
                if response is not None and response.status_code == 201:
                    accepted_after.append(datetime.now(UTC))
                n += 1
                time.sleep(0.1)

        thread = threading.Thread(target=submitter, daemon=True)
        thread.start()
        self._sleep_until(at)
        began = datetime.now(UTC)
        fault = self._fault("Cassandra restart", began, "while jobs are being submitted over HTTP")
        servers.restart("cassandra")
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

    # -- counting -------------------------------------------------------------------------------

    def _missing(self) -> set[tuple[str, datetime]]:
        published = {(job, scheduled) for _, job, scheduled, _ in list(self.collector.seen)}
        with self.lock:
            return set(self.expected) - published

    def _count(self) -> None:
        self.collector.stop()
        seen = self.collector.seen
        report = self.report
        ids = Counter(execution_id for execution_id, *_ in seen)
        first_publish: dict[tuple[str, datetime], datetime] = {}
        for _, job, scheduled, published in seen:
            key = (job, scheduled)
            first_publish[key] = min(published, first_publish.get(key, published))
        report.expected = len(self.expected)
        report.published = len(set(self.expected) & set(first_publish))
        missing = sorted(set(self.expected) - set(first_publish), key=lambda k: k[1])
        report.lost = len(missing)
        report.lost_ids = [self._describe(job, at) for job, at in missing[:20]]
        report.messages = len(seen)
        report.duplicates = sum(n - 1 for n in ids.values() if n > 1)
        report.max_lateness_s = max(
            ((first_publish[k] - k[1]).total_seconds() for k in self.expected if k in first_publish), default=0.0
        )
        causes: Counter[str] = Counter()
        killed = {(segment, bucket) for _, segment, bucket in self.kills}
        by_id: dict[str, list[tuple[str, datetime, datetime]]] = {}
        for execution_id, job, scheduled, published in seen:
            by_id.setdefault(execution_id, []).append((job, scheduled, published))
        for copies in by_id.values():
            if len(copies) < 2:
                continue
            job, scheduled, published = copies[0]
            partition = (segment_of(job, self.plan.segments), minute_bucket(scheduled))
            if partition in killed or any(minute_bucket(p) != minute_bucket(scheduled) for _, _, p in copies):
                cause = "a killed scan (republished what it had sent but not yet marked done)"
            elif self.kafka_window and any(self.kafka_window[0] <= p <= self.kafka_window[1] + timedelta(seconds=30)
                                           for _, _, p in copies):
                cause = "the broker restart (acknowledgement lost, publish retried)"
            else:
                cause = "unattributed"
            causes[cause] += len(copies) - 1
        report.duplicate_causes = dict(causes)
        self._recovery_times(first_publish)

    def _describe(self, job_id: str, scheduled_at: datetime) -> str:
        """A lost execution, with what the store says of it (to find the cause)."""
        try:
            job = requests.get(f"{self.stack.url}/jobs/{job_id}", timeout=10,
                               headers={"Authorization": f"Bearer {self.stack.token}"}).json()
            history = requests.get(f"{self.stack.url}/jobs/{job_id}/executions", timeout=10,
                                   headers={"Authorization": f"Bearer {self.stack.token}"}).json()["items"]
            runs = [(h["scheduled_at"], h["status"]) for h in history]
            state = f"schedule={job['schedule']} next_run_at={job['next_run_at']} history={runs}"
        except (requests.RequestException, KeyError, ValueError) as exc:
            state = f"(could not read the job: {exc})"
        return f"{job_id}@{rfc3339(scheduled_at)} segment {segment_of(job_id, self.plan.segments)}: {state}"

    def _recovery_times(self, first_publish: dict[tuple[str, datetime], datetime]) -> None:
        """For kills and silent minutes: from the fault until the last execution it delayed was published."""
        kills = iter(self.kills)  # in the order of their faults
        for fault in self.report.faults:
            at = parse_instant(fault.at, "at")
            if fault.kind == "kill -9 scan":
                # Only the killed partition's executions: later faults (silent minutes) delay others.
                _, segment, bucket = next(kills)
                delayed = [p for (job, due), p in first_publish.items()
                           if segment_of(job, self.plan.segments) == segment and minute_bucket(due) == bucket
                           and p > due + timedelta(seconds=5)]
                fault.recovery_s = max(((p - at).total_seconds() for p in delayed), default=0.0)
            elif fault.kind == "no tick":
                delayed = [p for (job, due), p in first_publish.items() if minute_bucket(due) == at + MINUTE]
                fault.recovery_s = max(((p - (at + MINUTE)).total_seconds() for p in delayed), default=0.0)
            elif fault.kind == "Kafka broker restart":
                delayed = [p for (job, due), p in first_publish.items()
                           if self.kafka_window and self.kafka_window[0] <= due <= self.kafka_window[1]]
                fault.recovery_s = max(((p - at).total_seconds() for p in delayed), default=0.0)

    def close(self, keep_servers: bool) -> None:
        self.stop.set()
        self.chaos.close(keep_servers)


def _execution(_topic: str, value: dict[str, Any], published: datetime) -> tuple[str, str, datetime, datetime]:
    """What the crash suite keeps of a message: execution_id, job_id, scheduled_at, published."""
    return value["execution_id"], value["job_id"], parse_instant(value["scheduled_at"], "scheduled_at"), published


def run(plan: Plan, keep_servers: bool = False) -> Report:
    return run_suite(Suite(plan), keep_servers)

