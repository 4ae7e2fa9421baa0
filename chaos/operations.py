"""The operations fault suite: everyday changes racing the scans, on real servers (``make chaos-ops``).

Hundreds of jobs fire every 10 s while threads change them at random instants, as users would:
- PATCH of the payload (``{"type": ..., "v": n}``, ``v`` bumped) and of the schedule (PT10S <-> PT15S),
  pause, resume (with and without catch-up) and cancel, from several threads at once;
- races on purpose: a DELETE and a PATCH of one job released at the same instant by a barrier, and two
  PATCHes likewise;
- retries and timeouts in flight: a test worker fails the first attempt of some jobs (``max_retries``
  2) and never reports the first attempt of others (``timeout_s`` 10), so their retries are due while
  the jobs are being changed;
- a 20-second outage of Cassandra's writes only (reads work; ``chaos.faults``), held until a change sent
  during it has been refused;
- a topic allow-listed for the API whose broker refuses every record (``chaos.faults``).
A client answered 409 re-reads the job and tries again; one answered 503 (or not at all) sends the
same request again until it is acknowledged. What the small run's test checks happened is made to happen,
not hoped for: the operations go on until the faults and races are over, the outage lasts until it has
refused a change, and a kind of change no random operation made is made at the end (``Report.unmet`` says
what could not be, and fails the run). The answers are the truth: ``chaos.ops_model`` derives
from them what every job owed and judges what the ``jobs`` topic (and ``job-dlq``) received. After
the operations stop, a quiet window checks that every live job fires on time with its latest
payload, then the suite drains and reads every job back.
"""

from __future__ import annotations

import itertools
import json
import logging
import random
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import requests
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from chaos.common import ChaosStack, Collector, Fault, fault_table, poll, run_suite, start_stack
from chaos.faults import CassandraWrites, refuse_records
from chaos.ops_model import Answer, Doubt, Findings, Handled, Message, Run, Window, judge, save
from devstack import servers
from jobrunner import telemetry
from jobrunner.domain.schedules import parse_instant
from jobrunner.domain.segments import segment_of
from jobrunner.domain.time import rfc3339, utc
from jobrunner_client.worker import Execution, Worker

if TYPE_CHECKING:
    from pathlib import Path

log = logging.getLogger(__name__)

DLQ_TOPIC = "job-dlq"
#: A job whose next run is further in the past than this after the drain is stale.
STALE_AFTER = timedelta(seconds=70)
PERIODS = ("PT10S", "PT15S")
#: The timeout of the jobs whose first attempt is never reported. It counts until the result is applied,
#: so it must leave room for the results function's backlog on a loaded machine (5 s did not).
SILENT_TIMEOUT_S = 10
#: What the last run recorded, to judge it again or follow one job (``python -m chaos.ops_model``).
RECORD = servers.LOG_DIR / "operations-run.json"
#: How long a client keeps sending a request that is refused with 5xx or not answered.
GIVE_UP_AFTER_S = 120.0
#: At most this many changes are sent, one a second, to meet the write outage (``Operations._meet_outage``).
OUTAGE_PROBES = 30
#: The kinds of change every run has acknowledged at least once (resume: with or without catch-up).
EVERY_KIND = ("payload", "schedule", "pause", "resume", "cancel")
#: Attempts at a kind of change no random operation made (a 409 may make one moot).
COVER_TRIES = 5
#: The states a job must be in for a kind of change (any other kind: ACTIVE or PAUSED).
STATES_FOR = {"pause": ("ACTIVE",), "resume": ("PAUSED",)}


@dataclass(frozen=True)
class Plan:
    jobs: int
    segments: int
    op_threads: int
    #: How long the operations go on, and the mean pause between two operations of one thread.
    ops_s: float
    op_pause_s: float
    #: DELETE-vs-PATCH races (and as many PATCH-vs-PATCH races).
    races: int
    #: At most this share of the jobs is cancelled by the random operations (races cancel more).
    cancel_share: float
    #: Seconds into the operations when the writes stop, for how long; when the topic refuses records.
    outage_at_s: float
    outage_s: float
    void_at_s: float
    void_jobs: int
    warmup_s: float
    settle_s: float
    quiet_s: float
    drain_s: float
    flaky_share: float = 0.15
    silent_share: float = 0.10
    #: How long the outage may go on past ``outage_s`` until a change sent during it has been refused.
    outage_overrun_s: float = 40.0


