"""The store ports' contract (jobrunner.ports: JobStore, ScheduledRowStore, HistoryStore, IdempotencyStore), on memory
and on real Cassandra."""

from __future__ import annotations

import base64
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from jobrunner.adapters.stores.cursors import decode_job_cursor, encode_job_cursor
from jobrunner.domain.errors import InvalidField
from jobrunner.domain.jobs import (
    RUN_RECORDS,
    ExecutionRecord,
    ExecutionStatus,
    Job,
    JobState,
    Lane,
    LanePosition,
    ScheduledExecution,
    Trigger,
    execution_id_for,
    with_runs,
)
from jobrunner.domain.schedules import At, Cron, Every
from jobrunner.domain.spec import JobSpec, RetryPolicy
from jobrunner.ports import Completion, IdempotencyClaim, Outcome, Stores

if TYPE_CHECKING:
    from collections.abc import Callable

NOW = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
BUCKET = datetime(2026, 11, 22, 10, 5, tzinfo=UTC)


def make_job(user: str | None = None, **changes: object) -> Job:
    job = Job(user_id=user or f"user-{uuid.uuid4().hex[:6]}", job_id=str(uuid.uuid4()),
              spec=JobSpec(schedule=Every(every=timedelta(minutes=1), start=BUCKET),
                           payload={"n": 1, "nested": [1, "x"]}, topic="jobs", retry=RetryPolicy(max_retries=2)),
              created_at=NOW, updated_at=NOW)
    return job.with_changes(**changes)


def make_row(job: Job, due: datetime, lane: Lane = Lane.PLANNED, segment: int = 1,
             bucket: datetime = BUCKET, attempt: int = 1) -> ScheduledExecution:
    return ScheduledExecution(
        bucket=bucket, segment=segment, lane=lane, due_at=due, job_id=job.job_id,
        execution_id=execution_id_for(job.job_id, due, attempt, Trigger.SCHEDULE), user_id=job.user_id,
        scheduled_at=due, attempt=attempt, job_version=job.schedule_version, trigger=Trigger.SCHEDULE,
    )


def unique_segment() -> int:
    return uuid.uuid4().int % 1_000_000 + 100  # partitions of their own, so tests never see each other


def test_create_job_then_get_job_round_trips_every_field(job_store: Stores) -> None:
    job = make_job(schedule=At(at=BUCKET + timedelta(seconds=7)), state=JobState.PAUSED, version=3,
                   paused_at=NOW + timedelta(seconds=5, milliseconds=250), jitter_s=45,
                   tags={"team": "payments", "note": ""}, calendar="holidays", delete_after_last=True,
                   created_by="arn:aws:iam::123456789012:role/Ops")
    job_store.create_job(job, None)
    assert job_store.get_job(job.user_id, job.job_id) == job


def test_a_cron_with_its_end_conditions_round_trips(job_store: Stores) -> None:
    job = make_job(schedule=Cron("0 9 * * MON-FRI", "Europe/Paris", start=NOW, end=NOW + timedelta(days=9),
                                 count=7))
    job_store.create_job(job, None)
    assert job_store.get_job(job.user_id, job.job_id) == job


def test_retire_job_marks_the_job_deleted_only_at_the_version_read(job_store: Stores) -> None:
    job = make_job(version=2, created_by="ops")
    job_store.create_job(job, None)
    deleted = job.with_changes(state=JobState.DELETED, version=3, schedule_version=3, next_run_at=None)
    assert not job_store.retire_job(deleted, expected_version=1, ttl_s=3600)  # changed since: kept as it was
    assert job_store.get_job(job.user_id, job.job_id) == job
    assert job_store.retire_job(deleted, expected_version=2, ttl_s=3600)
    stored = job_store.get_job(job.user_id, job.job_id)
    assert stored is not None
    assert (stored.state, stored.version, stored.spec.payload) == (JobState.DELETED, 3, job.spec.payload)
    assert stored.created_by == job.created_by
    assert not job_store.retire_job(deleted, expected_version=2, ttl_s=3600)  # already


def test_get_job_is_scoped_to_the_tenant(job_store: Stores) -> None:
    job = make_job()
    job_store.create_job(job, None)
    assert job_store.get_job("someone-else", job.job_id) is None
    assert job_store.get_jobs([(job.user_id, job.job_id), ("someone-else", job.job_id)]) == {
        (job.user_id, job.job_id): job
    }


def test_create_jobs_writes_each_job_with_its_first_run(job_store: Stores) -> None:
    # Given 25 jobs, all but one with a first run in one partition
    segment = unique_segment()
    jobs = [make_job() for _ in range(25)]
    rows = [make_row(job, BUCKET + timedelta(seconds=n), segment=segment) for n, job in enumerate(jobs[:-1])]
    # When they are created in one call, twice (a retried call is harmless)
    pairs = [*zip(jobs, rows, strict=False), (jobs[-1], None)]
    job_store.create_jobs(pairs)
    job_store.create_jobs(pairs)
    # Then every job is there, as written, and every first run is in its partition
    assert job_store.get_jobs([(j.user_id, j.job_id) for j in jobs]) == {(j.user_id, j.job_id): j for j in jobs}
    assert list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED)) == rows


def test_get_jobs_reads_many_jobs_of_several_tenants_and_only_those_asked(job_store: Stores) -> None:
    # Given 230 jobs of one tenant (more than one IN list of the Cassandra store) and 3 of another
    busy, quiet = f"busy-{uuid.uuid4().hex[:6]}", f"quiet-{uuid.uuid4().hex[:6]}"
    busy_jobs = [make_job(busy) for _ in range(230)]
    quiet_jobs = [make_job(quiet) for _ in range(3)]
    for job in busy_jobs + quiet_jobs:
        job_store.create_job(job, None)
    # When most of them are read at once, with repeated keys, a missing job, and a job asked for under the
    # wrong tenant
    asked = [(j.user_id, j.job_id) for j in busy_jobs[:225] + quiet_jobs]
    asked += [*asked[:5], (busy, str(uuid.uuid4())), (quiet, busy_jobs[-1].job_id)]
    found = job_store.get_jobs(asked)
    # Then exactly the jobs that exist under the tenant asked for come back, each as written
    assert found == {(j.user_id, j.job_id): j for j in busy_jobs[:225] + quiet_jobs}


def test_many_rows_written_and_removed_in_one_call_each_land(job_store: Stores) -> None:
    # Given 37 executions of 37 jobs in 3 partitions (several batches of the Cassandra store)
    segment = unique_segment()
    jobs = [make_job() for _ in range(37)]
    rows = [make_row(job, BUCKET + timedelta(seconds=n % 50), segment=segment + n % 3) for n, job in enumerate(jobs)]
    # When they are scheduled in one call, all started in one call, then all dropped in one call
    job_store.write_scheduled(rows)
    lanes = {s: list(job_store.lane_rows(BUCKET, s, Lane.PLANNED)) for s in range(segment, segment + 3)}
    records = [running_record(row, BUCKET + timedelta(minutes=1)) for row in rows]
    job_store.write_started(records)
    job_store.delete_scheduled(rows)
    # Then every row was in its partition, every record is in its job's history, and no row is left
    for s, lane in lanes.items():
        mine = [r for r in rows if r.segment == s]
        assert sorted(lane, key=lambda r: r.job_id) == sorted(mine, key=lambda r: r.job_id)
    for record in records:
        assert job_store.history_page(record.job_id, 5) == [record]
    assert all(list(job_store.lane_rows(BUCKET, s, Lane.PLANNED)) == [] for s in lanes)


