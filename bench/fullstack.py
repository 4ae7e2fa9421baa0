"""Full stack: executions submitted over HTTP, drained by the whole local system (issue #14's target
"5,000 executions due at one second drain at least 2,000/s through the whole local stack").

A real ``devstack.stack.LocalStack`` runs inside the bench process, as ``make run`` runs it: the API on an
ephemeral port, the ticker aligned to the wall-clock minute, the scans on its thread pool (async Lambda
invokes), the results loop and the example worker (its ``echo`` printing into ``os.devnull``). It works on
the run's own keyspace and on topics and a heartbeat table of its own (``bench.stack.BenchNames``).

Per run: ``executions`` one-time jobs are submitted over HTTP (``threads`` clients), all due at one
second S, 5 s into a minute that begins at least ``OPEN_AHEAD`` + 10 s after the submissions end: every
row is in its minute's planned lane before the tick that dispatches the minute (59 s ahead), so that
minute's scans read them once and wait for S, as for any job submitted ahead of time. Measured from S:
- published: the CreateTime of each execution's message on the section's jobs topic (the first copy;
  further copies are counted as duplicates);
- results: the CreateTime of each result on the results topic (the example worker's);
- recorded: when the results function had committed every result (its consumer group's offsets, polled
  every 0.25 s: it commits a batch only after writing its history), confirmed in the store, where every
  execution's history must say SUCCESS.
The Kafka topics are read back only once everything is recorded, so reading them costs the run nothing.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import threading
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from bench.context import CpuSampler
from bench.machine import server_pids
from bench.seed import empty
from bench.stats import percentile
from jobrunner.domain.placement import OPEN_AHEAD
from jobrunner.domain.time import MINUTE, minute_bucket, rfc3339, to_epoch_ms

if TYPE_CHECKING:
    from bench.context import Bench
    from devstack.stack import LocalStack
    from jobrunner.config import Settings

TENANT = "bench-fullstack"
#: Where S falls in its minute.
DUE_OFFSET = timedelta(seconds=5)
#: Between the submissions' end and the minute, beyond ``OPEN_AHEAD`` (the planned lane's limit).
MARGIN = timedelta(seconds=10)
#: Submissions per second assumed for the first run's budget (later runs: twice the previous run's time).
ASSUMED_SUBMIT_RATE = 50.0
#: How often the results function's committed offsets are read while waiting.
POLL_S = 0.25


def stack_settings(bench: Bench) -> Settings:
    """The run's settings, with the section's own jobs topic and heartbeat table."""
    names = bench.names
    return bench.settings.replace(topic=names.fullstack_topic,
                                  allowed_topics=(*bench.settings.allowed_topics, names.fullstack_topic),
                                  heartbeat_table=names.fullstack_heartbeat_table)


def _iso(instant: datetime) -> str:
    return rfc3339(instant).replace(".000Z", "Z")


def _submit(port: int, token: str, due: datetime, count: int, threads: int) -> dict[str, Any]:
    """POST ``count`` one-time jobs due at ``due`` from ``threads`` clients (one connection each); returns
    the statuses, the job ids accepted and the wall time."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    at = _iso(due)
    statuses: list[int] = [0] * count
    job_ids: list[str | None] = [None] * count
    counter = itertools.count()

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            while (i := next(counter)) < count:
                body = json.dumps({"schedule": {"at": at}, "payload": {"type": "echo", "bench": "fullstack", "n": i}})
                try:
                    conn.request("POST", "/jobs", body=body.encode(), headers=headers)
                    response = conn.getresponse()
                    data = response.read()
                except (OSError, http.client.HTTPException):
                    statuses[i] = -1
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                    continue
                statuses[i] = response.status
                if response.status == 201:
                    job_ids[i] = json.loads(data)["job_id"]
        finally:
            conn.close()

    started = time.monotonic()
    pool = [threading.Thread(target=client, name=f"fullstack-submit-{n}") for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return {"seconds": time.monotonic() - started, "statuses": dict(Counter(statuses)),
            "job_ids": [j for j in job_ids if j is not None]}


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        return {tp.partition: offset for tp, offset in consumer.end_offsets(partitions).items()}
    finally:
        consumer.close()


def read_records(bootstrap: str, topic: str, start: dict[int, int], timeout_s: float = 120) -> list[tuple[int, Any]]:
    """(CreateTime ms, decoded value) of every record of ``topic`` from ``start`` up to its end offsets now."""
    from kafka import KafkaConsumer, TopicPartition

    end = end_offsets(bootstrap, topic)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None, enable_auto_commit=False)
    try:
        partitions = {p: TopicPartition(topic, p) for p in end if end[p] > start.get(p, 0)}
        consumer.assign(list(partitions.values()))
        for p, tp in partitions.items():
            consumer.seek(tp, start.get(p, 0))
        out: list[tuple[int, Any]] = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < end[p] for p, tp in partitions.items()) and time.monotonic() < deadline:
            for tp, batch in consumer.poll(timeout_ms=1000).items():
                out += [(r.timestamp, json.loads(r.value)) for r in batch if r.offset < end[tp.partition]]
        return out
    finally:
        consumer.close()


