"""Writes: the rows written per execution on the scan and results path, counted by Cassandra itself.

Cassandra 5.0 (and 4.1) exposes, without JMX, the virtual table ``system_views.local_write_latency``:
one row per (keyspace, table) whose ``count`` is the table's ``writeLatency`` timer count, increased
once per partition update the node applies to that table (an INSERT, UPDATE or DELETE of one row is
one; several rows of one partition and table in one batch are one together: the store packs rows into
unlogged batches, a partition's rows together, so the next fires planned into one (minute, segment)
count once; the driver's tally of the rows sent is what Keyspaces bills). The section
reads it before and after each step of the workload and keeps the difference per table of the
benchmark's own keyspace, plus two tables of the server's ``system`` keyspace: ``system.batches`` (the
batch log: a LOGGED batch stores itself there and removes itself after, 2 writes per batch on one
node) and ``system.paxos`` (the state of lightweight transactions, 3 writes per LWT here). Those two
are server-wide: on shared servers they include other clients' batches and LWTs.

The workload goes through the real services: ``fires`` executions due at the first instant of one
fresh minute (a mix of one-time and recurring jobs, as the drain seeds them, each with one retry
allowed), scanned by the real ``ScanService`` in the worker processes (as in the drain); the messages
are read back from Kafka and answered as ``jobrunner_client.worker`` answers them (``parse_report`` of the
same JSON), a share ``failures`` of them FAILED, applied by the real ``ResultsService`` on the
Cassandra store with a clock 55 s into the minute, so every retry lands in the next minute's late
lane; that minute is scanned too and its retries are answered SUCCESS. Seeding happens before the
first reading and is not counted. The driver's own tally of the write statements it sent is kept
next to Cassandra's count, as a cross-check, with the model of ``docs/scaling.md`` for the same mix.

Sizes, for the cost model: once the run is done, the history rows of its executions and the one-time job rows
``submit_rows`` submitted are read back and sized as Amazon Keyspaces stores them (``bench.rowsize``: its row
size page's rules, with the table features the deployment turns on), and each result message answered is sized
as the worker produces it (key + value + headers, as ``bench.raw.message_bytes`` counts a job message).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import logging
import re
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from bench.instruments import CountingSession
from bench.rowsize import row_bytes
from bench.seed import PAD, SeedSpec, generate, insert
from bench.stats import median
from bench.worker_pool import split
from jobrunner.domain.spec import RetryPolicy
from jobrunner.domain.time import MINUTE, to_epoch_ms
from jobrunner.ports import Publisher
from jobrunner_client.protocol import TRACEPARENT_HEADER

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from bench.context import Bench
    from cql.schema import TableSpec
    from jobrunner.ports import OutboundMessage

COUNTER = "system_views.local_write_latency"
#: Server-wide tables of the ``system`` keyspace reported separately (batch log, LWT state).
SERVER_TABLES = ("system.batches", "system.paxos")
#: The tables of the execution path, in the order of the report.
TABLES = ("job_table_v2", "task_history_v2", "task_schedule_v2")
#: Every seeded job may retry once, so that a failure is retried (and the retry answered SUCCESS).
RETRY = RetryPolicy(max_retries=1, initial_delay_s=10.0)
#: The results function's clock, into the minute: a retry (5-10 s later) lands in the next minute.
RESULTS_AT = timedelta(seconds=55)
STEPS = ("scan", "results", "retry scan", "retry results")


class _NoDeadLetters(Publisher):
    """The results service's publisher: this workload never exhausts a retry, so nothing goes to the
    shared dead-letter topic; if something did, the run says so instead of writing there."""

    def publish(self, messages: Sequence[OutboundMessage], timeout_s: float | None = None) -> None:
        raise RuntimeError(f"unexpected dead letter(s) in the writes bench: {len(messages)}")


def read_counts(session: Any, keyspace: str) -> dict[str, int]:
    """``count`` of ``local_write_latency`` per table of ``keyspace`` and of ``SERVER_TABLES``."""
    out: dict[str, int] = {}
    for ks, table, count in session.execute(f"SELECT keyspace_name, table_name, count FROM {COUNTER}"):
        if ks == keyspace:
            out[table] = int(count)
        elif f"{ks}.{table}" in SERVER_TABLES:
            out[f"{ks}.{table}"] = int(count)
    return out


def settled_counts(session: Any, keyspace: str, pause_s: float = 0.2, timeout_s: float = 10.0,
                   server_wait_s: float = 2.0) -> dict[str, int]:
    """The counts once they stop moving (a logged batch removes itself from the batch log
    asynchronously, after the client has its answer). The server-wide tables are waited for at most
    ``server_wait_s``: on shared servers other clients may keep writing them."""
    started = time.monotonic()
    last = read_counts(session, keyspace)
    while time.monotonic() - started < timeout_s:
        time.sleep(pause_s)
        now = read_counts(session, keyspace)
        ours = all(now.get(t) == last.get(t) for t in {*now, *last} if "." not in t)
        if ours and (now == last or time.monotonic() - started > server_wait_s):
            return now
        last = now
    return last


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    changed = (table for table in sorted(after) if after[table] != before.get(table, 0))
    return {table: after[table] - before.get(table, 0) for table in changed}


def _driver_writes(statements: Counter[str]) -> dict[str, int]:
    """Write statements sent per table (inside batches one by one), from a ``Tally``'s kinds."""
    out: Counter[str] = Counter()
    for kind, n in statements.items():
        verb, _, table = kind.partition(" ")
        if verb in ("INSERT", "UPDATE", "DELETE"):
            out[table] += n
    return dict(sorted(out.items()))