def test_lane_rows_streams_one_lane_in_due_order(job_store: Stores) -> None:
    # Given rows written out of order in both lanes of one partition, and one in another segment
    segment = unique_segment()
    job = make_job()
    dues = [BUCKET + timedelta(seconds=s) for s in (40, 5, 59, 0, 17)]
    for due in dues:
        job_store.create_job(job, make_row(job, due, segment=segment))
    late = make_row(job, BUCKET + timedelta(seconds=30), lane=Lane.LATE, segment=segment)
    job_store.create_job(job, late)
    job_store.create_job(job, make_row(job, BUCKET, segment=segment + 1))
    # When each lane is read (the Cassandra store pages 3 rows at a time here)
    planned = list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED))
    # Then each lane holds exactly its rows, in due order
    assert [r.due_at for r in planned] == sorted(dues)
    assert list(job_store.lane_rows(BUCKET, segment, Lane.LATE)) == [late]
    assert planned[0] == make_row(job, BUCKET, segment=segment)


def running_record(
    row: ScheduledExecution, published_at: datetime, next_fire_at: datetime | None = None
) -> ExecutionRecord:
    """The record the scan starts for ``row`` before publishing it (``next_fire_at``: the schedule's next fire)."""
    return ExecutionRecord(
        job_id=row.job_id, scheduled_at=row.scheduled_at, attempt=row.attempt, execution_id=row.execution_id,
        user_id=row.user_id, status=ExecutionStatus.RUNNING, trigger=row.trigger, due_at=row.due_at,
        published_at=published_at, job_version=row.job_version, next_fire_at=next_fire_at,
    )


def shown(store: Stores, job: Job) -> Job:
    """The job as the API shows it: the stored job with its run fields derived from its newest records."""
    stored = store.get_job(job.user_id, job.job_id)
    assert stored is not None
    return with_runs(stored, store.latest_records([job.job_id], RUN_RECORDS)[job.job_id])


def test_write_started_records_the_execution_and_writes_nothing_to_the_job(job_store: Stores) -> None:
    # Given two jobs, each with a row about to be published
    segment = unique_segment()
    jobs = [make_job(), make_job()]
    rows = [make_row(job, BUCKET + timedelta(seconds=10), segment=segment) for job in jobs]
    for job, row in zip(jobs, rows, strict=True):
        job_store.create_job(job, row)
    published = BUCKET + timedelta(seconds=10, milliseconds=12)
    records = [running_record(row, published, next_fire_at=BUCKET + timedelta(seconds=70)) for row in rows]
    # When the scan starts both executions in one call, then replays it
    job_store.write_started(records)
    job_store.write_started(records)  # replaying is harmless
    # Then each execution is in its job's history, RUNNING; the job rows are as they were written, and
    # the run fields derived from the history name the execution and the next fire
    for job, row, record in zip(jobs, rows, records, strict=True):
        assert job_store.history_page(job.job_id, 10) == [record]
        assert job_store.get_record(job.job_id, row.scheduled_at, 1, row.execution_id) == record
        assert job_store.get_job(job.user_id, job.job_id) == job
        assert shown(job_store, job) == job.with_changes(
            last_run_at=published, last_execution_id=row.execution_id, last_status=ExecutionStatus.RUNNING,
            next_run_at=BUCKET + timedelta(seconds=70),
        )
    # and the rows are left for complete
    left = list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED))
    assert sorted(left, key=lambda r: r.job_id) == sorted(rows, key=lambda r: r.job_id)


def test_settle_published_plans_the_next_run_and_keeps_the_done_planned_row(job_store: Stores) -> None:
    # Given a started execution of a job with a timeout
    segment = unique_segment()
    job = make_job(timeout_s=30)
    row = make_row(job, BUCKET + timedelta(seconds=10), segment=segment)
    job_store.create_job(job, row)
    published = BUCKET + timedelta(seconds=10, milliseconds=12)
    following = make_row(job, BUCKET + timedelta(seconds=70), segment=segment, bucket=BUCKET + timedelta(minutes=1))
    record = running_record(row, published, next_fire_at=following.due_at)
    job_store.write_started([record])
    # When its publish is acknowledged and complete writes what follows, twice
    watchdog = ScheduledExecution(
        bucket=BUCKET, segment=segment, lane=Lane.LATE, due_at=published + timedelta(seconds=30), job_id=job.job_id,
        execution_id=execution_id_for(job.job_id, row.scheduled_at, 1, Trigger.TIMEOUT), user_id=job.user_id,
        scheduled_at=row.scheduled_at, attempt=1, job_version=job.version, trigger=Trigger.TIMEOUT,
    )
    completion = Completion(done=row, following=following, watchdog=watchdog)
    job_store.settle_published([completion])
    job_store.settle_published([completion])  # replaying is harmless
    # Then the done row stays (it expires: no delete per execution), the following row and the watchdog
    # wait in their partitions
    assert list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED)) == [row]
    assert list(job_store.lane_rows(following.bucket, segment, Lane.PLANNED)) == [following]
    assert list(job_store.lane_rows(BUCKET, segment, Lane.LATE)) == [watchdog]
    # and the job row is untouched: its next run and last run are derived from the history
    assert job_store.history_page(job.job_id, 10) == [record]
    assert job_store.get_job(job.user_id, job.job_id) == job
    run = shown(job_store, job)
    assert (run.next_run_at, run.last_run_at, run.last_execution_id, run.last_status) == (
        following.due_at, published, row.execution_id, ExecutionStatus.RUNNING
    )


def test_settle_published_removes_nothing_and_the_scan_removes_a_done_late_row(job_store: Stores) -> None:
    # Given a row of the late lane (polled whole while its scan runs), started and published
    segment = unique_segment()
    job = make_job(schedule=At(BUCKET + timedelta(seconds=20)))
    row = make_row(job, BUCKET + timedelta(seconds=20), lane=Lane.LATE, segment=segment)
    job_store.create_job(job, row)
    job_store.write_started([running_record(row, row.due_at)])
    # When it is completed, it is still there: only the rows that follow it are written (the scan removes it
    # once they are known to be in time for their scans: verify, then commit)
    job_store.settle_published([Completion(done=row, following=None)])
    assert list(job_store.lane_rows(BUCKET, segment, Lane.LATE)) == [row]
    # and once removed it is gone from the late lane
    job_store.delete_scheduled([row])
    assert list(job_store.lane_rows(BUCKET, segment, Lane.LATE)) == []


