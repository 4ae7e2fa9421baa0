"""The scan's pure rules for a due row: is it still wanted, the fire after it, the record of publishing it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from jobrunner.domain.jobs import ExecutionStatus, Job, JobState, ScheduledExecution, Trigger
from jobrunner.domain.placement import plan_execution
from jobrunner.domain.publication import next_fire, planned_ahead, publishable, row_identity, started_record
from jobrunner.domain.schedules import At, Every
from jobrunner.domain.spec import JobSpec

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
FIRE = T0 + timedelta(minutes=5)


def every_minute(**changes: object) -> Job:
    job = Job(user_id="alice", job_id="job-1",
              spec=JobSpec(schedule=Every(timedelta(minutes=1), start=T0), payload={}, topic="jobs"), created_at=T0,
              updated_at=T0)
    return job.with_changes(**changes)


def fire_of(job: Job, at: datetime = FIRE, trigger: Trigger = Trigger.SCHEDULE) -> ScheduledExecution:
    return plan_execution(job, at, T0, 16, trigger=trigger)


def test_a_fire_of_the_current_schedule_is_publishable() -> None:
    job = every_minute()
    assert publishable(fire_of(job), job)


@pytest.mark.parametrize("state", [JobState.PAUSED, JobState.DELETED, JobState.CANCELLED])
def test_a_stopped_job_wants_no_fire_of_its_schedule(state: JobState) -> None:
    job = every_minute()
    assert not publishable(fire_of(job), replace(job, state=state))


@pytest.mark.parametrize("state", [JobState.PAUSED, JobState.DELETED])
def test_a_run_now_goes_on_while_paused_or_deleted_but_not_once_cancelled(state: JobState) -> None:
    job = every_minute()
    run_now = fire_of(job, trigger=Trigger.MANUAL)
    assert publishable(run_now, replace(job, state=state))
    assert not publishable(run_now, replace(job, state=JobState.CANCELLED))


def test_a_fire_of_an_older_schedule_version_or_off_the_schedule_is_not_wanted() -> None:
    job = every_minute()
    assert not publishable(fire_of(job), replace(job, version=2, schedule_version=2))
    assert not publishable(fire_of(job, at=FIRE + timedelta(seconds=7)), job)


def test_a_fire_of_the_current_version_before_the_first_its_change_planned_is_not_wanted() -> None:
    # A resume with catch-up that lost its compare-and-set to a plain resume left a row of a fire of the pause
    # under the version the plain resume took: it is not the job's (the winner planned from FIRE on).
    job = every_minute(schedule_from=FIRE)
    assert not publishable(fire_of(job, at=FIRE - timedelta(minutes=1)), job)
    assert not publishable(fire_of(job, at=FIRE - timedelta(minutes=3)), job)
    assert publishable(fire_of(job, at=FIRE), job)
    assert publishable(fire_of(job, at=FIRE + timedelta(minutes=2)), job)
    # runs now, backfills and retries of the same fires are not the schedule's chain: they go on
    assert publishable(fire_of(job, at=FIRE - timedelta(minutes=1), trigger=Trigger.BACKFILL), job)
    # a job whose first planned fire is not known checks nothing
    assert publishable(fire_of(job, at=FIRE - timedelta(minutes=1)), replace(job, schedule_from=None))


def test_a_fire_planned_under_a_version_the_job_has_not_reached_is_ahead() -> None:
    job = every_minute()
    row = replace(fire_of(job), job_version=2)
    assert planned_ahead(row, job)
    assert not planned_ahead(row, replace(job, version=2))
    assert not planned_ahead(replace(row, trigger=Trigger.MANUAL), job)


def test_the_next_fire_follows_the_fire_published_not_the_clock() -> None:
    job = every_minute()
    assert next_fire(fire_of(job), job) == FIRE + timedelta(minutes=1)
    assert next_fire(fire_of(job, trigger=Trigger.MANUAL), job) is None
    once = job.with_changes(schedule=At(FIRE))
    assert next_fire(fire_of(once), once) is None


def test_the_started_record_carries_what_the_jobs_run_fields_derive_from() -> None:
    job = every_minute()
    row = fire_of(job)
    record = started_record(row, job, FIRE)
    assert (record.status, record.published_at, record.execution_id) == (ExecutionStatus.RUNNING, FIRE,
                                                                           row.execution_id)
    assert (record.job_version, record.next_fire_at) == (row.job_version, FIRE + timedelta(minutes=1))


def test_a_rows_identity_is_its_whole_key() -> None:
    job = every_minute()
    row = fire_of(job)
    assert row_identity(row) == row_identity(replace(row, attempt=row.attempt))
    assert row_identity(row) != row_identity(replace(row, job_version=2))