def expected_rows(fires: int, recurring: int, retried: int) -> dict[str, int]:
    """The model of docs/scaling.md for this mix: per fire, start writes the history row, complete writes
    the next row of a recurring job (the done PLANNED row is not deleted: it expires), and the result
    writes the history row; nothing writes the job. A failed first attempt adds its retry row (result,
    in the next minute's LATE lane) and the retry execution: start (history), complete (the delete of
    its LATE row: a retry plans no next run) and its result (history)."""
    return {
        "job_table_v2": 0,
        "task_history_v2": 2 * fires + 2 * retried,
        "task_schedule_v2": recurring + 2 * retried,
    }


def _offsets(consumer: Any, topic: str) -> dict[Any, int]:
    from kafka import TopicPartition

    partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
    consumer.assign(partitions)
    return dict(consumer.end_offsets(partitions))


def _messages(consumer: Any, start: dict[Any, int], expected: int, jobs: set[str],
              timeout_s: float = 120) -> list[tuple[dict[str, Any], dict[str, bytes]]]:
    """The executions published since ``start`` (of the seeded jobs), as (value, headers)."""
    for partition, offset in start.items():
        consumer.seek(partition, offset)
    out: dict[str, tuple[dict[str, Any], dict[str, bytes]]] = {}
    deadline = time.monotonic() + timeout_s
    while len(out) < expected and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            for record in batch:
                value = json.loads(record.value)
                if value.get("job_id") in jobs:
                    out.setdefault(value["execution_id"], (value, dict(record.headers or [])))
    return list(out.values())


def _report_bytes(value: dict[str, Any], headers: dict[str, bytes], fail: bool) -> bytes:
    """What ``jobrunner_client.worker.Worker`` sends to ``job-results`` for this execution."""
    result: dict[str, Any] = {"execution_id": value["execution_id"], "job_id": value["job_id"],
                              "scheduled_at": value["scheduled_at"], "attempt": value["attempt"]}
    trace = headers.get(TRACEPARENT_HEADER)
    if isinstance(trace, bytes):
        result["traceparent"] = trace.decode()
    if "result_token" in value:
        result["result_token"] = value["result_token"]
    if fail:
        result.update(status="FAILED", error="RuntimeError: failed on purpose by the writes bench")
    else:
        result["status"] = "SUCCESS"
    return json.dumps(result).encode()


def result_message_bytes(value: dict[str, Any], report: bytes) -> int:
    """The bytes of the result message ``report`` answering the execution ``value`` on Kafka, counted as
    ``bench.raw.message_bytes`` counts a job message (key + value + headers): ``Worker`` keys it by the job id
    and sends no headers."""
    return len(value["job_id"].encode()) + len(report)


def keyspaces_tables() -> dict[str, TableSpec]:
    """The tables of ``cql/`` as the stack deploys them (``infra/app.py``): TTL turned on where a statement of the
    stores writes ``USING TTL``."""
    from cql.schema import load_tables, with_row_ttls
    from jobrunner.adapters.stores.cassandra import STATEMENTS
    from jobrunner.adapters.stores.changes import STATEMENTS as CHANGE_LOG_STATEMENTS

    return {t.name: t for t in with_row_ttls(load_tables(), (*STATEMENTS, *CHANGE_LOG_STATEMENTS))}


