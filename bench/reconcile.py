"""What the reconciler reads, counted on the real local Cassandra, priced as Amazon Keyspaces would bill it.

``python -m bench.reconcile`` seeds a keyspace of its own with the documented mix scaled down (docs/scaling.md:
50 M executions a day from 1 M jobs held, half one-time, half recurring: each job fires once every 28.8 minutes on
average), as the scans would have left it after a window of ``--window`` minutes: every job's row, each execution's
scheduled row (in the PLANNED lane of its partition, kept once done: except ``--late-share`` of them, written to the
late lane, which a scan removes once done) and its history (ten records for a recurring job, one for a one-time
job). ``--retry-share`` of the jobs have retries, so their history is read whenever they fire. Then one reconciler
pass runs over the window, through a store that counts every row it returns and the bytes Keyspaces would bill for
it (``keyspaces_bytes``: the encoded row size of Keyspaces' developer guide), request by request.

From those per-row figures it prices the reconciler at the documented scale for a few walk rates: a pass walks the
1 M jobs at ``rate`` rows a second (so its window holds ``579 x 1,000,000 / rate`` executions), reads the index rows
of those executions and a history page for each execution it did not find there; every read at LOCAL_ONE, half a
read request unit per 4 KB of each request (Keyspaces bills a range read by the data it reads, at least 4 KB a
request). Results: printed, and written to ``--out`` (docs/benchmarks-reconciler.md) and ``--json``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.seed import PAD
from cql.migrate import migrate
from devstack import servers
from devstack.stack import local_settings, use_local_aws_credentials
from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.adapters.stores import codec
from jobrunner.adapters.stores.cassandra import CassandraJobStore
from jobrunner.adapters.stores.session import connect
from jobrunner.domain.jobs import ExecutionRecord, ExecutionStatus, Job, Trigger, execution_id_for
from jobrunner.domain.orphans import Scanned
from jobrunner.domain.placement import plan_execution
from jobrunner.domain.schedules import At, Every
from jobrunner.domain.spec import JobSpec, RetryPolicy
from jobrunner.domain.time import MINUTE, minute_bucket, to_epoch_ms
from jobrunner.ports import Outcome
from jobrunner.services.jobs import NoChangeLog
from jobrunner.services.reconcile import ReconcileRules, ReconcileService
from jobrunner.services.wake import NoWaker

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from jobrunner.domain.jobs import Lane, LanePosition, ScheduledExecution

ROOT = Path(__file__).resolve().parents[1]
#: The documented mix (docs/scaling.md): 50 M executions a day, 1 M jobs held.
EXECUTIONS_PER_DAY = 50_000_000
JOBS_HELD = 1_000_000
PER_SECOND = EXECUTIONS_PER_DAY / 86_400
#: Every job fires once per this on average (recurring jobs every 28.8 minutes; one-time jobs are held that long).
PERIOD = timedelta(seconds=86_400 * JOBS_HELD / EXECUTIONS_PER_DAY)
SEGMENTS = 16
UNIT = 4096
#: Keyspaces on-demand, per million read request units (aws-notes.md, section 7).
PRICE_PER_M_RRU = 0.125
#: Row metadata Keyspaces adds to a row's encoded size (assumed; the developer guide's formula).
ROW_METADATA = 100
#: Walk rates priced at the documented scale (jobs a second).
RATES = (1000, 2000, 3000, 4000, 8000)


def _value_bytes(value: Any) -> int:
    """The encoded size of one value, as Keyspaces' row-size guide gives it (a timestamp 8, an integer 1 byte per two
    digits plus 1, text its UTF-8 bytes)."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return 1
    if isinstance(value, int):
        return 1 + math.ceil(len(str(abs(value))) / 2)
    if isinstance(value, datetime):
        return 8
    return len(str(value).encode())