def test_settle_published_leaves_history_and_the_last_status_alone(job_store: Stores) -> None:
    # Given a started execution whose worker reported before the scan completed it (a fast worker)
    segment = unique_segment()
    job = make_job()
    row = make_row(job, BUCKET + timedelta(seconds=10), segment=segment)
    job_store.create_job(job, row)
    published = BUCKET + timedelta(seconds=10, milliseconds=12)
    following = make_row(job, BUCKET + timedelta(seconds=70), segment=segment, bucket=BUCKET + timedelta(minutes=1))
    started = running_record(row, published, next_fire_at=following.due_at)
    job_store.write_started([started])
    succeeded = replace(started, status=ExecutionStatus.SUCCESS, finished_at=published + timedelta(seconds=1))
    job_store.write_outcomes([Outcome(succeeded, None)])
    # When the scan completes it
    job_store.settle_published([Completion(done=row, following=following)])
    # Then the SUCCESS survives: complete wrote neither the record nor the job
    assert job_store.history_page(job.job_id, 10) == [succeeded]
    assert job_store.get_job(job.user_id, job.job_id) == job
    assert shown(job_store, job) == job.with_changes(
        next_run_at=following.due_at, last_run_at=published, last_execution_id=row.execution_id,
        last_status=ExecutionStatus.SUCCESS,
    )
    assert list(job_store.lane_rows(following.bucket, segment, Lane.PLANNED)) == [following]


def test_settle_published_without_write_started_writes_no_history(job_store: Stores) -> None:
    segment = unique_segment()
    job = make_job()
    row = make_row(job, BUCKET, segment=segment)
    job_store.create_job(job, row)
    job_store.settle_published([Completion(done=row, following=None)])
    assert job_store.history_page(job.job_id, 10) == []
    assert job_store.get_record(job.job_id, BUCKET, 1, row.execution_id) is None
    assert job_store.get_job(job.user_id, job.job_id) == job
    assert list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED)) == [row]  # kept until it expires


def test_settle_published_of_a_manual_run_keeps_the_next_run(job_store: Stores) -> None:
    job = make_job()
    row = make_row(job, BUCKET, segment=unique_segment())
    job_store.create_job(job, row)
    record = ExecutionRecord(
        job_id=job.job_id, scheduled_at=row.scheduled_at, attempt=1, execution_id=row.execution_id,
        user_id=job.user_id, status=ExecutionStatus.RUNNING, trigger=Trigger.MANUAL, due_at=row.due_at,
        published_at=BUCKET,
    )
    job_store.write_started([record])
    job_store.settle_published([Completion(done=row, following=None)])
    run = shown(job_store, job)
    assert run.next_run_at == job.next_run_at
    assert (run.last_run_at, run.last_execution_id) == (BUCKET, row.execution_id)


def test_delete_scheduled_removes_rows_without_history(job_store: Stores) -> None:
    segment = unique_segment()
    job = make_job()
    rows = [make_row(job, BUCKET + timedelta(seconds=s), segment=segment) for s in (1, 2)]
    for row in rows:
        job_store.create_job(job, row)
    job_store.delete_scheduled(rows[:1])
    assert list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED)) == rows[1:]
    assert job_store.history_page(job.job_id, 10) == []


def test_history_page_is_newest_first_and_limited(job_store: Stores) -> None:
    job = make_job()
    job_store.create_job(job, None)
    rows = [make_row(job, BUCKET + timedelta(minutes=minute), segment=unique_segment()) for minute in range(4)]
    job_store.write_started([running_record(row, row.due_at) for row in rows])
    job_store.settle_published([Completion(done=row, following=None) for row in rows])
    newest = job_store.history_page(job.job_id, 3)
    assert [r.scheduled_at for r in newest] == [BUCKET + timedelta(minutes=m) for m in (3, 2, 1)]


# -- helpers for the job-management and results parts of the contract ------------------------------


def make_record(
    job: Job, scheduled_at: datetime, attempt: int = 1, status: ExecutionStatus = ExecutionStatus.FAILED,
    trigger: Trigger = Trigger.SCHEDULE, error: str | None = "boom",
) -> ExecutionRecord:
    return ExecutionRecord(
        job_id=job.job_id, scheduled_at=scheduled_at, attempt=attempt,
        execution_id=execution_id_for(job.job_id, scheduled_at, attempt, trigger), user_id=job.user_id,
        status=status, trigger=trigger, due_at=scheduled_at, published_at=scheduled_at + timedelta(milliseconds=15),
        finished_at=scheduled_at + timedelta(seconds=3) if status is not ExecutionStatus.RUNNING else None,
        error=error if status is ExecutionStatus.FAILED else None,
    )


def run_once(store: Stores, job: Job, row: ScheduledExecution, following: ScheduledExecution | None) -> None:
    """What the scan does around publishing ``row``: it starts the execution (its record names the next
    fire), publishes it, then completes it."""
    started = make_record(job, row.scheduled_at, status=ExecutionStatus.RUNNING)
    store.write_started([replace(started, job_version=row.job_version,
                         next_fire_at=following.scheduled_at if following else None)])
    store.settle_published([Completion(done=row, following=following)])


def all_pages(store: Stores, user: str, limit: int) -> tuple[list[str], list[int]]:
    """Follow the cursors to the end: (job ids in the order returned, size of each page)."""
    ids: list[str] = []
    sizes: list[int] = []
    cursor: str | None = None
    while True:
        page, cursor = store.list_jobs(user, limit, cursor)
        ids += [job.job_id for job in page]
        sizes.append(len(page))
        assert len(sizes) < 100, "the cursors never end"
        if cursor is None:
            return ids, sizes


def all_jobs(store: Stores, user: str) -> list[Job]:
    """Every job of ``user``, following the cursors."""
    jobs: list[Job] = []
    cursor: str | None = None
    while True:
        page, cursor = store.list_jobs(user, 3, cursor)
        jobs += page
        if cursor is None:
            return jobs


def all_pages_from(store: Stores, user: str, cursor: str | None) -> tuple[list[str], int]:
    """The job ids of every page from ``cursor`` on, and how many pages that took."""
    ids: list[str] = []
    pages = 0
    while cursor is not None:
        page, cursor = store.list_jobs(user, 2, cursor)
        ids += [job.job_id for job in page]
        pages += 1
    return ids, pages


# -- update and schedule ------------------------------------------------------------------------------


def test_update_job_overwrites_user_fields_keeps_run_fields_and_writes_the_next_row(job_store: Stores) -> None:
    # Given a job whose first run the scan has published (the run fields are set)
    segment = unique_segment()
    job = make_job()
    first = make_row(job, BUCKET + timedelta(seconds=10), segment=segment)
    job_store.create_job(job, first)
    following = make_row(job, BUCKET + timedelta(seconds=70), segment=segment, bucket=BUCKET + timedelta(minutes=1))
    run_once(job_store, job, first, following)
    ran = shown(job_store, job)
    assert ran.last_status is ExecutionStatus.RUNNING
    # When the API saves a new version from its copy read before the run (stale run fields)
    later = BUCKET + timedelta(minutes=30)
    edited = job.with_changes(
        schedule=Every(every=timedelta(minutes=2), start=later), payload={"n": 2}, topic="reports",
        state=JobState.ACTIVE, version=2, schedule_version=2,
        retry=RetryPolicy(max_retries=5, initial_delay_s=1, multiplier=3, max_delay_s=60),
        timeout_s=45, paused_at=NOW + timedelta(seconds=30), updated_at=NOW + timedelta(minutes=1), jitter_s=120,
    )
    next_row = make_row(edited, later, segment=segment, bucket=later)
    assert job_store.update_job(edited, [next_row], expected_version=1)
    # Then every user-controlled field is the new one, the run fields are the run's, and the row is there
    assert job_store.get_job(job.user_id, job.job_id) == edited
    assert shown(job_store, job) == edited.with_changes(
        last_run_at=ran.last_run_at, last_execution_id=ran.last_execution_id, last_status=ran.last_status
    )
    assert list(job_store.lane_rows(later, segment, Lane.PLANNED)) == [next_row]
    assert next_row.job_version == 2