def stored_bytes(table: TableSpec, row: Any, written: Sequence[str] = ()) -> int:
    """A row read back (a named tuple), sized as Amazon Keyspaces stores it (``bench.rowsize``): time to live on
    where the stack turns it on (a default TTL, or rows written with one), client-side timestamps on every table
    (``cql.migrate`` turns them on); ``written``: the regular columns its writes set, nulls included."""
    return row_bytes(table, row._asdict(), written=written, client_timestamps=True,
                     ttl=table.default_time_to_live is not None or table.rows_expire)


def sizes(values: Sequence[int]) -> dict[str, float]:
    """The median, least and most of ``values``, and how many (all 0 for none)."""
    if not values:
        return {"median": 0.0, "min": 0.0, "max": 0.0, "count": 0}
    return {"median": median(values), "min": min(values), "max": max(values), "count": len(values)}


def _history_row_bytes(session: Any, table: TableSpec, jobs: set[str], executions: set[str]) -> list[int]:
    """The stored size of each history row of ``executions`` (rows of the seeded ``jobs``), read back. The
    store writes a record with its nulls unset (``stores/history.py``): a null there is no cell."""
    from cassandra.concurrent import execute_concurrent_with_args

    select = session.prepare("SELECT * FROM task_history_v2 WHERE job_id = ?")
    results = execute_concurrent_with_args(session, select, [(job_id,) for job_id in sorted(jobs)], concurrency=32)
    return [stored_bytes(table, row) for _, rows in results for row in rows if row.execution_id in executions]


def _failing(values: list[dict[str, Any]], share: float) -> set[str]:
    """``round(share * n)`` of the executions, picked by a hash of their id (one-time and recurring alike)."""
    ids = sorted((hashlib.sha1(v["execution_id"].encode()).hexdigest(), v["execution_id"]) for v in values)
    return {execution_id for _, execution_id in ids[:round(share * len(ids))]}


def _apply(bench: Bench, session: CountingSession, segments: int, now: datetime,
           reports: list[bytes]) -> dict[str, Any]:
    """The results function's work for ``reports``, through the real ``ResultsService`` on the Cassandra
    store (8 threads: reports are independent). A report whose apply raised is applied again, as the
    MSK event source would (counted: the writes it made are in the counts)."""
    from jobrunner.adapters.clocks.manual import ManualClock
    from jobrunner.adapters.stores.cassandra import CassandraJobStore
    from jobrunner.entrypoints import parse_report
    from jobrunner.wiring import Container

    store = CassandraJobStore(session)
    container = Container(bench.settings.replace(segments=segments), store=store, session=session,
                          publisher=_NoDeadLetters(), clock=ManualClock(now))
    results = container.results
    again = Counter[str]()
    lock = threading.Lock()

    def apply(raw: bytes) -> str:
        report = parse_report(raw)
        assert report is not None, raw
        for attempt in range(4):
            try:
                return results.apply(report)
            except Exception as exc:
                if attempt == 3:
                    raise
                with lock:
                    again[type(exc).__name__] += 1
                time.sleep(0.5 * (attempt + 1))
        raise AssertionError("unreachable")

    quiet = logging.getLogger("jobrunner.services.results")  # one INFO line per result otherwise
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            outcomes = Counter(pool.map(apply, reports))
    finally:
        quiet.setLevel(level)
    return {"outcomes": dict(outcomes), "applied_again": dict(again)}


def _scan(bench: Bench, bucket: datetime, segments: int) -> list[dict[str, Any]]:
    """Every segment of ``bucket`` scanned once by the real ``ScanService`` in the worker processes."""
    processes = min(bench.options.processes, segments, len(bench.pool))
    groups = split(list(range(segments)), processes)
    jobs = [(i, "scan", {"segments": group, "bucket_ms": to_epoch_ms(bucket), "segment_count": segments})
            for i, group in enumerate(groups)]
    _, outs = bench.pool.synchronized(jobs, timeout=1800)
    return [s for out in outs for s in out["segments"]]


@dataclasses.dataclass
class _Recorder:
    """The readings of the counter after each step, and the driver's tally of what was sent."""

    session: Any
    keyspace: str
    snapshots: list[dict[str, int]] = dataclasses.field(default_factory=list)
    driver: Counter[str] = dataclasses.field(default_factory=Counter)
    logged_batches: int = 0

    def read(self) -> None:
        self.snapshots.append(settled_counts(self.session, self.keyspace))


