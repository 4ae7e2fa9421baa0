"""The JobStore contract (jobrunner.ports.JobStore), on memory and on real Cassandra."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from jobrunner.domain.jobs import (
    ExecutionRecord,
    ExecutionStatus,
    Job,
    JobState,
    Lane,
    RetryPolicy,
    ScheduledExecution,
    Trigger,
    execution_id_for,
)
from jobrunner.domain.schedules import At, Every
from jobrunner.ports import Completion, JobStore

NOW = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
BUCKET = datetime(2026, 11, 22, 10, 5, tzinfo=UTC)


def make_job(user: str | None = None, **changes: object) -> Job:
    job = Job(
        user_id=user or f"user-{uuid.uuid4().hex[:6]}", job_id=str(uuid.uuid4()),
        schedule=Every(every=timedelta(minutes=1), start=BUCKET), payload={"n": 1, "nested": [1, "x"]},
        topic="jobs", created_at=NOW, updated_at=NOW, retry=RetryPolicy(max_retries=2), next_run_at=BUCKET,
    )
    return job.with_changes(**changes)


def make_row(job: Job, due: datetime, lane: Lane = Lane.PLANNED, segment: int = 1,
             bucket: datetime = BUCKET, attempt: int = 1) -> ScheduledExecution:
    return ScheduledExecution(
        bucket=bucket, segment=segment, lane=lane, due_at=due, job_id=job.job_id,
        execution_id=execution_id_for(job.job_id, due, attempt, Trigger.SCHEDULE), user_id=job.user_id,
        scheduled_at=due, attempt=attempt, job_version=job.version, trigger=Trigger.SCHEDULE,
    )


def unique_segment() -> int:
    return uuid.uuid4().int % 1_000_000 + 100  # partitions of their own, so tests never see each other


def test_create_then_get_round_trips_every_field(job_store: JobStore) -> None:
    job = make_job(schedule=At(at=BUCKET + timedelta(seconds=7)), state=JobState.PAUSED, version=3)
    job_store.create(job, None)
    assert job_store.get(job.user_id, job.job_id) == job


def test_get_is_scoped_to_the_tenant(job_store: JobStore) -> None:
    job = make_job()
    job_store.create(job, None)
    assert job_store.get("someone-else", job.job_id) is None
    assert job_store.get_many([(job.user_id, job.job_id), ("someone-else", job.job_id)]) == {
        (job.user_id, job.job_id): job
    }


def test_scheduled_streams_one_lane_in_due_order(job_store: JobStore) -> None:
    # Given rows written out of order in both lanes of one partition, and one in another segment
    segment = unique_segment()
    job = make_job()
    dues = [BUCKET + timedelta(seconds=s) for s in (40, 5, 59, 0, 17)]
    for due in dues:
        job_store.create(job, make_row(job, due, segment=segment))
    late = make_row(job, BUCKET + timedelta(seconds=30), lane=Lane.LATE, segment=segment)
    job_store.create(job, late)
    job_store.create(job, make_row(job, BUCKET, segment=segment + 1))
    # When each lane is read (the Cassandra store pages 3 rows at a time here)
    planned = list(job_store.scheduled(BUCKET, segment, Lane.PLANNED))
    # Then each lane holds exactly its rows, in due order
    assert [r.due_at for r in planned] == sorted(dues)
    assert list(job_store.scheduled(BUCKET, segment, Lane.LATE)) == [late]
    assert planned[0] == make_row(job, BUCKET, segment=segment)


def test_complete_records_history_plans_the_next_run_and_removes_the_row(job_store: JobStore) -> None:
    segment = unique_segment()
    job = make_job()
    row = make_row(job, BUCKET + timedelta(seconds=10), segment=segment)
    job_store.create(job, row)
    following = make_row(job, BUCKET + timedelta(seconds=70), segment=segment, bucket=BUCKET + timedelta(minutes=1))
    published = BUCKET + timedelta(seconds=10, milliseconds=12)
    record = ExecutionRecord(
        job_id=job.job_id, scheduled_at=row.scheduled_at, attempt=1, execution_id=row.execution_id,
        user_id=job.user_id, status=ExecutionStatus.RUNNING, trigger=Trigger.SCHEDULE, due_at=row.due_at,
        published_at=published,
    )
    completion = Completion(done=row, record=record, following=following, next_run_at=following.due_at)
    job_store.complete([completion])
    job_store.complete([completion])  # replaying is harmless

    assert list(job_store.scheduled(BUCKET, segment, Lane.PLANNED)) == []
    assert list(job_store.scheduled(following.bucket, segment, Lane.PLANNED)) == [following]
    assert job_store.history(job.job_id, 10) == [record]
    stored = job_store.get(job.user_id, job.job_id)
    assert stored is not None
    assert (stored.next_run_at, stored.last_run_at, stored.last_execution_id, stored.last_status) == (
        following.due_at, published, row.execution_id, ExecutionStatus.RUNNING
    )
    assert stored.payload == job.payload  # the run fields only


def test_complete_of_a_manual_run_keeps_the_next_run(job_store: JobStore) -> None:
    job = make_job()
    row = make_row(job, BUCKET, segment=unique_segment())
    job_store.create(job, row)
    record = ExecutionRecord(
        job_id=job.job_id, scheduled_at=row.scheduled_at, attempt=1, execution_id=row.execution_id,
        user_id=job.user_id, status=ExecutionStatus.RUNNING, trigger=Trigger.MANUAL, due_at=row.due_at,
        published_at=BUCKET,
    )
    job_store.complete([Completion(done=row, record=record, following=None, next_run_at=None, sets_next_run=False)])
    stored = job_store.get(job.user_id, job.job_id)
    assert stored is not None and stored.next_run_at == job.next_run_at


def test_drop_removes_rows_without_history(job_store: JobStore) -> None:
    segment = unique_segment()
    job = make_job()
    rows = [make_row(job, BUCKET + timedelta(seconds=s), segment=segment) for s in (1, 2)]
    for row in rows:
        job_store.create(job, row)
    job_store.drop(rows[:1])
    assert list(job_store.scheduled(BUCKET, segment, Lane.PLANNED)) == rows[1:]
    assert job_store.history(job.job_id, 10) == []


def test_history_is_newest_first_and_limited(job_store: JobStore) -> None:
    job = make_job()
    job_store.create(job, None)
    completions = []
    for minute in range(4):
        row = make_row(job, BUCKET + timedelta(minutes=minute), segment=unique_segment())
        record = ExecutionRecord(
            job_id=job.job_id, scheduled_at=row.scheduled_at, attempt=1, execution_id=row.execution_id,
            user_id=job.user_id, status=ExecutionStatus.RUNNING, trigger=Trigger.SCHEDULE, due_at=row.due_at,
            published_at=row.due_at,
        )
        completions.append(Completion(done=row, record=record, following=None, next_run_at=None))
    job_store.complete(completions)
    newest = job_store.history(job.job_id, 3)
    assert [r.scheduled_at for r in newest] == [BUCKET + timedelta(minutes=m) for m in (3, 2, 1)]