def test_update_job_without_a_next_row_writes_no_row(job_store: Stores) -> None:
    segment = unique_segment()
    job = make_job()
    row = make_row(job, BUCKET, segment=segment)
    job_store.create_job(job, row)
    paused = job.with_changes(state=JobState.PAUSED, version=2, schedule_version=2,
                              updated_at=NOW + timedelta(seconds=1))
    assert job_store.update_job(paused, [], expected_version=1)
    assert job_store.get_job(job.user_id, job.job_id) == paused
    # the row planned under version 1 is left for its scan to drop
    assert list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED)) == [row]


def test_update_job_keeps_the_creation_time_and_who_submitted(job_store: Stores) -> None:
    # created_at and created_by are not among the fields update overwrites (ports.JobStore.update_job)
    job = make_job(created_by="ops")
    job_store.create_job(job, None)
    assert job_store.update_job(job.with_changes(version=2, created_at=NOW + timedelta(days=1), created_by="eve"), [],
                                expected_version=1)
    stored = job_store.get_job(job.user_id, job.job_id)
    assert stored is not None and (stored.created_at, stored.created_by) == (NOW, "ops")
    assert job_store.update_job(stored.with_changes(version=3, schedule_version=3, state=JobState.PAUSED,
                                                    created_by=None), [], expected_version=2)
    stored = job_store.get_job(job.user_id, job.job_id)
    assert stored is not None and (stored.version, stored.created_by) == (3, "ops")


def test_a_fire_replanned_under_a_new_version_is_a_row_of_its_own(job_store: Stores) -> None:
    # Given a fire planned under version 1, and the same fire re-planned under version 2 (a PATCH of the schedule)
    segment = unique_segment()
    job = make_job()
    stale = make_row(job, BUCKET, segment=segment)
    job_store.create_job(job, stale)
    changed = job.with_changes(version=2, schedule_version=2, schedule=Every(every=timedelta(seconds=30), start=BUCKET))
    replanned = make_row(changed, BUCKET, segment=segment)
    assert job_store.update_job(changed, [replanned], expected_version=1)
    # Then both rows are there, and dropping (or completing) the stale one leaves the new one
    assert list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED)) == [stale, replanned]
    job_store.delete_scheduled([stale])
    assert list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED)) == [replanned]
    late_stale, late_replanned = (replace(r, lane=Lane.LATE) for r in (stale, replanned))
    job_store.write_scheduled([late_stale, late_replanned])
    job_store.delete_scheduled([late_stale])
    assert list(job_store.lane_rows(BUCKET, segment, Lane.LATE)) == [late_replanned]


def test_a_change_keeping_the_schedule_leaves_the_next_run_as_a_scan_wrote_it(job_store: Stores) -> None:
    # Given a job whose fire a scan completed (planning the next one) after the API read the job
    segment = unique_segment()
    job = make_job()
    first = make_row(job, BUCKET, segment=segment)
    job_store.create_job(job, first)
    following = make_row(job, BUCKET + timedelta(minutes=1), segment=segment, bucket=BUCKET + timedelta(minutes=1))
    run_once(job_store, job, first, following)
    # When a PATCH of the payload, decided on the copy read before, lands
    edited = job.with_changes(version=2, payload={"n": 2}, topic="reports", timeout_s=30,
                              updated_at=NOW + timedelta(minutes=2), jitter_s=7, tags={"tier": "1"})
    assert edited.schedule_version == 1
    assert job_store.update_job(edited, [], expected_version=1)
    # Then the job has the new payload and still the next run the scan planned, and the row is there
    stored = shown(job_store, job)
    assert (stored.spec.payload, stored.spec.topic, stored.spec.timeout_s) == ({"n": 2}, "reports", 30)
    assert stored.version == 2
    assert (stored.spec.jitter_s, stored.spec.tags) == (7, {"tier": "1"})
    assert (stored.next_run_at, stored.schedule_version) == (BUCKET + timedelta(minutes=1), 1)
    assert list(job_store.lane_rows(BUCKET + timedelta(minutes=1), segment, Lane.PLANNED)) == [following]


def test_a_completion_planned_before_a_change_of_schedule_leaves_the_changes_next_run(job_store: Stores) -> None:
    # Given a job rescheduled (version 2, next run at +30 min) while a scan was publishing its first fire
    segment = unique_segment()
    job = make_job()
    first = make_row(job, BUCKET, segment=segment)
    job_store.create_job(job, first)
    later = BUCKET + timedelta(minutes=30)
    changed = job.with_changes(version=2, schedule_version=2, schedule=Every(every=timedelta(minutes=5), start=later),
                               next_run_at=later)
    replanned = make_row(changed, later, segment=segment, bucket=later)
    assert job_store.update_job(changed, [replanned], expected_version=1)
    # When the scan's completion of the first fire lands, planning the old schedule's next run
    following = make_row(job, BUCKET + timedelta(minutes=1), segment=segment, bucket=BUCKET + timedelta(minutes=1))
    run_once(job_store, job, first, following)
    # Then the job's next run is still the change's
    assert shown(job_store, job).next_run_at == later
    # and once the change's fire completes, it is the one planned after it
    after = make_row(changed, later + timedelta(minutes=5), segment=segment, bucket=later + timedelta(minutes=5))
    run_once(job_store, changed, replanned, after)
    assert shown(job_store, job).next_run_at == later + timedelta(minutes=5)


def test_update_job_is_a_compare_and_set_on_the_version(job_store: Stores) -> None:
    # Given a job at version 2 (a first change landed)
    segment = unique_segment()
    job = make_job()
    job_store.create_job(job, None)
    assert job_store.update_job(job.with_changes(version=2, payload={"won": True}), [], expected_version=1)
    # When a second change read version 1 too and writes its row and its version 2
    loser = job.with_changes(version=2, schedule_version=2, payload={"lost": True})
    row = make_row(loser, BUCKET, segment=segment)
    assert not job_store.update_job(loser, [row], expected_version=1)
    # Then the job is the winner's, and the loser's row stays: the winner took the same version and may have
    # planned the very same row, so removing it could remove the winner's (its scan drops it if it is stale)
    stored = job_store.get_job(job.user_id, job.job_id)
    assert stored is not None and stored.spec.payload == {"won": True}
    assert list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED)) == [row]
    # and a change that read version 2 applies
    assert job_store.update_job(job.with_changes(version=3, payload={"third": True}), [], expected_version=2)