def writes_once(bench: Bench, fires: int, segments: int, failures: float) -> dict[str, Any]:
    from kafka import KafkaConsumer

    from jobrunner.adapters.stores.session import connect

    bucket = bench.next_bucket()
    retry_bucket = bench.next_bucket()
    assert retry_bucket == bucket + MINUTE, (bucket, retry_bucket)
    topic = bench.names.topic
    session = connect(bench.settings.cassandra)
    consumer = KafkaConsumer(bootstrap_servers=bench.settings.kafka.bootstrap.split(","), group_id=None,
                             enable_auto_commit=False)
    scans: list[dict[str, Any]] = []
    answered: list[dict[str, Any]] = []
    message_bytes: list[int] = []
    try:
        spec = SeedSpec(to_epoch_ms(bucket), fires, segments, topic, seed=hash(("writes", bucket)) & 0xFFFFFFFF)
        pairs = [(job.with_changes(retry=RETRY), row) for job, row in generate(spec)]
        insert(session, pairs)  # not counted: before the first reading
        jobs = {job.job_id for job, _ in pairs}
        recurring = sum(1 for job, _ in pairs if job.spec.schedule.recurring)
        recorder = _Recorder(session, bench.names.keyspace)
        counting = CountingSession(session)
        recorder.read()

        def scan(minute: datetime) -> list[tuple[dict[str, Any], dict[str, bytes]]]:
            start = _offsets(consumer, topic)
            per_segment = _scan(bench, minute, segments)
            scans.extend(per_segment)
            for s in per_segment:
                recorder.driver.update(s["cassandra"]["statements"])
                recorder.logged_batches += s["cassandra"].get("logged_batches", 0)
            recorder.read()
            return _messages(consumer, start, sum(s["published"] for s in per_segment), jobs)

        def answer(messages: list[tuple[dict[str, Any], dict[str, bytes]]], fail: set[str], now: datetime) -> None:
            counting.reset()
            reports = [_report_bytes(value, headers, value["execution_id"] in fail) for value, headers in messages]
            message_bytes.extend(result_message_bytes(value, report)
                                 for (value, _), report in zip(messages, reports, strict=True))
            answered.append(_apply(bench, counting, segments, now, reports) | {"reports": len(reports)})
            tally = counting.reset()
            recorder.driver.update(tally.statements)
            recorder.logged_batches += tally.logged_batches
            recorder.read()

        first = scan(bucket)
        fail = _failing([value for value, _ in first], failures)
        answer(first, fail, bucket + RESULTS_AT)
        retries = scan(retry_bucket)
        answer(retries, set(), retry_bucket + RESULTS_AT)
        executions_run = {value["execution_id"] for value, _ in first + retries}
        history_bytes = _history_row_bytes(session, keyspaces_tables()["task_history_v2"], jobs, executions_run)
    finally:
        consumer.close()
        session.cluster.shutdown()

    snapshots = recorder.snapshots
    steps = {name: _delta(a, b) for name, a, b in zip(STEPS, snapshots[:-1], snapshots[1:], strict=True)}
    counted = _delta(snapshots[0], snapshots[-1])
    executions = len(first) + len(retries)
    n = max(executions, 1)
    tables = {t: counted.get(t, 0) for t in TABLES} | {t: v for t, v in counted.items() if "." not in t}
    return {
        "fires": fires, "segments": segments, "recurring": recurring, "failures_share": failures,
        "failed_first": len(fail), "published_first": len(first), "published_retries": len(retries),
        "executions": executions, "scan_published": sum(s["published"] for s in scans),
        "outcomes": [a["outcomes"] for a in answered], "applied_again": [a["applied_again"] for a in answered],
        "scan_errors": sum(s["errors"] for s in scans), "scan_dropped": sum(s["dropped"] for s in scans),
        "scans_crashed": [s["crashed"] for s in scans if s.get("crashed")],
        "steps": steps,
        "counted": tables,
        "server": {t: counted.get(t, 0) for t in SERVER_TABLES},
        "driver": dict.fromkeys(TABLES, 0) | _driver_writes(recorder.driver),
        "logged_batches": recorder.logged_batches,
        "expected": expected_rows(fires, recurring, len(fail)),
        "per_execution": {t: v / n for t, v in tables.items()},
        "total_per_execution": sum(tables.values()) / n,
        "stored_bytes": {"history_row": sizes(history_bytes)},
        "result_message_bytes": sizes(message_bytes),
    }