FULL = Plan(jobs=200, segments=8, op_threads=4, ops_s=240, op_pause_s=2.0, races=12, cancel_share=0.12,
            outage_at_s=100, outage_s=20, void_at_s=30, void_jobs=3, warmup_s=20, settle_s=15, quiet_s=90,
            drain_s=150)
SMALL = Plan(jobs=60, segments=4, op_threads=3, ops_s=75, op_pause_s=1.2, races=3, cancel_share=0.12,
             outage_at_s=30, outage_s=20, void_at_s=8, void_jobs=2, warmup_s=12, settle_s=10, quiet_s=40,
             drain_s=45)


@dataclass
class Report:
    plan: dict[str, Any]
    jobs: int = 0
    acknowledged: dict[str, int] = field(default_factory=dict)
    conflicts: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    gave_up: int = 0
    moot: int = 0
    unexpected_answers: list[str] = field(default_factory=list)
    #: What the plan calls for and the run could not make happen (a fault that met no change, a kind of
    #: change never acknowledged): the run fails, since its other figures then prove less than they say.
    unmet: list[str] = field(default_factory=list)
    races: int = 0
    messages: int = 0
    stale: int = 0
    stale_ids: list[str] = field(default_factory=list)
    state_mismatches: list[str] = field(default_factory=list)
    unhealthy_segments: list[str] = field(default_factory=list)
    writes_back_after_s: float | None = None
    flaky_jobs: int = 0
    silent_jobs: int = 0
    void_jobs: list[str] = field(default_factory=list)
    #: Executions of the unpublishable topic's jobs that history shows FAILED, with a reason.
    void_history_failed: int = 0
    #: What the test worker did with the executions: ok, failed, silent.
    worker: dict[str, int] = field(default_factory=dict)
    findings: dict[str, Any] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    wall_s: float = 0.0
    #: Where the run's answers and messages were written (``python -m chaos.ops_model RECORD [JOB_ID]``).
    record: str = ""

    @property
    def lost(self) -> int:
        f = self.findings
        return len(f["lost"]) + len(f["retries_lost"]) + len(f["void_lost"])

    @property
    def zombies(self) -> int:
        return len(self.findings["zombies"])

    def failures(self) -> dict[str, int]:
        """The figures that must be 0."""
        f = self.findings
        return {"lost": self.lost, "stale": self.stale, "zombies": self.zombies,
                "fired while paused": len(f["paused_fires"]), "strays": len(f["strays"]),
                "stale payloads in the quiet window": len(f["quiet_stale_payloads"]),
                "changes acknowledged after a cancel": len(f["changes_after_cancel"]),
                "lost updates": len(f["lost_updates"]), "state mismatches": len(self.state_mismatches),
                "plan not met": len(self.unmet)}

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "lost": self.lost, "zombies": self.zombies,
                           "failures": self.failures()}, indent=2)

    def markdown(self) -> str:
        f = self.findings
        ops = sum(self.acknowledged.values()) - self.acknowledged.get("submit", 0)
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.acknowledged.items()) if k != "submit")
        lines = [
            "| figure | value |", "|---|---|",
            f"| jobs (every 10 s; flaky / silent / on the unpublishable topic) | {self.jobs} "
            f"({self.flaky_jobs} / {self.silent_jobs} / {len(self.void_jobs)}) |",
            f"| changes acknowledged | {ops} ({kinds}) |",
            f"| races (DELETE vs PATCH, PATCH vs PATCH) | {self.races} |",
            f"| 409 answers (re-read and retried) | {_counts(self.conflicts)} |",
            f"| 5xx answers or no answer (sent again) | {_counts(self.refused)} |",
            f"| requests given up / made moot by another change | {self.gave_up} / {self.moot} |",
            f"| plan not met (a fault that met no change, a kind of change never made) | {len(self.unmet)} |",
            f"| scheduled fires owed / published | {f['expected']} / {f['published']} |",
            f"| **lost** (fires + retries + dead letters) | **{self.lost}** "
            f"({len(f['lost'])} + {len(f['retries_lost'])} + {len(f['void_lost'])}) |",
            f"| **stale jobs** (next run > 70 s past, or silent in the quiet window) | **{self.stale}** |",
            f"| **zombies** (published after the cancel was acknowledged) | **{self.zombies}** |",
            f"| fired while paused / strays (a fire time no acknowledged schedule has) | "
            f"{len(f['paused_fires'])} / {len(f['strays'])} |",
            f"| fires waived by a change (due just before it) / not judged (change in doubt) | "
            f"{f['waived']} / {f['unjudged']} |",
            f"| fires and retries waived by a change though already overdue (> 10 s / 60 s late) | "
            f"{len(f['overdue_waived'])} |",
            f"| duplicates (same execution_id again) | {f['duplicates']} |",
            f"| retries owed / published (failed or timed-out attempts) | "
            f"{f['retries_owed']} / {f['retries_published']} |",
            f"| worker: attempts failed / never reported (timeouts) | {self.worker.get('failed', 0)} / "
            f"{self.worker.get('silent', 0)} |",
            f"| quiet window: live jobs, fires owed / published / late (> 5 s) | {f['quiet_live_jobs']}, "
            f"{f['quiet_expected']} / {f['quiet_published']} / {f['quiet_late']} |",
            f"| quiet window: fires with a stale payload | {len(f['quiet_stale_payloads'])} |",
            f"| stale payloads during the operations (> 5 s after the PATCH) | {len(f['stale_payloads_during_ops'])} |",
            f"| changes acknowledged after a cancel / lost updates / state mismatches | "
            f"{len(f['changes_after_cancel'])} / {len(f['lost_updates'])} / {len(self.state_mismatches)} |",
            f"| max lateness: operations / write outage / quiet window | {f['max_lateness_ops_s']:.1f} s / "
            f"{f['max_lateness_outage_s']:.1f} s / {f['max_lateness_quiet_s']:.1f} s |",
            f"| unpublishable topic: fires owed / published before / dead-lettered / FAILED in history | "
            f"{f['void_expected']} / {f['void_published']} / {f['void_dead_lettered']} / {self.void_history_failed} |",
            f"| unpublishable topic's segments: other jobs' fires / lost / max lateness | "
            f"{f['void_segment_fires']} / {f['void_segment_lost']} / {f['void_segment_max_lateness_s']:.1f} s |",
            f"| dead letters of other jobs / unhealthy segments at the end | {len(f['unexpected_dead_letters'])} / "
            f"{len(self.unhealthy_segments)} |",
            f"| messages on `jobs` | {self.messages} |",
            f"| wall time of the suite | {self.wall_s:.0f} s |",
            "", *fault_table(self.faults),
        ]
        examples = [(name, items) for name, items in (
            ("lost", f["lost"] + f["retries_lost"] + f["void_lost"]), ("stale", self.stale_ids),
            ("zombies", f["zombies"]), ("fired while paused", f["paused_fires"]), ("strays", f["strays"]),
            ("stale payloads (quiet window)", f["quiet_stale_payloads"]),
            ("waived though overdue", f["overdue_waived"]),
            ("changes acknowledged after a cancel", f["changes_after_cancel"]), ("lost updates", f["lost_updates"]),
            ("state mismatches", self.state_mismatches), ("unexpected answers", self.unexpected_answers),
            ("plan not met", self.unmet),
            ("unhealthy segments", self.unhealthy_segments)) if items]
        for name, items in examples:
            lines += ["", f"{name} (first {min(len(items), 10)} of {len(items)}):", "",
                      *(f"- `{item}`" for item in items[:10])]
        return "\n".join(lines) + "\n"