def test_the_first_fire_of_a_schedule_version_is_the_next_run_its_change_wrote(job_store: Stores) -> None:
    # Given a job submitted with its first run
    job = make_job(next_run_at=BUCKET)
    job_store.create_job(job, None)
    assert shown(job_store, job).schedule_from == BUCKET
    # When a resume with catch-up and a plain resume both read version 1, and the plain one lands first
    later = BUCKET + timedelta(minutes=10)
    assert job_store.update_job(job.with_changes(version=2, schedule_version=2, next_run_at=later), [], 1)
    assert not job_store.update_job(job.with_changes(version=2, schedule_version=2, next_run_at=BUCKET), [], 1)
    # Then the job's fires of version 2 start at the winner's first one, and a change of anything else keeps it
    assert shown(job_store, job).schedule_from == later
    edited = job.with_changes(version=3, schedule_version=2, payload={"n": 2}, next_run_at=later + timedelta(minutes=1))
    assert job_store.update_job(edited, [], expected_version=2)
    assert (shown(job_store, job).version, shown(job_store, job).schedule_from) == (3, later)
    # and a pause plans none
    paused = job.with_changes(version=4, schedule_version=4, state=JobState.PAUSED, next_run_at=None)
    assert job_store.update_job(paused, [], expected_version=3)
    assert shown(job_store, job).schedule_from is None


def test_a_settled_read_sees_every_change_that_landed(job_store: Stores) -> None:
    # Given a job, changed once; a missing job
    job = make_job()
    job_store.create_job(job, None)
    assert job_store.update_job(job.with_changes(version=2, payload={"n": 2}), [], expected_version=1)
    # Then the settling read returns it as it stands, and None for a job that is not there
    settled = job_store.get_job_settled(job.user_id, job.job_id)
    assert settled is not None and (settled.version, settled.spec.payload) == (2, {"n": 2})
    assert job_store.get_job_settled(job.user_id, "no-such-job") is None


def test_a_held_row_keeps_its_mark_and_other_rows_carry_none(job_store: Stores) -> None:
    # Given a fire held by its overlap policy, written again for later, beside a plain row
    segment = unique_segment()
    job = make_job()
    plain = make_row(job, BUCKET, segment=segment)
    held = replace(make_row(job, BUCKET + timedelta(seconds=30), segment=segment), held=True)
    job_store.write_scheduled([plain, held])
    # Then each reads back as written
    assert list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED)) == [plain, held]


def test_update_job_of_a_missing_job_applies_nothing(job_store: Stores) -> None:
    job = make_job()
    assert not job_store.update_job(job.with_changes(version=2), [], expected_version=1)
    assert job_store.get_job(job.user_id, job.job_id) is None


def test_write_started_never_moves_an_ended_execution_back(job_store: Stores) -> None:
    # Given an execution that was published and then succeeded
    job = make_job()
    job_store.create_job(job, None)
    running = ExecutionRecord(
        job_id=job.job_id, scheduled_at=BUCKET, attempt=1, execution_id=execution_id_for(
            job.job_id, BUCKET, 1, Trigger.SCHEDULE), user_id=job.user_id, status=ExecutionStatus.RUNNING,
        trigger=Trigger.SCHEDULE, due_at=BUCKET, published_at=BUCKET + timedelta(milliseconds=40),
    )
    job_store.write_started([running])
    ended = running.__class__(**{**running.__dict__, "status": ExecutionStatus.SUCCESS,
                                 "finished_at": BUCKET + timedelta(seconds=2)})
    job_store.write_outcomes([Outcome(ended, None)])
    # When a crashed scan's replay records the publish again
    replay = running.__class__(**{**running.__dict__, "published_at": BUCKET + timedelta(minutes=1)})
    job_store.write_started([replay])
    # Then the execution is still SUCCESS, with its end time
    record = job_store.get_record(job.job_id, BUCKET, 1, running.execution_id)
    assert record is not None
    assert (record.status, record.finished_at) == (ExecutionStatus.SUCCESS, BUCKET + timedelta(seconds=2))


def test_lane_rows_after_a_row_resumes_a_broken_read(job_store: Stores) -> None:
    # Given a lane of rows, two of them due at the same instant
    segment = unique_segment()
    jobs = [make_job() for _ in range(4)]
    dues = [BUCKET + timedelta(seconds=s) for s in (1, 3, 3, 9)]
    rows = [make_row(j, due, segment=segment) for j, due in zip(jobs, dues, strict=True)]
    for job, row in zip(jobs, rows, strict=True):
        job_store.create_job(job, row)
    everything = list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED))
    # Then reading after any of them yields exactly the rows that sort after it
    for index, row in enumerate(everything):
        assert list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED, after=LanePosition.of(row))) == (
            everything[index + 1:]
        )


def test_lane_rows_in_a_window_of_due_time_yields_exactly_the_rows_due_in_it(job_store: Stores) -> None:
    # Given a lane of rows due at 1, 3, 3 and 9 s into the bucket
    segment = unique_segment()
    jobs = [make_job() for _ in range(4)]
    dues = [BUCKET + timedelta(seconds=s) for s in (1, 3, 3, 9)]
    for job, due in zip(jobs, dues, strict=True):
        job_store.create_job(job, make_row(job, due, segment=segment))
    everything = list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED))

    def window(since: int | None, until: int | None) -> list[ScheduledExecution]:
        bounds = {"since": None if since is None else BUCKET + timedelta(seconds=since),
                  "until": None if until is None else BUCKET + timedelta(seconds=until)}
        return list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED, **bounds))

    # Then a window yields the rows due at or after its start and before its end, in order
    assert window(None, 3) == everything[:1]
    assert window(3, 9) == everything[1:3]
    assert window(3, None) == everything[1:]
    assert window(4, 9) == []
    assert window(None, None) == everything
    # and consecutive windows yield each row once
    assert window(None, 2) + window(2, 3) + window(3, 5) + window(5, None) == everything


def test_write_scheduled_inserts_rows_idempotently(job_store: Stores) -> None:
    segment = unique_segment()
    job = make_job()
    job_store.create_job(job, None)
    manual = ScheduledExecution(
        bucket=BUCKET, segment=segment, lane=Lane.LATE, due_at=BUCKET + timedelta(seconds=3), job_id=job.job_id,
        execution_id=execution_id_for(job.job_id, BUCKET + timedelta(seconds=3), 1, Trigger.MANUAL),
        user_id=job.user_id, scheduled_at=BUCKET + timedelta(seconds=3), attempt=1, job_version=1,
        trigger=Trigger.MANUAL,
    )
    planned = make_row(job, BUCKET + timedelta(seconds=1), segment=segment)
    job_store.write_scheduled([manual, planned])
    job_store.write_scheduled([manual])  # a retried request
    assert list(job_store.lane_rows(BUCKET, segment, Lane.LATE)) == [manual]
    assert list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED)) == [planned]
    assert job_store.get_job(job.user_id, job.job_id) == job  # rows only


# -- list_jobs ----------------------------------------------------------------------------------------


def test_list_jobs_pages_through_all_of_a_tenants_jobs_in_job_id_order(job_store: Stores) -> None:
    user = f"user-{uuid.uuid4().hex[:6]}"
    mine = [make_job(user) for _ in range(7)]
    for job in [*mine, make_job(), make_job()]:
        job_store.create_job(job, None)
    ids, sizes = all_pages(job_store, user, 3)
    assert ids == sorted(j.job_id for j in mine)
    assert all(size <= 3 for size in sizes) and sizes[:2] == [3, 3]
    first_page, _ = job_store.list_jobs(user, 3, None)
    assert first_page == sorted(mine, key=lambda j: j.job_id)[:3]  # whole jobs, not just ids