#: Jobs of each kind ``submit_rows`` submits, one request each, counted.
SUBMITS = 100
SUBMITTER = "bench-writes-submitter"


def submit_rows(bench: Bench, count: int = SUBMITS) -> tuple[dict[str, dict[str, float]], list[int]]:
    """Rows written per job submitted through the real ``JobService`` on the Cassandra store (its first run,
    the job, and whatever else a submit keeps: the change log as the deployment keeps it), counted by
    Cassandra as the executions are: one-time jobs, then recurring ones, one request each, as the API submits
    them (the benchmark's usual payload, a trace, the submitter as tenant and author). Returns the rows a job
    per table, by kind, and the stored size of each one-time job row, read back (``stored_bytes``)."""
    from jobrunner.adapters.stores import codec
    from jobrunner.adapters.stores.cassandra import INSERT_JOB
    from jobrunner.adapters.stores.session import connect
    from jobrunner.domain.schedules import At, Every, Schedule
    from jobrunner.domain.spec import JobSpec
    from jobrunner.domain.tracing import new_traceparent
    from jobrunner.wiring import Container

    session = connect(bench.settings.cassandra)
    try:
        container = Container(bench.settings.replace(change_log=True), session=session)
        jobs = container.jobs
        recorder = _Recorder(session, bench.names.keyspace)
        later = container.clock.now().replace(microsecond=0) + timedelta(hours=1)
        kinds: dict[str, list[Schedule]] = {
            "one_time": [At(later + timedelta(seconds=i % 60)) for i in range(count)],
            "recurring": [Every(timedelta(hours=1)) for _ in range(count)]}
        submitted: dict[str, list[str]] = {kind: [] for kind in kinds}
        recorder.read()
        for kind, schedules in kinds.items():
            for i, schedule in enumerate(schedules):
                job, _ = jobs.submit(SUBMITTER, JobSpec(schedule, {"bench": True, "n": i, "pad": PAD},
                                                        topic=bench.names.topic),
                                     actor=SUBMITTER, trace_parent=new_traceparent())
                submitted[kind].append(job.job_id)
            recorder.read()
        # Every write of a job row sets each column of INSERT_JOB (``stores/expiring.py``), nulls included.
        written = re.search(r"\(([^)]*)\) VALUES", INSERT_JOB)
        assert written is not None, INSERT_JOB
        select = session.prepare("SELECT * FROM job_table_v2 WHERE user_id = ? AND shard = ? AND job_id = ?")
        table = keyspaces_tables()["job_table_v2"]
        job_bytes = [stored_bytes(table, row, [c.strip() for c in written.group(1).split(",")])
                     for job_id in submitted["one_time"]
                     for row in session.execute(select, codec.job_key(SUBMITTER, job_id))]
    finally:
        session.cluster.shutdown()
    deltas = [_delta(a, b) for a, b in itertools.pairwise(recorder.snapshots)]
    rows = {kind: {t: v / count for t, v in delta.items() if "." not in t}
            for kind, delta in zip(kinds, deltas, strict=True)}
    return rows, job_bytes


def run_writes(bench: Bench) -> None:
    o = bench.options
    runs = []
    for index in range(o.runs):
        result = writes_once(bench, o.writes_executions, o.drain_segments, o.writes_failures)
        result["submit"], job_bytes = submit_rows(bench)
        result["stored_bytes"]["one_time_job_row"] = sizes(job_bytes)
        per = ", ".join(f"{t} {v:.2f}" for t, v in result["per_execution"].items())
        print(f"  writes run {index + 1}/{o.runs}: {result['executions']} executions "
              f"({result['published_retries']} retries): {result['total_per_execution']:.2f} rows per execution "
              f"({per}); system.batches {result['server']['system.batches'] / max(result['executions'], 1):.2f}",
              flush=True)
        print("  writes run {}/{}: a submit writes {}".format(index + 1, o.runs, "; ".join(
            f"{kind} {sum(rows.values()):.2f} rows ({', '.join(f'{t} {v:.2f}' for t, v in rows.items())})"
            for kind, rows in result["submit"].items())), flush=True)
        stored = result["stored_bytes"]
        print(f"  writes run {index + 1}/{o.runs}: stored (Keyspaces' rules) a history row "
              f"{stored['history_row']['median']:.0f} B, a one-time job row "
              f"{stored['one_time_job_row']['median']:.0f} B; "
              f"a result message {result['result_message_bytes']['median']:.0f} B (medians)", flush=True)
        runs.append(result)
    bench.results["writes"] = runs
