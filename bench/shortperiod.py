"""Short-period jobs: the rows a scan reads per execution of jobs that fire every few seconds, and the
tombstones its reads of the partition must skip.

``jobs`` jobs every ``period`` seconds in one segment, their first fires spread over the first period of
one fresh minute, seeded into that minute's PLANNED lane; that minute and the next are scanned by the
real ``ScanService`` on the real Cassandra store, Kafka publisher and heartbeat table, on a clock that
runs at real speed but skips the scan's sleeps (each poll of the late lane still happens, about once a
simulated second). The first minute is the jobs' first; the second is the steady state: its first
fires were planned by the first minute's scan into its late lane. No worker answers (results do not
read ``task_schedule_v2``). Counted on the client, per minute: every row the scan's reads of
``task_schedule_v2`` returned, per lane, and the job rows read. Counted by Cassandra: the live rows
and tombstones one read of each lane of the partition touched once the minute is done (a traced
query: the trace's "Read N live rows and M tombstone cells"), which is what a poll of that lane would
have had to skip by then.
"""

from __future__ import annotations

import re
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from bench.instruments import SkipClock
from bench.machine import code_commit
from bench.seed import PAD, empty, insert
from jobrunner.adapters.stores.cassandra import CassandraJobStore
from jobrunner.domain.jobs import Job, Lane, Trigger
from jobrunner.domain.placement import plan_execution
from jobrunner.domain.schedules import Every
from jobrunner.domain.spec import JobSpec
from jobrunner.domain.time import MINUTE
from jobrunner.ports import ScanRequest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from datetime import datetime

    from bench.context import Bench
    from jobrunner.domain.jobs import LanePosition, ScheduledExecution

TENANT = "bench-short"
_TRACE = re.compile(r"Read (\d+) live rows and (\d+) tombstone cells")


class _CountingStore(CassandraJobStore):
    """The Cassandra store, counting the rows its reads of the schedule and of the jobs return, and the
    tombstones each of its late-lane reads touched (the same read again, traced): those of the polls' windows, and
    apart those of the scan's last look at the whole lane (which finds a row that landed behind the windows)."""

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.session = session
        self.rows_read: dict[str, int] = {lane.name: 0 for lane in Lane}
        self.reads: dict[str, int] = {lane.name: 0 for lane in Lane}
        self.jobs_read = 0
        self.late_tombstones = 0
        self.last_look_tombstones = 0

    def lane_rows(
        self, bucket: datetime, segment: int, lane: Lane, after: LanePosition | None = None, *,
        since: datetime | None = None, until: datetime | None = None, stale_ok: bool = False,
    ) -> Iterator[ScheduledExecution]:
        self.reads[lane.name] += 1
        for row in super().lane_rows(bucket, segment, lane, after, since=since, until=until, stale_ok=stale_ok):
            self.rows_read[lane.name] += 1
            yield row
        if lane is Lane.LATE:
            tombstones = _traced(self.session, bucket, lane, since, until)[1]
            if since is None and until is None:
                self.last_look_tombstones += tombstones
            else:
                self.late_tombstones += tombstones

    def get_jobs(self, keys: Any) -> dict[tuple[str, str], Job]:
        self.jobs_read += len(keys)
        return super().get_jobs(keys)