def test_list_jobs_of_an_exact_number_of_pages_ends(job_store: Stores) -> None:
    user = f"user-{uuid.uuid4().hex[:6]}"
    mine = [make_job(user) for _ in range(4)]
    for job in mine:
        job_store.create_job(job, None)
    # (a backend may only learn on the following, empty page that the list has ended)
    ids, sizes = all_pages(job_store, user, 2)
    assert ids == sorted(j.job_id for j in mine)
    assert sizes in ([2, 2], [2, 2, 0])


def test_list_jobs_of_a_tenant_without_jobs_is_empty(job_store: Stores) -> None:
    assert job_store.list_jobs(f"nobody-{uuid.uuid4().hex[:6]}", 10, None) == ([], None)


def test_list_jobs_is_scoped_to_the_tenant_even_with_another_tenants_cursor(job_store: Stores) -> None:
    alice, bob = (f"{name}-{uuid.uuid4().hex[:6]}" for name in ("alice", "bob"))
    for user in (alice, bob):
        for _ in range(4):
            job_store.create_job(make_job(user), None)
    _, alice_cursor = job_store.list_jobs(alice, 2, None)
    assert alice_cursor is not None
    # Bob replaying Alice's cursor may get any page of his own jobs, never one of hers
    page, _ = job_store.list_jobs(bob, 10, alice_cursor)
    assert {j.user_id for j in page} <= {bob}
    assert {j.user_id for j in all_jobs(job_store, bob)} == {bob}


def test_list_jobs_cursor_works_on_another_instance_of_the_store(
    job_store_instances: Callable[[], Stores],
) -> None:
    # Given a cursor made by one instance (one Lambda invocation)
    writer = job_store_instances()
    user = f"user-{uuid.uuid4().hex[:6]}"
    mine = sorted((make_job(user) for _ in range(5)), key=lambda j: j.job_id)
    for job in mine:
        writer.create_job(job, None)
    first, cursor = writer.list_jobs(user, 2, None)
    assert cursor is not None
    # When the next page is asked of another instance (the next request)
    rest, _ = all_pages_from(job_store_instances(), user, cursor)
    # Then it continues where the first page ended
    assert [j.job_id for j in first] + rest == [j.job_id for j in mine]


def test_list_jobs_cursor_names_the_last_job_of_the_page(job_store: Stores) -> None:
    # The cursor is the same for every store: the last job id of the page, behind a version prefix
    user = f"user-{uuid.uuid4().hex[:6]}"
    mine = sorted((make_job(user) for _ in range(3)), key=lambda j: j.job_id)
    for job in mine:
        job_store.create_job(job, None)
    first, cursor = job_store.list_jobs(user, 2, None)
    assert cursor is not None
    assert decode_job_cursor(cursor) == first[-1].job_id == mine[1].job_id
    assert cursor == encode_job_cursor(mine[1].job_id)
    assert job_store.list_jobs(user, 2, cursor) == ([mine[2]], None)


def test_list_jobs_continues_after_the_cursors_job_id_even_if_that_job_is_gone(job_store: Stores) -> None:
    # Paging is by job_id > the cursor's id: a job that disappeared between two pages loses no other one
    user = f"user-{uuid.uuid4().hex[:6]}"
    jobs = [make_job(user, job_id=job_id) for job_id in ("job-a", "job-c", "job-e")]
    for job in jobs:
        job_store.create_job(job, None)
    assert job_store.list_jobs(user, 10, encode_job_cursor("job-b")) == (jobs[1:], None)
    assert job_store.list_jobs(user, 1, encode_job_cursor("job-b")) == (
        [jobs[1]], encode_job_cursor("job-c")
    )
    assert job_store.list_jobs(user, 10, encode_job_cursor("job-e")) == ([], None)


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage", "AAAA", "AAAAAAAAAAAAAAAAAAAAAAAAAAA=", "!!!", "zzzz-not-a-job-id", "j1:job-a", b64(b"j1:"),
        b64(b"j2:job-a"), b64(b"job-a"), b64(b"j1:\xff\xfe"), "\u00e9t\u00e9",
    ],
    ids=[
        "word", "zero-bytes", "long-zero-bytes", "punctuation", "looks-like-an-id", "not-encoded", "empty-job-id",
        "other-version", "no-prefix", "not-utf8", "not-ascii",
    ],
)
def test_list_jobs_rejects_a_cursor_it_did_not_make(job_store_own_session: Stores, cursor: str) -> None:
    # A garbage cursor is the caller's mistake (422 naming "cursor"), never a 5xx, never a broken session
    store = job_store_own_session
    user = f"user-{uuid.uuid4().hex[:6]}"
    job = make_job(user)
    store.create_job(job, None)
    with_garbage = outcome_of(lambda: store.list_jobs(user, 2, cursor))
    afterwards = outcome_of(lambda: store.list_jobs(user, 2, None))  # the store must still work
    assert (with_garbage, afterwards) == ("InvalidField(cursor)", "answered")


def outcome_of(call: Callable[[], object]) -> str:
    """What a call did, as a short comparable string (so that a failure shows what happened instead)."""
    try:
        call()
    except InvalidField as exc:
        return f"InvalidField({exc.field})"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "answered"


# -- idempotency keys ---------------------------------------------------------------------------------


def test_first_claim_of_an_idempotency_key_wins(job_store: Stores) -> None:
    user = f"user-{uuid.uuid4().hex[:6]}"
    key = f"key-{uuid.uuid4().hex}"
    first = IdempotencyClaim(user, key, "job-1", "fp-1", NOW)
    assert job_store.claim_idempotency_key(first) == first
    # a second claim (a retried or a different request) gets the winner's job, fingerprint and instant
    later = NOW + timedelta(seconds=7)
    assert job_store.claim_idempotency_key(IdempotencyClaim(user, key, "job-2", "fp-2", later)) == first
    assert job_store.claim_idempotency_key(IdempotencyClaim(user, key, "job-1", "fp-1", later)) == first


def test_an_idempotency_keys_binding_is_read_as_claimed(job_store: Stores) -> None:
    user = f"user-{uuid.uuid4().hex[:6]}"
    key = f"key-{uuid.uuid4().hex}"
    assert job_store.idempotency_key(user, key) is None
    first = IdempotencyClaim(user, key, "job-1", "fp-1", NOW)
    job_store.claim_idempotency_key(first)
    job_store.claim_idempotency_key(IdempotencyClaim(user, key, "job-2", "fp-2", NOW + timedelta(seconds=7)))
    assert job_store.idempotency_key(user, key) == first
    assert job_store.idempotency_key(f"other-{user}", key) is None


def test_idempotency_keys_are_per_tenant(job_store: Stores) -> None:
    key = f"key-{uuid.uuid4().hex}"
    alice, bob = (f"{name}-{uuid.uuid4().hex[:6]}" for name in ("alice", "bob"))
    for claim in (IdempotencyClaim(alice, key, "job-a", "fp", NOW), IdempotencyClaim(bob, key, "job-b", "fp", NOW),
                  IdempotencyClaim(alice, key + "-other", "job-c", "fp", NOW)):
        assert job_store.claim_idempotency_key(claim) == claim


# -- records: point read, lookup by execution id, finish -----------------------------------------------