def _counts(counter: dict[str, int]) -> str:
    total = sum(counter.values())
    return f"{total}" + (f" ({', '.join(f'{k} {n}' for k, n in sorted(counter.items()))})" if total else "")


@dataclass(frozen=True)
class Reply:
    status: int  # 0: no answer (connection error or timeout)
    body: Any
    sent: datetime
    received: datetime


class Client:
    def __init__(self, url: str, token: str) -> None:
        self._url = url
        self._headers = {"Authorization": f"Bearer {token}"}

    def call(self, method: str, path: str, body: Any = None, barrier: threading.Barrier | None = None) -> Reply:
        if barrier is not None:
            barrier.wait(timeout=30)
        sent = datetime.now(UTC)
        try:
            response = requests.request(method, self._url + path, json=body, headers=self._headers, timeout=30)
        except requests.RequestException:
            return Reply(0, None, utc(sent), utc(datetime.now(UTC)))
        received = datetime.now(UTC)
        try:
            payload = response.json()
        except ValueError:
            payload = response.text
        return Reply(response.status_code, payload, utc(sent), utc(received))


class TestWorker:
    """The workers' side: the job's payload ``type`` says what happens to an execution.

    ``flaky`` fails its first attempt; ``silent`` runs its first attempt but its report never reaches
    ``job-results`` (as if the worker died after the work), so the execution times out; any other
    type succeeds. It is the product's worker helper (``jobrunner_client.worker``) with its producer wrapped.
    """

    def __init__(self, bootstrap: str, group_id: str, results_topic: str) -> None:
        self.handled: list[Handled] = []
        self._silent: set[str] = set()  # executions whose report is dropped
        self._producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", linger_ms=5)
        # From the end of the topic as it is now: not the executions of earlier runs (the broker keeps them).
        consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=group_id, enable_auto_commit=False,
                                 max_poll_records=100)
        partitions = [TopicPartition("jobs", p) for p in sorted(consumer.partitions_for_topic("jobs") or [])]
        consumer.assign(partitions)
        consumer.seek_to_end(*partitions)
        for tp in partitions:
            consumer.position(tp)
        self.worker = Worker(consumer=consumer, producer=self, results_topic=results_topic, span=telemetry.span)

        @self.worker.handler(None)
        def run(execution: Execution) -> None:
            outcome = "ok"
            if execution.attempt == 1 and execution.type in ("flaky", "silent"):
                outcome = "failed" if execution.type == "flaky" else "silent"
            self.handled.append(Handled(execution.execution_id, execution.job_id,
                                        parse_instant(execution.scheduled_at, "scheduled_at"), execution.attempt,
                                        outcome, utc(datetime.now(UTC))))
            if outcome == "silent":
                self._silent.add(execution.execution_id)
            if outcome == "failed":
                raise RuntimeError("a flaky failure on the first attempt")

        self._thread = threading.Thread(target=self.worker.run, kwargs={"install_signal_handlers": False},
                                        name="ops-worker", daemon=True)
        self._thread.start()

    # The producer the worker helper reports with: ``silent`` first attempts are dropped.
    def send(self, topic: str, key: bytes, value: bytes) -> None:
        if json.loads(value)["execution_id"] in self._silent:
            return
        self._producer.send(topic, key=key, value=value)

    def flush(self) -> None:
        self._producer.flush()

    def close(self) -> None:
        self._producer.close(timeout=10)

    def stop(self) -> None:
        self.worker.stopping.set()
        self._thread.join(timeout=30)


