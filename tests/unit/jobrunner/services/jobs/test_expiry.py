"""What a tenant sees of a one-time job's row expiring (``domain.expiry``): the job usable until its instant, then
404 and gone from lists; a pause keeps it; a run now, a backfill and a change move the instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.domain.errors import JobNotFound
from jobrunner.domain.expiry import row_expires_at
from jobrunner.domain.jobs import Job, JobState
from jobrunner.domain.limits import DEFAULT_HISTORY_DAYS
from jobrunner.domain.schedules import At, Every
from jobrunner.domain.spec import JobSpec, RetryPolicy, SpecChange
from tests.support.memory import memory_container

if TYPE_CHECKING:
    from jobrunner.services.jobs import JobService

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
AT = NOW + timedelta(minutes=10)
HISTORY = timedelta(days=DEFAULT_HISTORY_DAYS)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


def service(clock: ManualClock, **env: str) -> JobService:
    return memory_container(env, clock=clock).jobs


def instant(job: Job) -> datetime:
    expires = row_expires_at(job, HISTORY)
    assert expires is not None
    return expires


def submitted(jobs: JobService) -> Job:
    return jobs.submit("alice", JobSpec(At(AT), {"n": 1}, timeout_s=60, retry=RetryPolicy(max_retries=1)))[0]


def test_a_one_time_job_is_found_until_its_instant_then_404_and_gone_from_the_list(clock: ManualClock) -> None:
    jobs = service(clock)
    job = submitted(jobs)
    clock.set(instant(job) - timedelta(seconds=1))
    assert jobs.get("alice", job.job_id).job_id == job.job_id
    clock.advance(timedelta(seconds=1))
    with pytest.raises(JobNotFound):
        jobs.get("alice", job.job_id)
    assert jobs.list_jobs("alice", 10, None)[0] == []
    with pytest.raises(JobNotFound):  # a change racing the expiry finds no job
        jobs.change("alice", job.job_id, SpecChange(payload={"n": 2}))


def test_a_recurring_job_or_a_stage_that_turns_it_off_keeps_the_row(clock: ManualClock) -> None:
    jobs = service(clock)
    recurring = jobs.submit("alice", JobSpec(Every(timedelta(minutes=1), start=AT), {"n": 1}))[0]
    kept = service(clock, JOBRUNNER_ONE_TIME_ROWS_EXPIRE="false")
    one_time = submitted(kept)
    clock.advance(timedelta(days=3650))
    assert jobs.get("alice", recurring.job_id).job_id == recurring.job_id
    assert kept.get("alice", one_time.job_id).job_id == one_time.job_id


def test_a_paused_one_time_job_is_kept_and_a_cancel_gives_it_an_instant_again(clock: ManualClock) -> None:
    jobs = service(clock)
    job = submitted(jobs)
    jobs.pause("alice", job.job_id)
    clock.set(instant(job) + timedelta(days=1))
    assert jobs.get("alice", job.job_id).state is JobState.PAUSED
    cancelled = jobs.cancel("alice", job.job_id)
    clock.set(instant(cancelled) - timedelta(seconds=1))
    assert jobs.get("alice", job.job_id).state is JobState.CANCELLED
    clock.advance(timedelta(seconds=1))
    with pytest.raises(JobNotFound):
        jobs.get("alice", job.job_id)


def test_a_run_now_moves_the_instant_so_the_run_has_its_job_until_it_ends(clock: ManualClock) -> None:
    # Given a one-time job whose fire went long ago, a day before its row's instant
    jobs = service(clock)
    job = submitted(jobs)
    clock.set(instant(job) - timedelta(days=1))
    # When it is run now
    jobs.run_now("alice", job.job_id)
    # Then its row was written again (a new version, now), and expires as long after the run as after its fire
    ran = jobs.get("alice", job.job_id)
    assert (ran.version, ran.updated_at) == (job.version + 1, clock.now())
    assert instant(ran) - instant(job) == clock.now() - AT
    clock.set(instant(job) + timedelta(days=1))
    assert jobs.get("alice", job.job_id).job_id == job.job_id


def test_a_backfill_of_a_one_time_job_moves_the_instant(clock: ManualClock) -> None:
    jobs = service(clock)
    job = submitted(jobs)
    clock.set(instant(job) - timedelta(days=1))
    assert jobs.backfill("alice", job.job_id, AT, AT).queued == [AT]
    clock.set(instant(job) + timedelta(days=1))
    assert jobs.get("alice", job.job_id).version == job.version + 1


def test_a_run_now_of_a_recurring_job_writes_no_row(clock: ManualClock) -> None:
    jobs = service(clock)
    job = jobs.submit("alice", JobSpec(Every(timedelta(minutes=1), start=AT), {"n": 1}))[0]
    jobs.run_now("alice", job.job_id)
    assert jobs.get("alice", job.job_id).version == job.version


def test_a_patch_of_the_time_moves_the_instant(clock: ManualClock) -> None:
    jobs = service(clock)
    job = submitted(jobs)
    later = AT + timedelta(days=5)
    jobs.change("alice", job.job_id, SpecChange(schedule=At(later)))
    clock.set(instant(job) + timedelta(days=1))
    assert jobs.get("alice", job.job_id).spec.schedule == At(later)