def test_get_record_is_a_point_read_by_fire_attempt_and_execution(job_store: Stores) -> None:
    job = make_job()
    job_store.create_job(job, None)
    records = [make_record(job, BUCKET, attempt) for attempt in (1, 2)]
    records.append(make_record(job, BUCKET + timedelta(minutes=1)))
    for record in records:
        job_store.write_outcomes([Outcome(record, None)])
    first, second, later = (r.execution_id for r in records)
    assert job_store.get_record(job.job_id, BUCKET, 2, second) == records[1]
    assert job_store.get_record(job.job_id, BUCKET + timedelta(minutes=1), 1, later) == records[2]
    assert job_store.get_record(job.job_id, BUCKET, 3, second) is None
    assert job_store.get_record(job.job_id, BUCKET, 1, second) is None  # another execution's id
    assert job_store.get_record(job.job_id, BUCKET + timedelta(seconds=1), 1, first) is None
    assert job_store.get_record(str(uuid.uuid4()), BUCKET, 1, first) is None


def test_get_records_reads_several_records_at_once(job_store: Stores) -> None:
    # Given 23 records of 12 jobs (several batches of the Cassandra store), written in one finish
    jobs = [make_job() for _ in range(12)]
    for job in jobs:
        job_store.create_job(job, None)
    records = [make_record(job, BUCKET + timedelta(minutes=m), 1) for job in jobs for m in range(2)][:23]
    job_store.write_outcomes([Outcome(record, None) for record in records])
    # When they are read by their keys, with a key repeated and keys that name no record
    keys = [(r.job_id, r.scheduled_at, r.attempt, r.execution_id) for r in records]
    missing = [(jobs[0].job_id, BUCKET, 2, records[0].execution_id), (str(uuid.uuid4()), BUCKET, 1, "x")]
    found = job_store.get_records([*keys, keys[0], *missing])
    # Then exactly the records that exist come back, by key
    assert found == dict(zip(keys, records, strict=True))
    assert job_store.get_records([]) == {}


def test_record_by_execution_id(job_store: Stores) -> None:
    job = make_job()
    job_store.create_job(job, None)
    records = [make_record(job, BUCKET + timedelta(minutes=m), attempt) for m in range(3) for attempt in (1, 2)]
    for record in records:
        job_store.write_outcomes([Outcome(record, None)])
    for record in records:
        assert job_store.record_by_execution_id(job.job_id, record.execution_id) == record
    assert job_store.record_by_execution_id(job.job_id, str(uuid.uuid4())) is None
    # only among the newest scan_limit records
    oldest = records[0]
    assert job_store.record_by_execution_id(job.job_id, oldest.execution_id, scan_limit=5) is None
    assert job_store.record_by_execution_id(job.job_id, oldest.execution_id, scan_limit=6) == oldest


def test_write_outcomes_upserts_the_record_and_writes_the_retry(job_store: Stores) -> None:
    # Given a published execution (record RUNNING)
    segment = unique_segment()
    job = make_job(schedule=At(at=BUCKET))
    row = make_row(job, BUCKET, segment=segment)
    job_store.create_job(job, row)
    run_once(job_store, job, row, None)
    # When it fails and a retry is planned
    retry = ScheduledExecution(
        bucket=BUCKET + timedelta(minutes=1), segment=segment, lane=Lane.LATE, due_at=BUCKET + timedelta(seconds=67),
        job_id=job.job_id, execution_id=execution_id_for(job.job_id, BUCKET, 2, Trigger.RETRY), user_id=job.user_id,
        scheduled_at=BUCKET, attempt=2, job_version=job.version, trigger=Trigger.RETRY,
    )
    failed = replace(make_record(job, BUCKET, status=ExecutionStatus.FAILED, error="exit 3"), retry_at=retry.due_at,
                     job_version=row.job_version)
    job_store.write_outcomes([Outcome(failed, retry)])
    # Then the record is replaced, the retry waits in its partition, the job row is untouched and the job
    # shows SCHEDULED
    assert job_store.history_page(job.job_id, 10) == [failed]
    assert job_store.get_record(job.job_id, BUCKET, 1, failed.execution_id) == failed
    assert list(job_store.lane_rows(retry.bucket, segment, Lane.LATE)) == [retry]
    assert job_store.get_job(job.user_id, job.job_id) == job
    run = shown(job_store, job)
    assert (run.last_status, run.last_execution_id) == (ExecutionStatus.SCHEDULED, row.execution_id)
    job_store.write_outcomes([Outcome(failed, retry)])  # replaying is harmless
    assert list(job_store.lane_rows(retry.bucket, segment, Lane.LATE)) == [retry]


def test_a_result_for_an_older_run_leaves_the_last_run(job_store: Stores) -> None:
    job = make_job()
    rows = [make_row(job, BUCKET + timedelta(minutes=m), segment=unique_segment()) for m in (0, 1)]
    job_store.create_job(job, rows[0])
    run_once(job_store, job, rows[0], rows[1])
    run_once(job_store, job, rows[1], None)
    before = shown(job_store, job)
    succeeded = replace(make_record(job, BUCKET, status=ExecutionStatus.SUCCESS), job_version=rows[0].job_version,
                        next_fire_at=rows[1].scheduled_at)
    job_store.write_outcomes([Outcome(succeeded, None)])  # the first run's result comes in after the second started
    assert shown(job_store, job) == before
    assert (before.last_execution_id, before.last_status) == (rows[1].execution_id, ExecutionStatus.RUNNING)
    assert job_store.get_record(job.job_id, BUCKET, 1, succeeded.execution_id) == succeeded


def test_write_outcomes_writes_nothing_to_the_job(job_store: Stores) -> None:
    job = make_job()
    row = make_row(job, BUCKET, segment=unique_segment())
    job_store.create_job(job, row)
    run_once(job_store, job, row, None)
    before = shown(job_store, job)
    job_store.write_outcomes([Outcome(make_record(job, BUCKET, status=ExecutionStatus.SUCCESS), None)])
    assert job_store.get_job(job.user_id, job.job_id) == job
    assert shown(job_store, job) == before.with_changes(last_status=ExecutionStatus.SUCCESS)


# -- history paging -------------------------------------------------------------------------------------


def newest_first(records: list[ExecutionRecord]) -> list[ExecutionRecord]:
    """History order: newest fire, highest attempt, then execution_id ascending."""
    by_id = sorted(records, key=lambda r: r.execution_id)
    return sorted(by_id, key=lambda r: (r.scheduled_at, r.attempt), reverse=True)


def cursor_of(record: ExecutionRecord) -> tuple[datetime, int, str | None]:
    return (record.scheduled_at, record.attempt, record.execution_id)


def history_pages(store: Stores, job_id: str, limit: int) -> list[list[ExecutionRecord]]:
    """Page as the API does: the next cursor is the last record of a full page; a short page is the end."""
    pages: list[list[ExecutionRecord]] = []
    before: tuple[datetime, int, str | None] | None = None
    while True:
        page = store.history_page(job_id, limit, before)
        pages.append(page)
        assert len(pages) < 100, "the pages never end"
        if len(page) < limit:
            return pages
        before = cursor_of(page[-1])


