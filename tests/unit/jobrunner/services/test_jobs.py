"""JobService: validation, and the job stored together with its first scheduled run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.domain.errors import InvalidField, JobNotFound
from jobrunner.domain.jobs import JobStatus, Lane, Trigger, execution_id_for
from jobrunner.domain.schedules import At, Every
from jobrunner.domain.segments import segment_of
from jobrunner.services.jobs import JobRules, JobService, NewJob

NOW = datetime(2026, 11, 22, 10, 0, 10, tzinfo=UTC)
RULES = JobRules(segment_count=16, allowed_topics=frozenset({"jobs", "reports"}), max_payload_bytes=100)


@pytest.fixture
def store() -> MemoryJobStore:
    return MemoryJobStore()


@pytest.fixture
def service(store: MemoryJobStore) -> JobService:
    return JobService(store, ManualClock(NOW), RULES)


def test_submit_stores_the_job_and_its_first_run(store: MemoryJobStore, service: JobService) -> None:
    # Given a one-time job due well after the tick that dispatches its minute
    due = datetime(2026, 11, 22, 10, 5, 30, tzinfo=UTC)
    # When it is submitted
    job = service.submit("alice", NewJob(At(due), {"n": 1}))[0]
    # Then the job and exactly one row for its first run are stored, in its own bucket's planned lane
    assert store.jobs == {("alice", job.job_id): job}
    [row] = store.rows.values()
    assert (row.bucket, row.segment, row.lane) == (
        datetime(2026, 11, 22, 10, 5, tzinfo=UTC), segment_of(job.job_id, 16), Lane.PLANNED
    )
    assert (row.due_at, row.scheduled_at, row.attempt, row.trigger) == (due, due, 1, Trigger.SCHEDULE)
    assert row.execution_id == execution_id_for(job.job_id, due, 1, Trigger.SCHEDULE)
    assert (row.user_id, row.job_id, row.job_version) == ("alice", job.job_id, job.version)
    assert (job.topic, job.next_run_at, job.status) == ("jobs", due, JobStatus.SCHEDULED)


def test_imminent_job_goes_to_the_late_lane_of_the_bucket_being_scanned(
    store: MemoryJobStore, service: JobService
) -> None:
    job = service.submit("alice", NewJob(At(NOW + timedelta(seconds=20)), {}))[0]
    [row] = store.rows.values()
    assert (row.bucket, row.lane, row.due_at) == (datetime(2026, 11, 22, 10, 0, tzinfo=UTC), Lane.LATE, job.next_run_at)


def test_every_is_stored_anchored_one_interval_after_submission(store: MemoryJobStore, service: JobService) -> None:
    job = service.submit("alice", NewJob(Every(timedelta(hours=1)), {}))[0]
    assert job.schedule == Every(timedelta(hours=1), start=NOW + timedelta(hours=1))
    assert store.jobs[("alice", job.job_id)].schedule == job.schedule
    [row] = store.rows.values()
    assert row.due_at == job.next_run_at == NOW + timedelta(hours=1)


def test_allowed_topic_is_kept(service: JobService) -> None:
    assert service.submit("alice", NewJob(At(NOW + timedelta(hours=1)), {}, topic="reports"))[0].topic == "reports"


def test_payload_at_the_size_limit_is_accepted(service: JobService) -> None:
    payload = "x" * 98  # 100 bytes once serialized with its quotes
    assert service.submit("alice", NewJob(At(NOW + timedelta(hours=1)), payload))[0].payload == payload


def test_at_up_to_five_minutes_in_the_past_runs_at_once(store: MemoryJobStore, service: JobService) -> None:
    service.submit("alice", NewJob(At(NOW - timedelta(minutes=5)), {}))
    [row] = store.rows.values()
    assert (row.bucket, row.lane) == (datetime(2026, 11, 22, 10, 0, tzinfo=UTC), Lane.LATE)


@pytest.mark.parametrize(
    ("new", "field", "reason"),
    [
        (NewJob(At(NOW + timedelta(hours=1)), {}, topic="payroll"), "topic", "allowed"),
        (NewJob(At(NOW + timedelta(hours=1)), "x" * 99), "payload", "101 bytes"),
        (NewJob(At(NOW - timedelta(minutes=5, milliseconds=1)), {}), "schedule.at", "past"),
        (NewJob(Every(timedelta(hours=1), end=NOW + timedelta(minutes=59)), {}), "schedule", "never fires"),
        (
            NewJob(Every(timedelta(minutes=5), start=NOW - timedelta(days=2), end=NOW - timedelta(days=1)), {}),
            "schedule", "never fires",
        ),
    ],
    ids=["topic", "payload", "at-in-past", "every-ends-before-first-fire", "every-ended"],
)
def test_rejected_submission_names_the_field_and_writes_nothing(
    store: MemoryJobStore, service: JobService, new: NewJob, field: str, reason: str
) -> None:
    with pytest.raises(InvalidField, match=reason) as caught:
        service.submit("alice", new)
    assert caught.value.field == field
    assert store.jobs == {} and store.rows == {}


def test_get_returns_own_job_and_hides_other_tenants_jobs(service: JobService) -> None:
    job = service.submit("alice", NewJob(At(NOW + timedelta(hours=1)), {}))[0]
    assert service.get("alice", job.job_id) == job
    with pytest.raises(JobNotFound):
        service.get("mallory", job.job_id)
    with pytest.raises(JobNotFound):
        service.executions("mallory", job.job_id)