def _committed(admin: Any, group: str, topic: str) -> dict[int, int]:
    offsets = admin.list_group_offsets({group: None}).get(group, {})
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic and meta.offset >= 0}


def _succeeded(stack: LocalStack, job_ids: list[str]) -> set[str]:
    """The jobs among ``job_ids`` whose newest history records include a SUCCESS."""
    records = stack.container.store.latest_records(job_ids, limit=5)
    return {job_id for job_id, rows in records.items() if any(r.status == "SUCCESS" for r in rows)}


def _wait_recorded(stack: LocalStack, settings: Settings, job_ids: list[str], baseline: dict[int, int],
                   deadline: float) -> tuple[float | None, int]:
    """Wait until the results function has committed ``len(job_ids)`` results past ``baseline`` and the
    store shows every job's execution SUCCESS; returns (wall time then, or None at the deadline, and the
    jobs recorded SUCCESS)."""
    from kafka import KafkaAdminClient

    group = f"jobrunner-results-{settings.cassandra.keyspace}"
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap.split(","), client_id="jr-bench-fullstack")
    pending = list(job_ids)
    done: set[str] = set()
    try:
        while time.time() < deadline:
            try:
                committed = _committed(admin, group, settings.results_topic)
            except Exception:  # the group is not known yet (no result committed so far)
                committed = {}
            applied = sum(max(0, committed.get(p, start) - start) for p, start in baseline.items())
            if applied >= len(job_ids):
                seen_at = time.time()
                done |= _succeeded(stack, pending)
                pending = [j for j in pending if j not in done]
                if not pending:
                    return seen_at, len(done)
            time.sleep(POLL_S)
        done |= _succeeded(stack, pending)
        return None, len(done)
    finally:
        admin.close()


def _ms_from(values: list[int], due_ms: int) -> list[float]:
    return [float(v - due_ms) for v in values]


def _once(bench: Bench, stack: LocalStack, settings: Settings, budget_s: float, sampler: CpuSampler
          ) -> dict[str, Any]:
    o = bench.options
    bootstrap = settings.kafka.bootstrap
    submitted_by = datetime.now(UTC) + timedelta(seconds=budget_s)
    if o.fullstack_lead_s is None:
        minute = minute_bucket(submitted_by + OPEN_AHEAD + MARGIN) + MINUTE
        due = minute + DUE_OFFSET
    else:  # the next whole second at least the lead after the submissions' expected end (late lane)
        due = (submitted_by + timedelta(seconds=o.fullstack_lead_s)).replace(microsecond=0) + timedelta(seconds=1)
        minute = minute_bucket(due)
    skipped = 0
    while not empty(stack.container.store, [minute], settings.segments):
        minute += MINUTE  # another section's recurring jobs planned a fire into it
        skipped += 1
        due = minute + DUE_OFFSET
    due_ms = to_epoch_ms(due)
    jobs_start = end_offsets(bootstrap, settings.topic)
    results_start = end_offsets(bootstrap, settings.results_topic)
    submitted = _submit(stack.port, stack.token, due, o.fullstack_executions, o.fullstack_threads)
    submit_end = datetime.now(UTC)
    job_ids: list[str] = submitted["job_ids"]
    print(f"  fullstack: {len(job_ids):,} jobs accepted in {submitted['seconds']:.1f} s, due {due:%H:%M:%S}; "
          f"waiting {(due - submit_end).total_seconds():.0f} s", flush=True)
    deadline = due.timestamp() + max(180.0, len(job_ids) / 20)
    recorded_at, recorded = _wait_recorded(stack, settings, job_ids, results_start, deadline)
    clock_offset = time.monotonic() - time.time()  # wall -> monotonic, for the CPU sampler's window

    ours = set(job_ids)
    published: dict[str, list[int]] = defaultdict(list)
    per_job: dict[str, set[str]] = defaultdict(set)
    foreign = 0
    for created, value in read_records(bootstrap, settings.topic, jobs_start):
        if value.get("job_id") in ours:
            published[value["execution_id"]].append(created)
            per_job[value["job_id"]].add(value["execution_id"])
        else:
            foreign += 1
    results: dict[str, list[int]] = defaultdict(list)
    statuses: Counter[str] = Counter()
    for created, value in read_records(bootstrap, settings.results_topic, results_start):
        if value.get("job_id") in ours:
            if value["execution_id"] not in results:
                statuses[value.get("status", "?")] += 1
            results[value["execution_id"]].append(created)
    first_publish = [min(times) for times in published.values()]
    first_result = [min(times) for times in results.values()]
    lateness = _ms_from(first_publish, due_ms)
    last_publish_s = (max(first_publish) - due_ms) / 1000 if first_publish else float("nan")
    last_result_s = (max(first_result) - due_ms) / 1000 if first_result else float("nan")
    recorded_s = recorded_at - due.timestamp() if recorded_at is not None else float("nan")
    cpu_end = max(first_result, default=due_ms) / 1000
    cpu = sampler.window(due.timestamp() + clock_offset, cpu_end + clock_offset)
    return {
        "minute": minute.isoformat(), "due": due.isoformat(), "skipped_minutes": skipped,
        "requested": o.fullstack_executions, "threads": o.fullstack_threads,
        "submit_s": submitted["seconds"], "submit_rate": len(job_ids) / submitted["seconds"],
        "submit_statuses": submitted["statuses"], "accepted": len(job_ids),
        "lead_s": (minute - submit_end).total_seconds(), "planned_lane": submit_end <= minute - OPEN_AHEAD,
        "published": len(published), "published_messages": sum(len(t) for t in published.values()),
        "duplicates": sum(len(t) - 1 for t in published.values()),
        "jobs_with_several_executions": sum(1 for ids in per_job.values() if len(ids) > 1),
        "unpublished": len(ours - set(per_job)), "foreign_messages": foreign,
        "results": len(results), "result_messages": sum(len(t) for t in results.values()),
        "result_statuses": dict(statuses), "recorded": recorded, "timed_out": recorded_at is None,
        "lateness_ms": {"p50": percentile(lateness, 50), "p99": percentile(lateness, 99),
                        "max": max(lateness, default=float("nan")),
                        "min": min(lateness, default=float("nan"))},
        "last_publish_s": last_publish_s, "last_result_s": last_result_s, "recorded_s": recorded_s,
        "drain_rate": len(published) / last_publish_s if last_publish_s > 0 else float("nan"),
        "end_to_end_rate": len(results) / last_result_s if last_result_s > 0 else float("nan"),
        "cpu": cpu,
    }


