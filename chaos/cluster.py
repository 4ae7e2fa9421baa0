"""The cluster fault suite (``make chaos-cluster``): nodes and brokers killed under load, on a cluster.

The operations suite (``chaos.operations``) runs on a cluster of its own (``devstack.cluster``'s
``chaos-cluster``: three Cassandra nodes, three KRaft brokers, the system at LOCAL_QUORUM, acks=all):
hundreds of jobs fire every 10 s while threads PATCH, pause, resume and cancel them, some executions fail
or time out and are retried, one-time jobs are submitted all along (due 10 to 60 s later), and a reader
lists and reads jobs. Meanwhile, one after the other, each healed before the next:

1. ``kill -9`` of a Cassandra node; restarted after ``down_s``; healed when no node holds a hint for it;
2. ``kill -9`` of the Kafka broker leading the most ``jobs`` partitions; restarted; healed when every
   partition has all its replicas in sync again;
3. a Cassandra node (a seed, this time) and the broker then leading the most ``jobs`` partitions killed
   at the same instant; both restarted; healed when both are.

Then a quiet window and the drain, and the judge of the operations suite decides what was owed and
lost (``chaos.ops_model``), while ``chaos.cluster_report`` counts the requests refused during each fault
and the lateness of the fires due meanwhile. A network delay on one node is not injected: see
``LEFT_OUT``.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from chaos import operations
from chaos.cluster_faults import ClusterWatch, wait_drained, wait_until
from chaos.cluster_report import Call, ClusterReport, FaultRun, figures, lateness_in, percentile, refused_during
from chaos.common import Collector, Fault, run_suite, start_stack
from chaos.operations import DLQ_TOPIC, Client, Operations, Reply, TestWorker, message_of
from devstack import cluster
from jobrunner.domain.time import rfc3339, utc

if TYPE_CHECKING:
    from chaos.ops_model import Message

log = logging.getLogger(__name__)

#: Why the network delay of the issue is not among the faults.
LEFT_OUT = [
    "a network delay on one node. Delaying one node's packets takes `tc qdisc ... netem` on the loopback "
    "interface: CAP_NET_ADMIN (root or sudo) on a developer's machine, and on the machine these figures come "
    "from the kernel has no netem at all (`tc` answers \"Specified qdisc kind is unknown\", even inside a "
    "network namespace of its own). A user-space proxy in front of one node would delay only the clients' "
    "path to it, not the nodes' and brokers' traffic with each other, so it would not be that fault.",
]


@dataclass(frozen=True)
class Plan:
    ops: operations.Plan
    #: The calm before the first fault, whose lateness is the unfaulted figure.
    baseline_s: float
    #: How long killed processes stay down, and the pause between one fault's healing and the next kill.
    down_s: float
    gap_s: float
    #: The longest the suite waits for the cluster to heal from one fault.
    heal_timeout_s: float
    #: One-time jobs submitted, and reads made, per second all along the operations.
    submissions_per_s: float
    reads_per_s: float


#: Sized for the 2-core machine that also runs the six JVMs: at 200 jobs (20 fires a second) and two
#: submissions and two reads a second, the results function fell ever further behind and the API's
#: single execution environment left requests unanswered, before any fault.
FULL = Plan(
    ops=operations.Plan(jobs=100, segments=8, op_threads=3, ops_s=0, op_pause_s=2.0, races=8, cancel_share=0.10,
                        outage_at_s=0, outage_s=0, void_at_s=0, void_jobs=0, warmup_s=20, settle_s=15, quiet_s=60,
                        drain_s=150),
    baseline_s=60, down_s=45, gap_s=30, heal_timeout_s=300, submissions_per_s=1.0, reads_per_s=1.0,
)
SMALL = Plan(
    ops=operations.Plan(jobs=60, segments=4, op_threads=2, ops_s=0, op_pause_s=1.5, races=2, cancel_share=0.10,
                        outage_at_s=0, outage_s=0, void_at_s=0, void_jobs=0, warmup_s=10, settle_s=10, quiet_s=30,
                        drain_s=90),
    baseline_s=20, down_s=20, gap_s=10, heal_timeout_s=180, submissions_per_s=1.0, reads_per_s=1.0,
)


class RecordingClient(Client):
    """The operations suite's client, keeping every request's route, times and answer."""

    def __init__(self, url: str, token: str) -> None:
        super().__init__(url, token)
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def call(self, method: str, path: str, body: Any = None, barrier: threading.Barrier | None = None) -> Reply:
        reply = super().call(method, path, body, barrier)
        with self._lock:
            self.calls.append(Call(_route(method, path), reply.sent, reply.received, reply.status))
        return reply


def _route(method: str, path: str) -> str:
    """``GET /jobs/{id}/executions`` for ``GET /jobs/3f2.../executions?limit=10``."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    if len(parts) > 1:
        parts[1] = "{id}"
    return f"{method} /{'/'.join(parts)}"