class Operations:
    #: Seconds between two sends of a change refused with a 5xx or not answered, and between two changes sent
    #: to meet the write outage.
    pause_s = 1.0

    def __init__(self, plan: Plan, seed: int = 12) -> None:
        self.plan = plan
        self.report = Report(plan=asdict(plan))
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.answers: list[Answer] = []
        self.doubts: list[Doubt] = []
        self.views: dict[str, dict[str, Any]] = {}  # the latest answer of each job, as a client knows it
        self.kinds: dict[str, str] = {}  # job id -> ok, flaky, silent, void
        self.acknowledged: Counter[str] = Counter()
        self.conflicts: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self.values = itertools.count(1)
        self.cancels = 0
        self.stop = threading.Event()
        self.outage: Window | None = None
        self.void_at: datetime | None = None
        self.tag = uuid.uuid4().hex[:8]
        # A topic of this run's own: the broker keeps a refused topic's setting from one run to the next.
        self.void_topic = f"ops-void-{self.tag}"
        #: Where the run's answers and messages are written at the end.
        self.record_path = RECORD

    # -- set-up ---------------------------------------------------------------------------------

    def start(self) -> None:
        # Results on a topic of this run's own too, so that the results function does not first read
        # through every result of the earlier runs.
        results = f"job-results-{self.tag}"
        self.chaos: ChaosStack = start_stack(self.plan.segments, "ops", auto_tick=True, topics=[results],
                                             allowed_topics=f"jobs,{self.void_topic}",
                                             results_topic=results)
        self.writes = CassandraWrites(self.chaos.endpoints.cassandra_host)
        self.writes.enable_jmx()
        self.writes.open()  # servers reused from an earlier run: never start with its outage still on
        bootstrap = self.chaos.endpoints.kafka_bootstrap
        self.collector = Collector(bootstrap, message_of, topics=("jobs", self.void_topic, DLQ_TOPIC))
        self.worker = TestWorker(bootstrap, group_id=f"ops-worker-{self.tag}",
                                 results_topic=self.chaos.settings.results_topic)
        self.client = Client(self.chaos.stack.url, self.chaos.stack.token)

    def close(self, keep_servers: bool) -> None:
        self.stop.set()
        if self.writes.stopped:  # the run ended in the middle of the outage: never leave the node broken
            self.writes.resume()
        self.worker.stop()
        self.chaos.close(keep_servers)

    # -- the run --------------------------------------------------------------------------------

    def run(self) -> Report:
        started = time.monotonic()
        plan = self.plan
        self._submit_all()
        time.sleep(plan.warmup_s)
        ops_start = datetime.now(UTC)
        threads = [threading.Thread(target=self._operate_randomly, name=f"ops-{i}", daemon=True)
                   for i in range(plan.op_threads)]
        self.scripted = [threading.Thread(target=self._race, args=(ops_start,), name="races", daemon=True),
                         threading.Thread(target=self._faults, args=(ops_start,), name="faults", daemon=True)]
        threads += self.scripted
        for thread in threads:
            thread.start()
        self._operations_phase()
        self.stop.set()
        for thread in threads:
            thread.join()
        time.sleep(plan.settle_s)
        quiet_start = datetime.now(UTC)
        time.sleep(plan.quiet_s)
        quiet = Window(utc(quiet_start), utc(datetime.now(UTC)))
        deadline = time.monotonic() + plan.drain_s
        findings = self._judge(quiet)
        while time.monotonic() < deadline and (findings.lost or findings.retries_lost or findings.void_lost):
            time.sleep(3)
            findings = self._judge(quiet)
        self._read_back(findings)
        self.collector.stop()
        self.report.record = str(self.record_path)
        self._finish(self._judge(quiet, self.record_path))
        self.report.wall_s = time.monotonic() - started
        return self.report

    def _operations_phase(self) -> None:
        """The operations go on for the plan's time, and on until the races and the faults are over, so that
        every fault meets them (a loaded machine once took 45 s to stop the writes, and the operations had
        ended when it did); then any kind of change none of them made is made. A suite with faults of its
        own may wait for them instead."""
        time.sleep(self.plan.ops_s)
        for thread in self.scripted:
            thread.join()
        self._cover_kinds()

    def _judge(self, quiet: Window, record: Path | None = None) -> Findings:
        void = frozenset(j for j, k in self.kinds.items() if k == "void")
        void_segments = {segment_of(j, self.plan.segments) for j in void}
        neighbours = frozenset(j for j in self.kinds if j not in void and segment_of(j, self.plan.segments)
                               in void_segments)
        with self.lock:
            answers, doubts = list(self.answers), list(self.doubts)
        retries = {j: 2 if k == "flaky" else 1 for j, k in self.kinds.items() if k in ("flaky", "silent")}
        run = Run(answers=answers, doubts=doubts, messages=list(self.collector.seen), handled=list(self.worker.handled),
                  void_jobs=void, void_at=self.void_at, neighbours=neighbours, outage=self.outage, quiet=quiet,
                  max_retries=retries, dead_letter_topic=DLQ_TOPIC)
        if record is not None:
            save(run, record)
        return judge(run)

    def _submit_all(self) -> None:
        plan = self.plan
        bodies = []
        for i in range(plan.jobs):
            kind = "ok"
            if i < plan.void_jobs:
                kind = "void"
            elif i < plan.void_jobs + plan.jobs * plan.flaky_share:
                kind = "flaky"
            elif i < plan.void_jobs + plan.jobs * (plan.flaky_share + plan.silent_share):
                kind = "silent"
            body: dict[str, Any] = {"schedule": {"every": "PT10S"}, "payload": {"type": kind, "v": 0},
                                    "idempotency_key": f"ops-{i}"}
            if kind == "void":
                body["topic"] = self.void_topic
            elif kind == "flaky":
                body.update(max_retries=2, backoff={"initial_delay_s": 2, "multiplier": 1, "max_delay_s": 2})
            elif kind == "silent":
                body.update(max_retries=1, timeout_s=SILENT_TIMEOUT_S,
                            backoff={"initial_delay_s": 2, "multiplier": 1, "max_delay_s": 2})
            bodies.append((kind, body))
        with ThreadPoolExecutor(max_workers=8) as pool:
            for kind, answer in pool.map(lambda kb: (kb[0], self._submit(kb[1])), bodies):
                if answer is not None:
                    self.kinds[answer.job_id] = kind
        kinds = Counter(self.kinds.values())
        self.report.jobs = len(self.kinds)
        self.report.flaky_jobs, self.report.silent_jobs = kinds["flaky"], kinds["silent"]
        self.report.void_jobs = sorted(j for j, k in self.kinds.items() if k == "void")

    def _submit(self, body: dict[str, Any]) -> Answer | None:
        deadline = time.monotonic() + GIVE_UP_AFTER_S
        while time.monotonic() < deadline:
            reply = self.client.call("POST", "/jobs", body)
            if reply.status in (200, 201):
                answer = Answer(reply.body["job_id"], "submit", reply.sent, reply.received, reply.body)
                self._record(answer)
                return answer
            if reply.status and reply.status < 500:
                self._unexpected(f"POST /jobs {reply.status}: {str(reply.body)[:200]}")
                return None
            time.sleep(1)
        self.report.gave_up += 1
        return None

    # -- operations -----------------------------------------------------------------------------

    def _operate_randomly(self) -> None:
        rng = random.Random(self.rng.random())
        while not self.stop.is_set():
            job_id = self._pick(rng)
            if job_id is not None:
                self.operate(job_id, self._choose(rng, job_id))
            self.stop.wait(rng.expovariate(1 / self.plan.op_pause_s))

    def _pick(self, rng: random.Random) -> str | None:
        with self.lock:
            live = [j for j, v in self.views.items() if v["state"] != "CANCELLED" and self.kinds.get(j) != "void"]
        return rng.choice(live) if live else None

    def _choose(self, rng: random.Random, job_id: str) -> str:
        with self.lock:
            paused = self.views[job_id]["state"] == "PAUSED"
            may_cancel = self.cancels < self.plan.cancel_share * self.plan.jobs
        if paused:
            kinds, weights = ["resume", "catch_up", "payload", "schedule", "cancel"], [35, 35, 15, 10, 5]
        else:
            kinds, weights = ["payload", "schedule", "pause", "cancel"], [50, 22, 20, 8]
        kind = rng.choices(kinds, weights)[0]
        if kind == "cancel":
            if not may_cancel:
                return "payload"
            with self.lock:
                self.cancels += 1
        return kind

    def operate(self, job_id: str, kind: str, barrier: threading.Barrier | None = None) -> None:
        """Send one change until it is acknowledged, as a careful user would: a 409 re-reads the job and
        decides again; a 5xx or no answer sends the same request again."""
        method, path, body = self._request(job_id, kind)
        deadline = time.monotonic() + GIVE_UP_AFTER_S
        while time.monotonic() < deadline:
            reply = self.client.call(method, path, body, barrier)
            barrier = None
            if 200 <= reply.status < 300:
                self._record(Answer(job_id, kind, reply.sent, reply.received, reply.body))
                return
            if reply.status == 409:
                with self.lock:
                    self.conflicts[kind] += 1
                current = self.client.call("GET", f"/jobs/{job_id}")
                if current.status != 200:
                    self._unexpected(f"GET /jobs/{job_id} after a 409: {current.status}")
                    return
                state = current.body["state"]
                if state == "CANCELLED" or (kind == "pause" and state == "PAUSED") or (
                        kind in ("resume", "catch_up") and state == "ACTIVE"):
                    with self.lock:
                        self.report.moot += 1
                    return
                method, path, body = self._request(job_id, kind, current.body)
                continue
            if reply.status == 0 or reply.status >= 500:
                with self.lock:
                    self.refused[kind] += 1
                    self.doubts.append(Doubt(job_id, kind, reply.sent, reply.received, body))
                time.sleep(self.pause_s)
                continue
            self._unexpected(f"{method} {path} {reply.status}: {str(reply.body)[:200]}")
            return
        with self.lock:
            self.report.gave_up += 1

    def _request(self, job_id: str, kind: str, job: dict[str, Any] | None = None) -> tuple[str, str, Any]:
        with self.lock:
            job = job or self.views[job_id]
        path = f"/jobs/{job_id}"
        if kind == "payload":
            return "PATCH", path, {"payload": {"type": job["payload"]["type"], "v": next(self.values)}}
        if kind == "schedule":
            current = job["schedule"].get("every")
            return "PATCH", path, {"schedule": {"every": PERIODS[1] if current == PERIODS[0] else PERIODS[0]}}
        if kind == "pause":
            return "POST", f"{path}/pause", None
        if kind in ("resume", "catch_up"):
            return "POST", f"{path}/resume", {"catch_up": kind == "catch_up"}
        return "DELETE", path, None

    def _record(self, answer: Answer) -> None:
        with self.lock:
            self.answers.append(answer)
            self.acknowledged[answer.kind] += 1
            known = self.views.get(answer.job_id)
            if known is None or int(known["version"]) <= answer.version:
                self.views[answer.job_id] = answer.job

    def _unexpected(self, text: str) -> None:
        with self.lock:
            self.report.unexpected_answers.append(text)

    def _race(self, ops_start: datetime) -> None:
        """DELETE vs PATCH, then PATCH vs PATCH, on one job each, both requests released at once."""
        span = self.plan.ops_s / max(1, self.plan.races)
        for k in range(self.plan.races):
            for offset, pair in ((0.25, ("cancel", "payload")), (0.75, ("payload", "payload"))):
                at = ops_start + timedelta(seconds=span * (k + offset))
                if self.stop.wait(max(0.0, (at - datetime.now(UTC)).total_seconds())):
                    return
                job_id = self._pick(self.rng)
                if job_id is None:
                    continue
                barrier = threading.Barrier(2)
                racers = [threading.Thread(target=self.operate, args=(job_id, kind, barrier)) for kind in pair]
                for racer in racers:
                    racer.start()
                for racer in racers:
                    racer.join()
                with self.lock:
                    self.report.races += 1

    def _faults(self, ops_start: datetime) -> None:
        plan = self.plan
        if self.stop.wait(plan.void_at_s):
            return
        refuse_records(self.chaos.endpoints.kafka_bootstrap, self.void_topic)
        self.void_at = utc(datetime.now(UTC))
        self.report.faults.append(Fault("unpublishable topic", rfc3339(self.void_at),
                                        f"the broker refuses every record on `{self.void_topic}` "
                                        f"(max.message.bytes=1), topic of {plan.void_jobs} jobs"))
        outage_at = ops_start + timedelta(seconds=plan.outage_at_s)
        if self.stop.wait(max(0.0, (outage_at - datetime.now(UTC)).total_seconds())):
            return
        self._write_outage()

    def _write_outage(self) -> None:
        """Stop the writes for the plan's time, and on (up to ``outage_overrun_s`` more) until a change sent
        meanwhile has been refused: a change is sent, one a second, until one is (``_meet_outage``)."""
        plan = self.plan
        began = utc(datetime.now(UTC))
        over = threading.Event()
        self.writes.stop()
        try:
            stopped = utc(datetime.now(UTC))
            refused = self._refusals()
            prober = threading.Thread(target=self._meet_outage, args=(refused, over), name="outage-probe",
                                      daemon=True)
            prober.start()
            time.sleep(plan.outage_s)
            met = poll(lambda: self._refusals() > refused, within_s=plan.outage_overrun_s, every_s=0.2)
        finally:
            over.set()
            self.writes.resume()
        self.outage = Window(stopped, utc(datetime.now(UTC)))
        seconds = (self.outage.end - stopped).total_seconds()
        self.report.faults.append(Fault("Cassandra writes fail, reads work", rfc3339(began),
                                        f"{self.writes.threads} -> 0 write threads (nodetool setconcurrency) "
                                        f"for {seconds:.0f} s, from {stopped:%H:%M:%S}"))
        if not met:
            self._unmet(f"the write outage ({seconds:.0f} s) refused no change: every change sent during it was "
                        "acknowledged (did the write stage really stop?)")
        prober.join(timeout=GIVE_UP_AFTER_S + 10)  # its change in flight is acknowledged once the writes are back

    def _meet_outage(self, refused: int, over: threading.Event) -> None:
        """Send a payload change, one a second, until the run counts more than ``refused`` refusals (a 5xx or
        no answer, to this thread or any other) or the outage is ``over``; at most ``OUTAGE_PROBES``. Each is
        sent as a careful user does (``operate``): a refused change is sent again until acknowledged, so none
        is left in doubt, and the first refused one returns only once the writes are back."""
        rng = random.Random(self.rng.random())
        for _ in range(OUTAGE_PROBES):
            if self._refusals() > refused or over.is_set():
                return
            job_id = self._pick(rng)
            if job_id is not None:
                self.operate(job_id, "payload")
            if over.wait(self.pause_s):
                return

    def _refusals(self) -> int:
        with self.lock:
            return sum(self.refused.values())

    def _cover_kinds(self) -> None:
        """Make each kind of change in ``EVERY_KIND`` that no operation had acknowledged (the random ones
        nearly always make all; a loaded machine makes few): on a job in a state that allows it, a few
        times at most (a 409 may make one moot)."""
        for kind in EVERY_KIND:
            for _ in range(COVER_TRIES):
                if self._made(kind):
                    break
                job_id = self._job_in(*STATES_FOR.get(kind, ("ACTIVE", "PAUSED")))
                if job_id is None and kind == "resume":  # none paused: pause one first
                    job_id = self._job_in("ACTIVE")
                    if job_id is not None:
                        self.operate(job_id, "pause")
                if job_id is not None:
                    self.operate(job_id, kind)
            if not self._made(kind):
                self._unmet(f"no {kind} acknowledged after {COVER_TRIES} tries")

    def _made(self, kind: str) -> bool:
        with self.lock:
            return self.acknowledged[kind] + (self.acknowledged["catch_up"] if kind == "resume" else 0) > 0

    def _job_in(self, *states: str) -> str | None:
        """A job of the run (not on the unpublishable topic) in one of ``states``, as the client last saw it."""
        with self.lock:
            return next((j for j, v in sorted(self.views.items())
                         if v["state"] in states and self.kinds.get(j) not in (None, "void")), None)

    def _unmet(self, text: str) -> None:
        log.error("plan not met: %s", text)
        with self.lock:
            self.report.unmet.append(text)

    # -- reading back and counting ----------------------------------------------------------------

    def _read_back(self, findings: Findings) -> None:
        """Every job as the API now tells it: live jobs must not be stale, and states must match."""
        now = datetime.now(UTC)
        silent_in_quiet = set(findings.quiet_silent_jobs)
        for job_id in sorted(self.kinds):
            reply = self.client.call("GET", f"/jobs/{job_id}")
            if reply.status != 200:
                self._unexpected(f"GET /jobs/{job_id} at the end: {reply.status}")
                continue
            job = reply.body
            expected = findings.final_states.get(job_id)
            if expected is not None and job["state"] != expected:
                self.report.state_mismatches.append(
                    f"{job_id}: {job['state']} v{job['version']}, but the acknowledged changes left it {expected}")
            if job["state"] != "ACTIVE" or expected != "ACTIVE":
                continue
            next_run = job.get("next_run_at")
            if next_run is None or parse_instant(next_run, "next_run_at") < now - STALE_AFTER:
                self.report.stale_ids.append(f"{job_id} ({self.kinds[job_id]}): next_run_at {next_run}, "
                                             f"last_run_at {job.get('last_run_at')}, v{job['version']}")
            elif job_id in silent_in_quiet:
                self.report.stale_ids.append(f"{job_id} ({self.kinds[job_id]}): no fire in the quiet window, "
                                             f"next_run_at {next_run}")
        self.report.stale = len(self.report.stale_ids)
        for job_id in self.report.void_jobs:
            reply = self.client.call("GET", f"/jobs/{job_id}/executions?limit=500")
            items = reply.body.get("items", []) if reply.status == 200 else []
            self.report.void_history_failed += sum(1 for e in items if e["status"] == "FAILED" and e.get("error"))
        reply = self.client.call("GET", "/segments")
        for segment in reply.body.get("items", []) if reply.status == 200 else []:
            if not segment["healthy"]:
                self.report.unhealthy_segments.append(
                    f"segment {segment['segment']}: watermark {segment['watermark']}, lag {segment['lag_s']} s")

    def _finish(self, findings: Findings) -> None:
        report = self.report
        report.findings = {k: v for k, v in asdict(findings).items()
                           if k not in ("final_states", "latest_payloads", "lateness")}
        report.acknowledged = dict(self.acknowledged)
        report.conflicts = dict(self.conflicts)
        report.refused = dict(self.refused)
        report.messages = sum(1 for m in self.collector.seen if m.topic == "jobs")
        report.worker = dict(Counter(h.outcome for h in self.worker.handled))
        if self.outage is not None:
            back = [a.received for a in self.answers if a.received > self.outage.end]
            if back:
                report.writes_back_after_s = (min(back) - self.outage.end).total_seconds()
            for fault in report.faults:
                if fault.kind.startswith("Cassandra") and findings.outage_published_by_s is not None:
                    fault.recovery_s = findings.outage_published_by_s
                    fault.detail += (f"; API acknowledged changes again {report.writes_back_after_s or 0:.1f} s "
                                     f"after; the {findings.outage_fires} fires due meanwhile published by then")


def message_of(topic: str, value: dict[str, Any], published: datetime) -> Message:
    return Message(topic=topic, execution_id=value["execution_id"], job_id=value["job_id"],
                   scheduled_at=parse_instant(value["scheduled_at"], "scheduled_at"),
                   attempt=int(value.get("attempt", 1)), trigger=value.get("trigger", "SCHEDULE"),
                   payload=value.get("payload"), published=utc(published))


def run(plan: Plan, keep_servers: bool = False) -> Report:
    return run_suite(Operations(plan), keep_servers)