def keyspaces_bytes(partition: Sequence[Any], clustering: Sequence[Any], regular: Sequence[Any]) -> int:
    """The encoded size of a row: key columns stored twice, 3 bytes of metadata per partition key column and 20 % per
    clustering column, 1 byte of column id per regular value, and ``ROW_METADATA``."""
    size = sum(2 * _value_bytes(v) + 3 for v in partition)
    size += sum(2 * _value_bytes(v) + math.ceil(_value_bytes(v) / 5) for v in clustering)
    size += sum(_value_bytes(v) + 1 for v in regular if v is not None)
    return size + ROW_METADATA


def job_bytes(job: Job) -> int:
    values = codec.job_values(job)
    return keyspaces_bytes(values[:2], values[2:3], values[3:])


def row_bytes(row: ScheduledExecution) -> int:
    values = codec.scheduled_values(row)[:-1]  # (the time to live is not a column)
    return keyspaces_bytes(values[:2], values[2:7], values[7:])


def record_bytes(record: ExecutionRecord) -> int:
    values = codec.record_values(record)
    return keyspaces_bytes(values[:1], values[1:4], values[4:])


@dataclass
class Reads:
    """One table's reads: requests, rows, the bytes Keyspaces would bill, and the read request units."""

    requests: int = 0
    rows: int = 0
    bytes: int = 0
    rru: float = 0.0

    def add(self, sizes: Sequence[int], per_unit: float = 0.5) -> None:
        """One request that read rows of ``sizes`` bytes (at least one 4 KB unit, LOCAL_ONE by default)."""
        self.requests += 1
        self.rows += len(sizes)
        self.bytes += sum(sizes)
        self.rru += max(1, math.ceil(sum(sizes) / UNIT)) * per_unit


@dataclass
class CountingStore:
    """The Cassandra store, counting what the reconciler reads (by table) as Keyspaces would bill it."""

    store: CassandraJobStore
    page_size: int = 1000
    reads: dict[str, Reads] = field(default_factory=lambda: {t: Reads() for t in (
        "job_table_v2 (walk)", "task_schedule_v2 (index)", "task_history_v2 (pages)", "verification")})

    def walk_jobs(self, after: str | None, limit: int) -> tuple[list[Job], str | None]:
        jobs, cursor = self.store.walk_jobs(after, limit)
        self.reads["job_table_v2 (walk)"].add([job_bytes(j) for j in jobs])
        return jobs, cursor

    def lane_rows(self, bucket: datetime, segment: int, lane: Lane, after: LanePosition | None = None, *,
                  since: datetime | None = None, until: datetime | None = None,
                  stale_ok: bool = False) -> Iterator[ScheduledExecution]:
        rows = list(self.store.lane_rows(bucket, segment, lane, after, since=since, until=until, stale_ok=stale_ok))
        sizes = [row_bytes(r) for r in rows]
        for start in range(0, max(1, len(sizes)), self.page_size):  # a request per page of the driver's
            self.reads["task_schedule_v2 (index)"].add(sizes[start:start + self.page_size])
        yield from rows

    def latest_records(self, job_ids: Sequence[str], limit: int, *,
                       stale_ok: bool = False) -> dict[str, list[ExecutionRecord]]:
        pages = self.store.latest_records(job_ids, limit, stale_ok=stale_ok)
        for page in pages.values():
            self.reads["task_history_v2 (pages)"].add([record_bytes(r) for r in page])
        return pages

    def get_jobs(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Job]:
        found = self.store.get_jobs(keys)
        for key in keys:
            self.reads["verification"].add([job_bytes(found[key])] if key in found else [], per_unit=1.0)
        return found

    def get_records(self, keys: Sequence[Any]) -> dict[Any, ExecutionRecord]:
        found = self.store.get_records(keys)
        for key in keys:
            self.reads["verification"].add([record_bytes(found[key])] if key in found else [], per_unit=1.0)
        return found

    def write_scheduled(self, rows: Sequence[ScheduledExecution]) -> None:
        self.store.write_scheduled(rows)