class ClusterSuite(Operations):
    def __init__(self, plan: Plan, seed: int = 18) -> None:
        super().__init__(plan.ops, seed)
        self.cluster_plan = plan
        self.layout = cluster.CHAOS_CLUSTER
        self.record_path = self.layout.home / "logs" / "cluster-run.json"
        self.report = ClusterReport(plan=asdict(plan), left_out=list(LEFT_OUT))
        self.runs: list[FaultRun] = []
        self.baseline: tuple[datetime, datetime] | None = None
        self.faults_done = threading.Event()
        self.once = 0

    # -- set-up ---------------------------------------------------------------------------------

    def start(self) -> None:
        if not any(cluster.status(self.layout).values()):
            cluster.wipe(self.layout)  # a new cluster each run: its start is measured from nothing
        try:
            self._start()
        except BaseException:  # the suite never ran: never leave its cluster behind
            cluster.down(self.layout)
            raise

    def _start(self) -> None:
        startup = cluster.up(self.layout)
        report = self.report
        assert isinstance(report, ClusterReport)
        report.startup_s = startup.seconds if startup.started else None
        report.cluster = {
            "cassandra": f"{len(self.layout.cassandra_hosts)} Cassandra nodes, keyspace at replication factor "
                         f"{self.layout.replication_factor}, LOCAL_QUORUM",
            "kafka": f"{len(self.layout.kafka_ports)} KRaft brokers, topics at replication factor "
                     f"{self.layout.replication_factor}, min.insync.replicas {self.layout.min_insync_replicas}, "
                     "acks=all",
        }
        results = f"job-results-{self.tag}"
        self.chaos = start_stack(self.plan.segments, "cluster", auto_tick=True, topics=["jobs", results, DLQ_TOPIC],
                                 endpoints=self.layout.endpoints(), log_dir=self.layout.home / "logs",
                                 one_scan_per_partition=True,
                                 results_topic=results, **self.layout.settings())
        self.chaos.stop_servers = lambda: cluster.down(self.layout)
        bootstrap = self.chaos.endpoints.kafka_bootstrap
        self.collector = Collector(bootstrap, message_of, topics=("jobs", DLQ_TOPIC))
        self.worker = TestWorker(bootstrap, group_id=f"cluster-worker-{self.tag}",
                                 results_topic=self.chaos.settings.results_topic)
        self.client = self.recording = RecordingClient(self.chaos.stack.url, self.chaos.stack.token)
        self.watch = ClusterWatch(self.layout)

    def close(self, keep_servers: bool) -> None:
        self.stop.set()
        self.worker.stop()
        self.watch.close()
        self.chaos.close(keep_servers)

    # -- the run --------------------------------------------------------------------------------

    def _operations_phase(self) -> None:
        """Submissions and reads go on beside the operations, until every fault has healed."""
        extra = [threading.Thread(target=self._submit_continuously, name="submit", daemon=True),
                 threading.Thread(target=self._read_continuously, name="read", daemon=True)]
        for thread in extra:
            thread.start()
        self.faults_done.wait()
        self.stop.set()
        for thread in extra:
            thread.join()

    def _pick(self, rng: random.Random) -> str | None:
        """Operations change the recurring jobs only (a one-time job's run is judged, not changed)."""
        with self.lock:
            live = [j for j, v in self.views.items() if v["state"] != "CANCELLED" and j in self.kinds]
        return rng.choice(live) if live else None

    def _submit_continuously(self) -> None:
        rng = random.Random(self.rng.random())
        pause = 1 / self.cluster_plan.submissions_per_s
        while not self.stop.wait(pause):
            self.once += 1
            due = datetime.now(UTC) + timedelta(seconds=rng.uniform(10, 60))
            body = {"schedule": {"at": rfc3339(due)}, "payload": {"type": "ok", "once": self.once},
                    "idempotency_key": f"once-{self.tag}-{self.once}"}
            threading.Thread(target=self._submit, args=(body,), daemon=True).start()

    def _read_continuously(self) -> None:
        rng = random.Random(self.rng.random())
        pause = 1 / self.cluster_plan.reads_per_s
        while not self.stop.wait(pause):
            job_id = self._pick(rng)
            path = rng.choice(["/jobs?limit=20", f"/jobs/{job_id}", f"/jobs/{job_id}/executions?limit=10"])
            if job_id is not None or path.startswith("/jobs?"):
                self.client.call("GET", path)

    def _faults(self, ops_start: datetime) -> None:
        plan = self.cluster_plan
        try:
            if self.stop.wait(plan.baseline_s):
                return
            self.baseline = (utc(ops_start), utc(datetime.now(UTC)))
            self._kill_and_heal("Cassandra node", ["cassandra-3"])
            if self.stop.wait(plan.gap_s):
                return
            leader, partitions = self.watch.busiest_leader()
            self._kill_and_heal("Kafka broker", [leader], f"{leader} led jobs partitions {partitions}")
            if self.stop.wait(plan.gap_s):
                return
            leader, partitions = self.watch.busiest_leader()
            self._kill_and_heal("Cassandra node and Kafka broker", ["cassandra-1", leader],
                                f"{leader} led jobs partitions {partitions}")
            self.stop.wait(plan.gap_s)
        except Exception:
            log.exception("a fault failed")
            self.unexpected(f"a fault failed: see {self.layout.home / 'logs'}")
        finally:
            self.faults_done.set()

    def unexpected(self, text: str) -> None:
        with self.lock:
            self.report.unexpected_answers.append(text)

    def _kill_and_heal(self, kind: str, victims: list[str], note: str = "") -> None:
        """Kill ``victims`` at once, keep them down, start them again, and wait until the cluster has healed."""
        plan = self.cluster_plan
        nodes = [v for v in victims if v.startswith("cassandra")]
        brokers = [v for v in victims if v.startswith("kafka")]
        host_ids = {n: self.watch.host_id(n) for n in nodes}
        run = FaultRun(kind, victims, utc(datetime.now(UTC)), notes=[note] if note else [])
        self.runs.append(run)
        for victim in victims:
            self.watch.kill(victim)
        log.info("killed %s", victims)
        if brokers:  # how long the partitions it led went without a leader (the controllers fence it first)
            moved = wait_until(lambda: not any(self.watch.led_by(b) for b in brokers), plan.down_s)
            run.notes.append(f"its partitions had new leaders {moved:.1f} s after the kill" if moved is not None
                             else f"its partitions had no new leader within {plan.down_s:.0f} s")
        time.sleep(max(0.0, plan.down_s - (datetime.now(UTC) - run.start).total_seconds()))
        hints = {n: self.watch.pending_hints(host_ids[n]) for n in nodes}
        run.restarted = utc(datetime.now(UTC))
        log.info("restarting %s", victims)
        with ThreadPoolExecutor(max_workers=len(victims)) as pool:
            healing = list(pool.map(lambda v: self._restart_and_heal(v, host_ids.get(v), hints.get(v)), victims))
        run.back = max(back for back, _, _ in healing)
        run.notes += [note for _, _, note in healing]
        healed = [at for _, at, _ in healing]
        if all(at is not None for at in healed):
            run.recovered = max(at for at in healed if at is not None)
        if brokers and wait_until(self.watch.kafka_balanced, 60) is not None:
            since = (utc(datetime.now(UTC)) - run.restarted).total_seconds()
            run.notes.append(f"preferred leaders back {since:.1f} s after the restart")
        log.info("%s healed: %s", kind, "; ".join(run.notes))
        fault = Fault(kind, rfc3339(run.start), f"kill -9 {', '.join(victims)}; " + "; ".join(run.notes),
                      (run.recovered - run.start).total_seconds() if run.recovered else None)
        with self.lock:
            self.report.faults.append(fault)

    def _restart_and_heal(self, victim: str, host_id: Any, hints: int | None) -> tuple[datetime, datetime | None, str]:
        """Start ``victim`` again; wait until the cluster has healed from its absence (no hint left for the node,
        every replica in sync for the broker). Returns when it was back, when the cluster had healed (None:
        not within the wait), and what happened."""
        timeout = self.cluster_plan.heal_timeout_s
        began = utc(datetime.now(UTC))
        self.watch.start(victim)
        back = utc(datetime.now(UTC))
        note = f"{victim} back after {(back - began).total_seconds():.1f} s"
        if victim.startswith("cassandra"):
            after = wait_drained(functools.partial(self.watch.pending_hints, host_id), timeout)
            note += (f", {hints} hint file(s) held for it by the others, " + (
                f"all delivered {after:.1f} s after it was back (hinted handoff)" if after is not None
                else f"not all delivered within {timeout:.0f} s"))
        else:
            after = wait_until(self.watch.kafka_in_sync, timeout)
            note += (f", every replica in sync {after:.1f} s after it was back" if after is not None
                     else f", replicas not in sync within {timeout:.0f} s")
        return back, (back + timedelta(seconds=after)) if after is not None else None, note

    # -- counting -------------------------------------------------------------------------------

    def _finish(self, findings: Any) -> None:
        super()._finish(findings)
        report = self.report
        assert isinstance(report, ClusterReport)
        now = utc(datetime.now(UTC))
        calls = list(self.recording.calls)
        samples = list(findings.lateness)
        report.requests = len(calls)
        report.refused_requests = sum(1 for c in calls if c.refused)
        report.fault_figures = [figures(run, calls, samples, now) for run in self.runs]
        report.refused_calls = refused_during(self.runs, calls, now)
        if self.baseline is not None:
            report.baseline = _window(samples, *self.baseline)
        quiet = [(due, late) for due, late in samples if due >= self.quiet_start]
        report.quiet = _window(quiet, self.quiet_start, now)
        report.duplicate_causes = self._duplicate_causes()

    def _judge(self, quiet: Any, record: Any = None) -> Any:
        self.quiet_start = quiet.start
        return super()._judge(quiet, record)

    def _duplicate_causes(self) -> dict[str, int]:
        """Each duplicate, by the fault during (or up to a minute after) which one of its copies was published,
        and by what was published twice (a scheduled fire, a retry, a manual run)."""
        copies: dict[str, list[Message]] = defaultdict(list)
        for m in self.collector.seen:
            if m.topic == "jobs":
                copies[m.execution_id].append(m)
        causes: dict[str, int] = defaultdict(int)
        for messages in copies.values():
            if len(messages) < 2:
                continue
            where = "outside the faults"
            for run in self.runs:
                end = (run.recovered or run.back or run.start) + timedelta(seconds=60)
                if any(run.start <= m.published <= end for m in messages):
                    where = f"{run.kind} ({', '.join(run.victims)})"
                    break
            what = {"SCHEDULE": "scheduled fires", "RETRY": "retries"}.get(messages[0].trigger, "runs now")
            causes[f"{where}, {what}"] += len(messages) - 1
        return dict(causes)


def _window(samples: list[tuple[datetime, float]], start: datetime, end: datetime) -> dict[str, Any]:
    late = lateness_in(samples, start, end)
    return {"start": rfc3339(start), "end": rfc3339(end), "fires": len(late), "p99_s": percentile(late, 99),
            "max_s": max(late, default=None)}


def run(plan: Plan, keep_servers: bool = False) -> ClusterReport:
    report = run_suite(ClusterSuite(plan), keep_servers)
    assert isinstance(report, ClusterReport)
    return report