def _seed(bench: Bench, session: Any, bucket: datetime, jobs: int, period_s: int) -> None:
    planned_at = bucket - timedelta(minutes=10)
    pairs = []
    for index in range(jobs):
        first = bucket + timedelta(seconds=index % period_s, milliseconds=index // period_s)
        job = Job(user_id=TENANT, job_id=f"short-{bucket:%H%M}-{index:06d}",
                  spec=JobSpec(schedule=Every(every=timedelta(seconds=period_s), start=first),
                               payload={"bench": True, "n": index, "pad": PAD}, topic=bench.names.topic),
                  created_at=planned_at, updated_at=planned_at, next_run_at=first)
        row = plan_execution(job, first, planned_at, 1, trigger=Trigger.SCHEDULE)
        assert row.bucket == bucket and row.lane is Lane.PLANNED, (row.bucket, row.lane)
        pairs.append((job, row))
    insert(session, pairs)


def _traced(
    session: Any, bucket: datetime, lane: Lane, since: datetime | None = None, until: datetime | None = None
) -> tuple[int, int]:
    """Live rows and tombstone cells one read of a lane of segment 0 of ``bucket`` (from ``since``, before
    ``until``) touched (Cassandra's trace)."""
    from cassandra.query import SimpleStatement

    bounds = [(" AND due_at >= %s", since), (" AND due_at < %s", until)]
    query = SimpleStatement(
        "SELECT job_id FROM task_schedule_v2 WHERE next_execution_time = %s AND segment = 0 AND lane = %s"
        + "".join(clause for clause, value in bounds if value is not None),
        fetch_size=1_000_000,  # one read command for the whole lane, so its trace counts every row
    )
    values = [value for _, value in bounds if value is not None]
    result = session.execute(query, (bucket, lane.value, *values), trace=True)
    list(result)
    events = result.get_query_trace(max_wait_sec=10).events
    found = [tuple(int(g) for g in m.groups()) for e in events if (m := _TRACE.search(e.description or ""))]
    return (sum(f[0] for f in found), sum(f[1] for f in found)) if found else (0, 0)


def _scan_minute(bench: Bench, session: Any, bucket: datetime) -> dict[str, Any]:
    from jobrunner.wiring import Container

    store = _CountingStore(session)
    started = time.monotonic()
    clock = SkipClock(bucket - timedelta(seconds=30), started)  # dispatched 30 s ahead, as by the tick
    container = Container(bench.settings.replace(segments=1), store=store, session=session, clock=clock)
    report = container.scans.scan(ScanRequest(segment=0, bucket=bucket))
    took = time.monotonic() - started
    planned, late = _traced(session, bucket, Lane.PLANNED), _traced(session, bucket, Lane.LATE)
    executions = max(report.published, 1)
    schedule_rows = sum(store.rows_read.values())
    return {
        "executions": report.published, "finished": report.finished, "errors": report.errors, "took_s": took,
        "rows_read": store.rows_read, "reads": store.reads, "jobs_read": store.jobs_read,
        "schedule_rows_per_execution": schedule_rows / executions,
        "reads_per_execution": (schedule_rows + store.jobs_read) / executions,
        "late_poll_tombstones": store.late_tombstones,
        "last_look_tombstones": store.last_look_tombstones,
        "traced": {"planned": {"live": planned[0], "tombstones": planned[1]},
                   "late": {"live": late[0], "tombstones": late[1]}},
    }


def shortperiod_once(bench: Bench, jobs: int, period_s: int) -> dict[str, Any]:
    from jobrunner.adapters.stores.session import connect

    first = bench.next_bucket()
    bench.next_bucket(), bench.next_bucket()  # the jobs' next fires spill into the minute after: no other run's
    session = connect(bench.settings.cassandra)
    try:
        # Other sections' jobs (the submit section's, an hour ahead) may fire in those minutes: move on an hour at
        # a time to minutes that hold no row, so that only this run's jobs are scanned.
        while not empty(CassandraJobStore(session), [first + m * MINUTE for m in range(-1, 4)], 1):
            first += timedelta(hours=1)
        second = first + MINUTE
        _seed(bench, session, first, jobs, period_s)
        minutes = [_scan_minute(bench, session, first), _scan_minute(bench, session, second)]
    finally:
        session.cluster.shutdown()
    return {"code": code_commit(), "jobs": jobs, "period_s": period_s, "minutes": minutes}


def run_shortperiod(bench: Bench) -> None:
    o = bench.options
    runs = []
    for index, period in ((i, p) for i in range(o.runs) for p in o.short_periods):
        r = shortperiod_once(bench, o.short_jobs, period)
        for name, m in zip(("first minute", "steady state"), r["minutes"], strict=True):
            print(f"  short-period run {index + 1}/{o.runs} ({r['code']}), {name}: {m['executions']} executions of "
                  f"{r['jobs']} jobs every {r['period_s']} s: {m['reads_per_execution']:.2f} rows read per execution "
                  f"(late lane {m['rows_read']['LATE']:,}, planned {m['rows_read']['PLANNED']:,}, "
                  f"jobs {m['jobs_read']:,}); the late lane's polls skipped {m['late_poll_tombstones']:,} "
                  f"tombstones; after the minute a read of the whole late lane skips "
                  f"{m['traced']['late']['tombstones']:,}", flush=True)
        runs.append(r)
    bench.results["shortperiod"] = runs