@dataclass(frozen=True)
class Mix:
    jobs: int
    window: timedelta
    late_share: float
    retry_share: float
    seed: int = 1


@dataclass
class Population:
    jobs: list[Job] = field(default_factory=list)
    rows: list[ScheduledExecution] = field(default_factory=list)
    records: list[ExecutionRecord] = field(default_factory=list)
    #: Executions due in the window.
    in_window: int = 0


def _population(mix: Mix, now: datetime, end: datetime) -> Population:
    """Jobs of the mix and what the scans left behind them: the rows of the executions due in the window (those of
    the late lane removed) and the history (the window's executions and, for recurring jobs, nine before each)."""
    rng = random.Random(mix.seed)
    population = Population()
    jobs, rows, records = population.jobs, population.rows, population.records
    for index in range(mix.jobs):
        recurring = index % 2 == 0
        last = end - timedelta(seconds=rng.uniform(0, PERIOD.total_seconds()))  # its latest fire up to the end
        schedule = Every(every=PERIOD, start=last - 40 * PERIOD) if recurring else At(at=last)
        retry = RetryPolicy(max_retries=2) if rng.random() < mix.retry_share else RetryPolicy()
        job = Job(user_id=f"bench-tenant-{index % 50}", job_id=str(uuid.uuid4()),
                  spec=JobSpec(schedule=schedule, payload={"bench": True, "n": index, "pad": PAD}, topic="jobs",
                               retry=retry),
                  created_at=now - 41 * PERIOD, updated_at=now - 41 * PERIOD,
                  trace_parent=f"00-{uuid.uuid4().hex}-{'0' * 15}1-01",
                  next_run_at=schedule.first_fire(now - 41 * PERIOD) if recurring else last)
        jobs.append(job)
        fires = [last - k * PERIOD for k in range(10 if recurring else 1)]
        for fire in fires:
            records.append(ExecutionRecord(
                job.job_id, fire, 1, execution_id_for(job.job_id, fire, 1, Trigger.SCHEDULE), job.user_id,
                ExecutionStatus.SUCCESS, Trigger.SCHEDULE, fire, published_at=fire,
                finished_at=fire + timedelta(seconds=1), job_version=1,
                next_fire_at=fire + PERIOD if recurring else None))
        if last > end - mix.window:  # fired in the window: its row was planned ahead (or went to the late lane)
            population.in_window += 1
            if rng.random() >= mix.late_share:
                rows.append(plan_execution(job, last, last - 2 * PERIOD, SEGMENTS, trigger=Trigger.SCHEDULE))
    return population


