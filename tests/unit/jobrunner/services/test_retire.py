"""Jobs that asked to be deleted after their last fire (``delete_after_last``): deleted once done, never before,
their history and change log kept for their tenant. Stories on the memory adapters: scans, worker reports."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.quotas.memory import MemoryTenantQuotas
from jobrunner.adapters.stores.calendars import MemoryCalendarStore
from jobrunner.adapters.stores.changes import MemoryChangeLog
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.domain.errors import JobNotFound
from jobrunner.domain.jobs import ExecutionStatus, Job, JobState, Trigger
from jobrunner.domain.schedules import Every
from jobrunner.domain.spec import JobSpec, RetryPolicy, SpecChange
from jobrunner.ports import ScanRequest
from jobrunner.services.results import WorkerReport
from tests.support.memory import memory_container

if TYPE_CHECKING:
    from jobrunner.ports import OutboundMessage

NOW = datetime(2026, 11, 22, 10, 0, 10, tzinfo=UTC)
SETTINGS = {"JOBRUNNER_SEGMENTS": "1", "JOBRUNNER_TENANT_LIMITS": json.dumps({"*": {"jobs_held": 10}})}


def at(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 11, 22, 10, minute, second, tzinfo=UTC)


class World:
    def __init__(self) -> None:
        self.store, self.clock, self.changes = MemoryJobStore(), ManualClock(NOW), MemoryChangeLog()
        self.quotas, self.calendars = MemoryTenantQuotas(), MemoryCalendarStore()
        self.publisher = MemoryPublisher()
        container = memory_container(SETTINGS, clock=self.clock, store=self.store, publisher=self.publisher,
                                     quotas=self.quotas, changes=self.changes, calendars=self.calendars,
                                     jitter=lambda: 0.5)
        self.jobs, self.results, self.scans = container.jobs, container.results, container.scans
        self.calendar_admin = container.calendar_admin

    def submit(self, count: int, **options: Any) -> Job:
        schedule = Every(timedelta(minutes=1), start=at(10), count=count)
        return self.jobs.submit("alice", JobSpec(schedule, {}, delete_after_last=True, **options))[0]

    def scan(self, minute: int) -> list[OutboundMessage]:
        self.clock.set(max(self.clock.now(), at(minute) - timedelta(seconds=30)))
        before = len(self.publisher.sent)
        self.scans.scan(ScanRequest(segment=0, bucket=at(minute)))
        return [m for m in self.publisher.sent[before:] if m.topic == "jobs"]

    def answer(self, message: OutboundMessage, success: bool) -> str:
        value = message.value
        return self.results.apply(WorkerReport(
            execution_id=value["execution_id"], job_id=value["job_id"], success=success,
            scheduled_at=datetime.fromisoformat(value["scheduled_at"].replace("Z", "+00:00")),
            attempt=value["attempt"], result_token=value["result_token"]))

    def exists(self, job: Job) -> bool:
        """Whether the job is still there (not deleted: a deleted one is kept as DELETED until it expires)."""
        stored = self.store.jobs.get(("alice", job.job_id))
        return stored is not None and stored.state is not JobState.DELETED


@pytest.fixture
def world() -> World:
    return World()


def test_a_job_is_deleted_once_its_last_fire_has_reported_and_its_history_stays_readable(world: World) -> None:
    # Given a job of two fires that asked to be deleted after its last one
    job = world.submit(count=2)
    assert world.quotas.standing["alice"].jobs == 1
    [first] = world.scan(10)
    assert world.answer(first, True) == "succeeded" and world.exists(job)  # a fire is left: kept
    [last] = world.scan(11)
    assert world.exists(job)  # published, not reported yet: kept
    # When its last execution reports, Then the job is deleted, and no longer held against the tenant
    assert world.answer(last, True) == "succeeded"
    assert not world.exists(job)
    assert world.quotas.standing["alice"].jobs == 0
    with pytest.raises(JobNotFound):
        world.jobs.get("alice", job.job_id)
    # and its history and change log are still its tenant's to read, and no one else's
    assert [r.status for r in world.jobs.executions("alice", job.job_id)] == [ExecutionStatus.SUCCESS] * 2
    [deleted, submit] = world.jobs.changes("alice", job.job_id)
    assert (deleted.action, deleted.actor) == ("delete", "jobrunner") and "delete_after_last" in deleted.details[
        "reason"]
    # (its submit's entry, which its row at version 1 stood for, written by the delete before it moved the row on)
    assert (submit.action, submit.version, submit.details) == ("submit", 1, {"schedule": job.spec.schedule.to_dict()})
    for read in (world.jobs.executions, world.jobs.changes):
        with pytest.raises(JobNotFound):
            read("mallory", job.job_id)


def test_a_run_now_requested_just_before_the_delete_still_runs(world: World) -> None:
    # Given a job of one fire, published; a run now is requested (its row written) before its result comes
    job = world.submit(count=1)
    [fire] = world.scan(10)
    world.jobs.run_now("alice", job.job_id)
    # When the fire reports, the job is done and deleted (the run now has no record yet: nothing to see)
    world.answer(fire, True)
    assert not world.exists(job)
    # Then the run now, acknowledged before, is still published (found by the model-based test: the delete
    # used to remove the row of the job, and the scan dropped the run now as a cancelled job's)
    sent = world.scan(11)
    assert [m.value["trigger"] for m in sent] == [Trigger.MANUAL.value]
    assert world.answer(sent[0], True) == "succeeded"


def test_a_retry_still_to_come_keeps_the_job_until_it_ends(world: World) -> None:
    job = world.submit(count=1, retry=RetryPolicy(max_retries=1, initial_delay_s=10, multiplier=1, max_delay_s=10))
    [fire] = world.scan(10)
    assert world.answer(fire, False) == "retrying" and world.exists(job)
    [retry] = world.scan(10) or world.scan(11)
    assert retry.value["attempt"] == 2 and world.exists(job)
    # When the retry fails too (no retry left: dead-lettered), Then the job is done, and deleted
    assert world.answer(retry, False) == "dead_lettered"
    assert not world.exists(job)


def test_a_last_fire_the_calendar_excludes_ends_the_job_too(world: World) -> None:
    world.calendar_admin.put(
        "alice", "off", {"exclude": [{"from": "2026-11-22T10:11", "to": "2026-11-22T10:12"}]})
    job = world.submit(count=2, calendar="off")
    [first] = world.scan(10)
    world.answer(first, True)
    assert world.scan(11) == [] and not world.exists(job)  # skipped, nothing running: done


def test_a_job_that_did_not_ask_or_no_longer_asks_is_never_deleted(world: World) -> None:
    plain = world.jobs.submit("alice", JobSpec(Every(timedelta(minutes=1), start=at(10), count=1), {}))[0]
    [message] = world.scan(10)
    world.answer(message, True)
    assert world.exists(plain)
    # a job that asked, then was told otherwise by a PATCH, is kept
    job = world.jobs.submit("alice", JobSpec(Every(timedelta(minutes=1), start=at(13), count=1), {},
                                            delete_after_last=True))[0]
    world.jobs.change("alice", job.job_id, SpecChange(delete_after_last=False))
    [message] = world.scan(13)
    world.answer(message, True)
    assert world.exists(job)