def test_history_page_before_returns_only_older_records(job_store: Stores) -> None:
    job = make_job()
    job_store.create_job(job, None)
    records = [make_record(job, BUCKET + timedelta(minutes=m)) for m in range(5)]
    for record in records:
        job_store.write_outcomes([Outcome(record, None)])
    assert job_store.history_page(job.job_id, 2, cursor_of(records[3])) == [records[2], records[1]]
    assert job_store.history_page(job.job_id, 10, cursor_of(records[0])) == []
    assert job_store.history_page(job.job_id, 10, (BUCKET + timedelta(hours=1), 1, None)) == newest_first(records)


def test_history_page_pages_of_single_attempts(job_store: Stores) -> None:
    job = make_job()
    job_store.create_job(job, None)
    records = [make_record(job, BUCKET + timedelta(minutes=m)) for m in range(7)]
    for record in records:
        job_store.write_outcomes([Outcome(record, None)])
    pages = history_pages(job_store, job.job_id, 3)
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [r for page in pages for r in page] == newest_first(records)


def test_history_page_before_reads_the_rest_of_the_cursors_fire_then_older_fires(job_store: Stores) -> None:
    # Given fires at 10:05 (attempts 1-3), 10:06 (attempts 1-3) and 10:07 (attempt 1)
    job = make_job()
    job_store.create_job(job, None)
    t0, t1, t2 = (BUCKET + timedelta(minutes=m) for m in range(3))
    by_key = {
        (t, attempt): make_record(job, t, attempt)
        for t, attempts in ((t0, 3), (t1, 3), (t2, 1))
        for attempt in range(1, attempts + 1)
    }
    for record in by_key.values():
        job_store.write_outcomes([Outcome(record, None)])

    def keys(limit: int, before: tuple[datetime, int]) -> list[tuple[datetime, int]]:
        """After every record of the fire and attempt ``before`` (no execution id: an older API's cursor)."""
        return [(r.scheduled_at, r.attempt) for r in job_store.history_page(job.job_id, limit, (*before, None))]

    # a page filled by the lower attempts of the cursor's own fire
    assert keys(2, (t1, 3)) == [(t1, 2), (t1, 1)]
    # the rest of the cursor's fire, then the older fire, newest attempt first
    assert keys(3, (t1, 2)) == [(t1, 1), (t0, 3), (t0, 2)]
    # nothing left of the cursor's fire: the older fire only, and never a newer one
    assert keys(10, (t1, 1)) == [(t0, 3), (t0, 2), (t0, 1)]
    # a cursor attempt above any stored one: the whole fire, then older ones
    assert keys(10, (t1, 7)) == [(t1, 3), (t1, 2), (t1, 1), (t0, 3), (t0, 2), (t0, 1)]
    # a cursor between fires
    assert keys(10, (t1 + timedelta(seconds=30), 1)) == [(t1, 3), (t1, 2), (t1, 1), (t0, 3), (t0, 2), (t0, 1)]
    # and the records are whole
    assert job_store.history_page(job.job_id, 1, cursor_of(by_key[(t1, 2)])) == [by_key[(t1, 1)]]


@pytest.mark.parametrize("limit", [1, 2, 3, 4])
def test_history_page_pages_through_retried_executions(job_store: Stores, limit: int) -> None:
    # Given fires each retried up to three times: several records share one scheduled_at
    job = make_job()
    job_store.create_job(job, None)
    records = [
        make_record(job, BUCKET + timedelta(minutes=m), attempt)
        for m, attempts in enumerate((3, 1, 2, 3))
        for attempt in range(1, attempts + 1)
    ]
    for record in records:
        job_store.write_outcomes([Outcome(record, None)])
    # When every page is read, each starting after the last record of the one before
    pages = history_pages(job_store, job.job_id, limit)
    # Then every record comes exactly once, newest first, and only the last page is short
    assert [r for page in pages for r in page] == newest_first(records)
    assert all(len(page) == limit for page in pages[:-1])


# -- two executions of one fire and attempt (a run now at the instant of a scheduled fire) ----------------


def test_two_executions_of_one_fire_and_attempt_keep_a_record_each(job_store: Stores) -> None:
    # Given a scheduled fire and a run now of one job at the same instant: same scheduled_at, same attempt
    job = make_job()
    job_store.create_job(job, None)
    fire, manual = (make_record(job, BUCKET, status=ExecutionStatus.RUNNING, trigger=trigger)
                    for trigger in (Trigger.SCHEDULE, Trigger.MANUAL))
    # When the scan records both publishes
    job_store.write_started([fire])
    job_store.write_started([manual])
    # Then the history holds both, each found by its whole key and by its execution id
    assert job_store.history_page(job.job_id, 10) == newest_first([fire, manual])
    for record in (fire, manual):
        assert job_store.get_record(job.job_id, BUCKET, 1, record.execution_id) == record
        assert job_store.record_by_execution_id(job.job_id, record.execution_id) == record
    # When each one's result is written on its own
    failed = replace(manual, status=ExecutionStatus.FAILED, finished_at=BUCKET + timedelta(seconds=2), error="x")
    job_store.write_outcomes([Outcome(failed, None)])
    assert job_store.get_record(job.job_id, BUCKET, 1, fire.execution_id) == fire  # still RUNNING
    succeeded = replace(fire, status=ExecutionStatus.SUCCESS, finished_at=BUCKET + timedelta(seconds=3))
    job_store.write_outcomes([Outcome(succeeded, None)])
    # Then each record holds its own end
    assert job_store.get_record(job.job_id, BUCKET, 1, manual.execution_id) == failed
    assert job_store.get_record(job.job_id, BUCKET, 1, fire.execution_id) == succeeded
    assert job_store.history_page(job.job_id, 10) == newest_first([succeeded, failed])


@pytest.mark.parametrize("limit", [1, 2, 3, 4])
def test_history_page_pages_through_executions_sharing_a_fire_and_attempt(job_store: Stores, limit: int) -> None:
    # Given fires where a run now at the same instant doubled every attempt (the first one's retries too),
    # beside a fire of its own
    job = make_job()
    job_store.create_job(job, None)

    def lineage(at: datetime, origin: Trigger, attempts: int) -> list[ExecutionRecord]:
        """The first attempt and the retries of one execution (each retry under an id of its own lineage)."""
        first = make_record(job, at, trigger=origin)
        return [first] + [replace(make_record(job, at, attempt, trigger=Trigger.RETRY),
                                  execution_id=f"{first.execution_id}-retry-{attempt}")
                          for attempt in range(2, attempts + 1)]

    t0, t1, t2 = (BUCKET + timedelta(minutes=m) for m in range(3))
    records = [*lineage(t0, Trigger.SCHEDULE, 2), *lineage(t0, Trigger.MANUAL, 2), *lineage(t1, Trigger.SCHEDULE, 1),
               *lineage(t2, Trigger.SCHEDULE, 1), *lineage(t2, Trigger.MANUAL, 1)]
    assert len({r.execution_id for r in records}) == len(records) == 7
    for record in records:
        job_store.write_outcomes([Outcome(record, None)])
    # When every page is read, each starting after the last record of the one before
    pages = history_pages(job_store, job.job_id, limit)
    # Then every record comes exactly once, in history order, and only the last page is short
    assert [r for page in pages for r in page] == newest_first(records)
    assert all(len(page) == limit for page in pages[:-1])