def measure(mix: Mix, settings_overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Seed a keyspace of its own, run one reconciler pass over the window, and count what it read."""
    use_local_aws_credentials()
    endpoints = servers.ensure_all()
    run_id = uuid.uuid4().hex[:8]
    settings = local_settings(endpoints, keyspace=f"jr_bench_reconcile_{run_id}", segments=SEGMENTS,
                              **(settings_overrides or {}))
    migrate(settings.cassandra)
    session = connect(settings.cassandra)
    try:
        return _measure(mix, CassandraJobStore(session))
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {settings.cassandra.keyspace}", timeout=120)
        session.cluster.shutdown()


def _measure(mix: Mix, store: CassandraJobStore) -> dict[str, Any]:
    now = minute_bucket(datetime.now(UTC)) + timedelta(seconds=30)
    grace = timedelta(minutes=2)
    frontier = minute_bucket(now - grace)  # every partition up to here done
    end = min(now - grace, frontier + MINUTE - timedelta(milliseconds=1))
    population = _population(mix, now, end)
    jobs, rows, records = population.jobs, population.rows, population.records
    began = time.monotonic()
    store.create_jobs([(job, None) for job in jobs])
    store.write_scheduled(rows)
    store.write_outcomes([Outcome(record, None) for record in records])
    seeded_s = time.monotonic() - began
    leases = MemoryLeaseStore()
    for segment in range(SEGMENTS):
        leases.advance_watermark(segment, frontier)
    leases.record_segment_count(SEGMENTS)
    old = Scanned(end - mix.window - 2 * PERIOD, frontier)  # a horizon that saw every source partition done
    leases.save_reconciler_state(json.dumps({"v": 1, "examined_to": to_epoch_ms(end - mix.window),
                                                 "earlier": [old.to_dict()], "pass": None}))
    counting = CountingStore(store)
    rules = ReconcileRules(segment_count=SEGMENTS, grace=grace, rate=1e9, budget=timedelta(hours=1))
    service = ReconcileService(counting, leases, leases, ManualClock(now), rules,  # type: ignore[arg-type]
                               changes=NoChangeLog(), waker=NoWaker())
    began = time.monotonic()
    report = service.run()
    seconds = time.monotonic() - began
    executions = population.in_window
    return {
        "mix": {"jobs": mix.jobs, "window_min": mix.window.total_seconds() / 60, "late_share": mix.late_share,
                "retry_share": mix.retry_share},
        "seeded": {"jobs": len(jobs), "rows": len(rows), "records": len(records), "seconds": round(seeded_s, 1)},
        "pass": {"done": report.pass_done, "jobs_walked": report.jobs_walked, "executions_in_window": executions,
                 "history_reads": report.history_reads, "index_rows": report.index_rows,
                 "index_partitions": report.index_partitions, "repaired": dict(report.repaired),
                 "seconds": round(seconds, 2)},
        "reads": {table: vars(reads) for table, reads in counting.reads.items()},
        "row_bytes": {"job": round(sum(map(job_bytes, jobs)) / len(jobs)),
                      "index_row": round(sum(map(row_bytes, rows)) / max(1, len(rows))),
                      "history_page": round(counting.reads["task_history_v2 (pages)"].bytes
                                            / max(1, counting.reads["task_history_v2 (pages)"].requests))},
    }


def at_scale(measured: dict[str, Any], rate: int) -> dict[str, float]:
    """The reconciler at the documented scale, walking ``rate`` jobs a second: a pass, its reads and its price."""
    reads, mix = measured["reads"], measured["pass"]
    per_job = reads["job_table_v2 (walk)"]["bytes"] / max(1, reads["job_table_v2 (walk)"]["rows"])
    pass_s = JOBS_HELD / rate
    executions = PER_SECOND * pass_s
    walk = JOBS_HELD * per_job / UNIT * 0.5
    index_row = measured["row_bytes"]["index_row"]
    partitions = SEGMENTS * pass_s / 60
    index = executions * index_row / UNIT * 0.5 + partitions * 0.5  # rounding each partition's last unit up
    reads_per_execution = mix["history_reads"] / max(1, mix["executions_in_window"])
    rru_per_read = reads["task_history_v2 (pages)"]["rru"] / max(1, reads["task_history_v2 (pages)"]["requests"])
    history = executions * reads_per_execution * rru_per_read
    total = walk + index + history
    return {"rate": rate, "pass_s": round(pass_s), "executions_per_pass": round(executions),
            "walk_rru": round(walk), "index_rru": round(index), "history_rru": round(history),
            "rru_per_execution": round(total / executions, 3),
            "usd_per_million": round(total / executions * PRICE_PER_M_RRU, 4)}


def render(measured: dict[str, Any]) -> str:
    mix, seeded, run = measured["mix"], measured["seeded"], measured["pass"]
    lines = [
        "# The reconciler: what it reads, and what it costs",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by `python -m bench.reconcile` (bench/reconcile.py) on the "
        "real local Cassandra: the documented mix (docs/scaling.md) scaled down to "
        f"{mix['jobs']:,} jobs (each firing once every {PERIOD.total_seconds() / 60:.1f} minutes on average, half "
        f"one-time, half recurring), a {mix['window_min']:.0f}-minute window, {mix['late_share']:.0%} of the "
        f"executions' rows in the late lane (removed once done), {mix['retry_share']:.0%} of the jobs with retries. "
        f"Seeded: {seeded['jobs']:,} jobs, {seeded['rows']:,} rows, {seeded['records']:,} history records.",
        "",
        "## One pass, counted",
        "",
        f"{run['jobs_walked']:,} jobs walked, {run['executions_in_window']:,} executions due in the window, "
        f"{run['index_partitions']} partitions of the index read ({run['index_rows']:,} rows), "
        f"{run['history_reads']:,} history pages read, {sum(run['repaired'].values())} repairs "
        f"(none is owed: nothing was lost); {run['seconds']} s.",
        "",
        "| table (read) | requests | rows | bytes billed (encoded) | read request units (LOCAL_ONE) |",
        "|---|---|---|---|---|",
    ]
    for table, reads in measured["reads"].items():
        lines.append(f"| {table} | {reads['requests']:,} | {reads['rows']:,} | {reads['bytes']:,} | "
                     f"{reads['rru']:,.1f} |")
    sizes = measured["row_bytes"]
    lines += [
        "",
        f"Encoded sizes (Keyspaces' row-size guide, {ROW_METADATA} bytes of row metadata assumed): a job row "
        f"{sizes['job']} bytes, an index row {sizes['index_row']} bytes, a history page {sizes['history_page']} bytes "
        "(at most ten records: one 4 KB read unit).",
        "",
        "## At the documented scale (1 M jobs held, 50 M executions a day)",
        "",
        "A pass walks every job at the walk rate; its window holds the executions due meanwhile (579 a second), whose "
        "partitions it reads once (a warm function; a cold start in the middle of a pass reads them again). Priced at "
        "LOCAL_ONE (0.5 RRU per 4 KB per request), on-demand ($0.125 per million RRU).",
        "",
        "| walk rate (jobs/s) | pass | executions a pass | walk RRU | index RRU | history RRU | RRU per execution | "
        "$ per million executions |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rate in RATES:
        scale = at_scale(measured, rate)
        lines.append(f"| {rate:,} | {scale['pass_s'] / 60:.1f} min | {scale['executions_per_pass']:,} | "
                     f"{scale['walk_rru']:,} | {scale['index_rru']:,} | {scale['history_rru']:,} | "
                     f"{scale['rru_per_execution']} | {scale['usd_per_million']} |")
    lines += [
        "",
        "A pass takes the walk's time; an execution lost just after a pass's window closed waits for the next pass to "
        "reach its job, so it is repaired within about two passes, plus the scans' lag (a minute or two) and grace.",
        "",
        "## Repair time",
        "",
        "Measured end to end on the real local stack by `tests/e2e/test_reconciler.py` (rows deleted with CQL as soon "
        "as they are written, each then re-planned once): docs/reliability.md, \"The reconciler\", gives the figures. "
        "Reproduce: `.venv/bin/pytest tests/e2e/test_reconciler.py -s` (the test's grace of 20 s and a run every 5 s), "
        "`RECONCILE_E2E_GRACE_S=120 RECONCILE_E2E_EVERY_S=60 .venv/bin/pytest tests/e2e/test_reconciler.py -s` (the "
        "production defaults); this page: `.venv/bin/python -m bench.reconcile` (servers up).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.reconcile", description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--window", type=float, default=5.0, help="minutes of executions in the pass's window")
    parser.add_argument("--late-share", type=float, default=0.05)
    parser.add_argument("--retry-share", type=float, default=0.1)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks-reconciler.md")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    mix = Mix(args.jobs, timedelta(minutes=args.window), args.late_share, args.retry_share)
    measured = measure(mix)
    text = render(measured)
    print(text)
    args.out.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(measured, indent=2, default=str))


if __name__ == "__main__":
    main()