def _stop(stack: LocalStack) -> list[str]:
    """Stop the stack and wait for its threads; close what ``LocalStack.stop`` leaves open (the HTTP
    server's socket, the store's Cassandra session). Returns the names of its threads still alive."""
    stack.stop()
    for thread in stack._threads:
        thread.join(timeout=30)
    stack.server.server_close()
    session = getattr(stack.container.store, "_session", None)
    if session is not None:
        session.cluster.shutdown()
    return [t.name for t in stack._threads if t.is_alive()]


def run_fullstack(bench: Bench) -> None:
    from devstack.stack import LocalStack

    o = bench.options
    settings = stack_settings(bench)
    before = set(threading.enumerate())
    runs: list[dict[str, Any]] = []
    with open(os.devnull, "w") as sink:
        stack = LocalStack(settings, port=0, tenant=TENANT, worker_out=sink, environments=o.fullstack_environments)
        stack.start()
        try:
            budget_s = o.fullstack_executions / ASSUMED_SUBMIT_RATE
            environments = stack._environments.pids if stack._environments is not None else []
            pids = {"stack": os.getpid(), **{f"environment{n}": pid for n, pid in enumerate(environments) if pid},
                    **server_pids()}
            with CpuSampler(pids) as sampler:
                for index in range(o.runs):
                    r = _once(bench, stack, settings, budget_s, sampler)
                    budget_s = 2 * r["submit_s"]
                    print(f"  fullstack run {index + 1}/{o.runs} (due {r['due'][11:19]}): {r['published']:,} of "
                          f"{r['accepted']:,} published ({r['duplicates']} duplicates), last at "
                          f"{r['last_publish_s']:.2f} s: {r['drain_rate']:,.0f}/s; {r['results']:,} results, last "
                          f"at {r['last_result_s']:.2f} s: {r['end_to_end_rate']:,.0f}/s; all recorded at "
                          f"{r['recorded_s']:.1f} s; lateness p50 {r['lateness_ms']['p50']:.0f} ms, p99 "
                          f"{r['lateness_ms']['p99']:.0f} ms; submitted at {r['submit_rate']:,.0f}/s",
                          flush=True)
                    runs.append(r)
        finally:
            alive = _stop(stack)
    time.sleep(1)  # the driver's and clients' own threads end shortly after their close
    left = sorted(t.name for t in set(threading.enumerate()) - before if t.is_alive())
    bench.results["fullstack"] = {"runs": runs, "segments": settings.segments, "executions": o.fullstack_executions,
                                  "threads": o.fullstack_threads, "lead_s": o.fullstack_lead_s,
                                  "environments": o.fullstack_environments,
                                  "stack_threads_alive": alive,
                                  "threads_left": left}
