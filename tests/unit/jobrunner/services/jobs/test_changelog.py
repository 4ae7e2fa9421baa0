"""The job use cases' change log: kept in a ``ChangeLog``, or, turned off, nothing kept and nothing read; a job's
submit entry read off its row while it is at version 1, and written when a change first moves it past 1."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.stores.changes import MemoryChangeLog
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.domain.changes import JobChange, submit_entry
from jobrunner.domain.errors import JobNotFound, Unavailable
from jobrunner.domain.jobs import Job
from jobrunner.domain.schedules import At, Every
from jobrunner.domain.spec import JobSpec, SpecChange
from jobrunner.services.jobs import KeptChangeLog, NoChangeLog
from tests.support.memory import memory_container

if TYPE_CHECKING:
    from collections.abc import Sequence

    from jobrunner.domain.jobs import ScheduledExecution
    from jobrunner.services.jobs import JobService

NOW = datetime(2026, 11, 22, 10, 0, 10, tzinfo=UTC)
JOB = Job(user_id="alice", job_id="job-1", spec=JobSpec(schedule=At(NOW), payload={}, topic="jobs"), created_at=NOW,
          updated_at=NOW, created_by="ops")


def test_a_log_turned_off_keeps_nothing_and_is_never_read_to_its_end() -> None:
    # The ledger then notes that earlier changes are not taken into account, as it did with no log at all
    log = NoChangeLog()
    log.record(JOB, "pause", None, {})
    log.keep_submit(JOB)
    assert log.page("job-1", 50, job=JOB) == []
    assert log.whole("job-1", job=JOB) == ([], False)


def test_a_kept_log_records_each_change_by_its_actor_and_is_read_whole() -> None:
    log = KeptChangeLog(MemoryChangeLog(), ManualClock(NOW + timedelta(seconds=1)))
    moved = JOB.with_changes(version=2)
    log.record(moved, "pause", None, {})
    log.record(moved, "resume", "ops", {})
    entries, complete = log.whole("job-1", job=moved)
    assert complete
    assert sorted((entry.action, entry.actor) for entry in entries) == [("pause", "alice"), ("resume", "ops")]
    assert [entry.action for entry in log.page("job-1", 1, job=moved)] in (["pause"], ["resume"])


def test_the_submit_entry_is_the_rows_own_and_the_same_each_time_it_is_derived() -> None:
    entry = derived(JOB.with_changes(created_at=NOW + timedelta(microseconds=1500)))
    assert (entry.action, entry.version, entry.actor, entry.changed_at) == (
        "submit", 1, "ops", NOW + timedelta(milliseconds=1))  # to the millisecond, as the row stores it
    assert entry.details == {"schedule": JOB.spec.schedule.to_dict()}
    assert entry.change_id == derived(JOB).change_id != derived(JOB.with_changes(job_id="job-2")).change_id
    # only while the row is at version 1, and only if the row was stored with its submitter (else its submit
    # wrote an entry of its own)
    assert submit_entry(JOB.with_changes(version=2)) is None
    assert submit_entry(JOB.with_changes(created_by=None)) is None


def derived(job: Job) -> JobChange:
    entry = submit_entry(job)
    assert entry is not None
    return entry


def test_a_job_at_version_1_reads_with_its_submit_entry_as_its_oldest_without_one_written() -> None:
    # Given a job never changed, run now twice (entries that do not move its version)
    changes = MemoryChangeLog()
    log = KeptChangeLog(changes, ManualClock(NOW + timedelta(seconds=5)))
    log.record(JOB, "run", None, {})
    log.record(JOB, "run", None, {})
    # When its log is read, Then its submit entry ends it, though none is kept
    assert [c.action for c in changes.entries.values()] == ["run", "run"]
    assert [c.action for c in log.whole("job-1", job=JOB)[0]] == ["run", "run", "submit"]
    assert log.page("job-1", 50, job=JOB)[-1] == derived(JOB)
    # and page by page, the last page ends with it, once
    first = log.page("job-1", 2, job=JOB)
    assert [c.action for c in first] == ["run", "run"]
    last = log.page("job-1", 2, (first[-1].changed_at, first[-1].change_id), job=JOB)
    assert last == [derived(JOB)]
    assert log.page("job-1", 2, (last[-1].changed_at, last[-1].change_id), job=JOB) == []
    # and a job read at a later version (or not found) has only what the log holds
    assert log.page("job-1", 50, job=JOB.with_changes(version=2))[-1].action == "run"
    assert [c.action for c in log.page("job-1", 50, job=None)] == ["run", "run"]


def test_a_job_whose_log_has_its_submit_entry_shows_exactly_one() -> None:
    # Given a job stored before its submitter was kept, whose submit wrote its entry (a moment after its creation)
    changes, before = MemoryChangeLog(), JOB.with_changes(created_by=None)
    old = JobChange(job_id="job-1", user_id="alice", changed_at=NOW + timedelta(milliseconds=3), change_id="c-old",
                    actor="ops", action="submit", version=1, details={"schedule": JOB.spec.schedule.to_dict()})
    changes.record(old)
    log = KeptChangeLog(changes, ManualClock(NOW + timedelta(seconds=5)))
    log.record(before, "run", None, {})
    log.keep_submit(before)  # a change about to move it past version 1 writes nothing ahead
    # Then every read shows that one, and no other
    assert log.whole("job-1", job=before)[0] == [*log.page("job-1", 1, job=before), old]
    assert [c.action for c in log.page("job-1", 50, job=before)] == ["run", "submit"]


def test_a_submit_entry_written_ahead_is_the_very_entry_a_read_derives_and_is_read_once() -> None:
    # Given a change that wrote the submit entry ahead, then did not land (the job is still at version 1)
    changes = MemoryChangeLog()
    log = KeptChangeLog(changes, ManualClock(NOW + timedelta(seconds=5)))
    log.keep_submit(JOB)
    log.record(JOB, "run", None, {})
    # Then each read shows it once, in its place
    assert [c.action for c in log.whole("job-1", job=JOB)[0]] == ["run", "submit"]
    assert log.page("job-1", 50, job=JOB) == log.whole("job-1", job=JOB)[0]
    first = log.page("job-1", 1, job=JOB)
    assert log.page("job-1", 1, (first[-1].changed_at, first[-1].change_id), job=JOB) == [derived(JOB)]


def test_keep_submit_writes_the_entry_of_a_job_at_version_1_only_and_loses_it_rather_than_the_change() -> None:
    changes = MemoryChangeLog()
    log = KeptChangeLog(changes, ManualClock(NOW + timedelta(seconds=5)))
    log.keep_submit(JOB.with_changes(version=2))
    assert changes.entries == {}
    log.keep_submit(JOB)
    log.keep_submit(JOB)  # twice: one entry
    assert list(changes.entries.values()) == [derived(JOB)]
    log.keep_submit(JOB.with_changes(created_by=None))  # stored before its submitter was: its submit wrote one
    assert len(changes.entries) == 1

    class Down(MemoryChangeLog):
        def record_many(self, changes: Sequence[JobChange]) -> None:
            raise Unavailable("timeout")

    KeptChangeLog(Down(), ManualClock(NOW)).keep_submit(JOB)  # logged, not raised


# -- the submit entry through the job use cases ---------------------------------------------------------------

OPS = "arn:aws:iam::123456789012:role/Ops"
SETTINGS = {"JOBRUNNER_SEGMENTS": "16"}
EVERY_MINUTE = Every(timedelta(minutes=1), start=datetime(2026, 11, 22, 10, 10, tzinfo=UTC))


class Crash(BaseException):
    """The process dies (nothing after this step runs)."""


class Writes(MemoryChangeLog):
    """A change log that counts the entries written to it."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[JobChange] = []

    def record_many(self, changes: Sequence[JobChange]) -> None:
        self.written += changes
        super().record_many(changes)


def jobs(store: MemoryJobStore, clock: ManualClock, changes: MemoryChangeLog) -> JobService:
    return memory_container(SETTINGS, clock=clock, store=store, changes=changes).jobs


def test_a_submit_writes_no_entry_yet_its_log_shows_the_submit_by_who_asked_when_and_with_what_schedule() -> None:
    # Given a job submitted by a principal, and one by the tenant itself
    changes, clock = Writes(), ManualClock(NOW)
    service = jobs(MemoryJobStore(), clock, changes)
    job = service.submit("alice", JobSpec(EVERY_MINUTE, {"n": 1}), actor=OPS)[0]
    own = service.submit("alice", JobSpec(At(NOW + timedelta(hours=1)), {}), idempotency_key="k1")[0]
    # When its submit is repeated with the same key (nothing new: as before)
    clock.advance(timedelta(seconds=3))
    assert service.submit("alice", JobSpec(At(NOW + timedelta(hours=1)), {}), idempotency_key="k1") == (own, False)
    # Then nothing was written to the log, and each job's log shows its submit
    assert changes.written == []
    [submit] = service.changes("alice", job.job_id)
    assert (submit.action, submit.actor, submit.changed_at, submit.version, submit.details) == (
        "submit", OPS, NOW, 1, {"schedule": job.spec.schedule.to_dict()})
    assert [(c.action, c.actor) for c in service.changes("alice", own.job_id)] == [("submit", "alice")]
    with pytest.raises(JobNotFound):
        service.changes("mallory", job.job_id)


def test_a_change_past_version_1_writes_the_submit_entry_before_its_compare_and_set() -> None:
    # Given a job at version 1, whose store dies in the middle of a change: before its compare-and-set lands
    class Dies(MemoryJobStore):
        landing = False

        def update_job(self, job: Job, rows: Sequence[ScheduledExecution], expected_version: int, *,
                       was_one_time: bool = False) -> bool:
            if self.landing:
                super().update_job(job, rows, expected_version, was_one_time=was_one_time)
            raise Crash

    store, changes, clock = Dies(), Writes(), ManualClock(NOW)
    service = jobs(store, clock, changes)
    job = service.submit("alice", JobSpec(EVERY_MINUTE, {"n": 1}), actor=OPS)[0]
    clock.advance(timedelta(seconds=1))
    new = Every(timedelta(minutes=2), start=datetime(2026, 11, 22, 10, 20, tzinfo=UTC))
    with pytest.raises(Crash):
        service.change("alice", job.job_id, SpecChange(schedule=new), actor="bob")
    # Then the submit entry was written before it, and reads as one entry
    assert [c.action for c in changes.written] == ["submit"]
    assert [c.action for c in service.changes("alice", job.job_id)] == ["submit"]
    # When the change lands but the process dies before it logs it (the row now at version 2)
    store.landing = True
    with pytest.raises(Crash):
        service.change("alice", job.job_id, SpecChange(schedule=new), actor="bob")
    assert store.jobs[("alice", job.job_id)].version == 2
    # Then the submit entry, with its own schedule, is still in the log
    [submit] = service.changes("alice", job.job_id)
    assert (submit.action, submit.actor, submit.version, submit.details) == (
        "submit", OPS, 1, {"schedule": job.spec.schedule.to_dict()})


def test_a_patched_job_logs_its_submit_then_its_patch_each_with_its_schedule() -> None:
    changes, clock = Writes(), ManualClock(NOW)
    service = jobs(MemoryJobStore(), clock, changes)
    job = service.submit("alice", JobSpec(EVERY_MINUTE, {"n": 1}), actor=OPS)[0]
    clock.advance(timedelta(seconds=1))
    new = Every(timedelta(minutes=2), start=datetime(2026, 11, 22, 10, 20, tzinfo=UTC))
    service.change("alice", job.job_id, SpecChange(schedule=new), actor="bob")
    clock.advance(timedelta(seconds=1))
    service.pause("alice", job.job_id)  # past version 1: nothing more is written ahead
    assert [c.action for c in changes.written] == ["submit", "patch", "pause"]
    log = service.changes("alice", job.job_id)
    assert [(c.action, c.actor, c.version) for c in reversed(log)] == [
        ("submit", OPS, 1), ("patch", "bob", 2), ("pause", "alice", 3)]
    assert log[-1].details == {"schedule": job.spec.schedule.to_dict()} and log[-1].changed_at == NOW
    assert log[1].details["schedule"] == new.to_dict()


def test_an_older_job_with_its_own_submit_entry_shows_exactly_one() -> None:
    # Given a job stored before its submitter was kept, whose submit wrote its entry (a moment after the job)
    changes, clock, store = Writes(), ManualClock(NOW), MemoryJobStore()
    service = jobs(store, clock, changes)
    job = service.submit("alice", JobSpec(EVERY_MINUTE, {"n": 1}), actor=OPS)[0]
    store.jobs[("alice", job.job_id)] = replace(store.jobs[("alice", job.job_id)], created_by=None)
    old = JobChange(job_id=job.job_id, user_id="alice", changed_at=NOW + timedelta(milliseconds=4),
                    change_id="c-old", actor=OPS, action="submit", version=1,
                    details={"schedule": job.spec.schedule.to_dict()})
    changes.record(old)
    # When it is run now, then patched
    clock.advance(timedelta(seconds=1))
    service.run_now("alice", job.job_id)
    assert [c.change_id for c in service.changes("alice", job.job_id) if c.action == "submit"] == ["c-old"]
    clock.advance(timedelta(seconds=1))
    service.change("alice", job.job_id, SpecChange(payload={"n": 2}))
    # Then its log holds its own submit entry, once
    assert [c.action for c in service.changes("alice", job.job_id)] == ["patch", "run", "submit"]
    assert service.changes("alice", job.job_id)[-1] == old


@pytest.mark.parametrize("patched", [False, True], ids=["never-changed", "patched"])
def test_the_ledger_reads_the_schedules_a_job_had_as_it_did_when_its_submit_wrote_an_entry(patched: bool) -> None:
    # Given a job every minute from 10:10, patched at 10:12:30 to every 2 minutes from 10:14 (or never changed)
    changes, clock, store = Writes(), ManualClock(NOW), MemoryJobStore()
    service = jobs(store, clock, changes)
    job = service.submit("alice", JobSpec(EVERY_MINUTE, {"n": 1}), actor=OPS)[0]
    if patched:
        clock.set(datetime(2026, 11, 22, 10, 12, 30, tzinfo=UTC))
        service.change("alice", job.job_id, SpecChange(
            schedule=Every(timedelta(minutes=2), start=datetime(2026, 11, 22, 10, 14, tzinfo=UTC))))
    clock.set(datetime(2026, 11, 22, 10, 20, tzinfo=UTC))
    start, end = datetime(2026, 11, 22, 10, 9, tzinfo=UTC), datetime(2026, 11, 22, 10, 19, tzinfo=UTC)
    page = service.fires("alice", job.job_id, start, end)
    # When the same job is read as a submit that wrote its own entry left it (a moment after the job was made)
    for key, entry in list(changes.entries.items()):
        if entry.action == "submit":
            del changes.entries[key]
    changes.record(JobChange(job_id=job.job_id, user_id="alice", changed_at=NOW + timedelta(milliseconds=7),
                             change_id="c-old", actor=OPS, action="submit", version=1,
                             details={"schedule": job.spec.schedule.to_dict()}))
    store.jobs[("alice", job.job_id)] = replace(store.jobs[("alice", job.job_id)], created_by=None)
    # Then its ledger is the same
    assert service.fires("alice", job.job_id, start, end) == page
    assert [f.at.minute for f in page.fires] == ([10, 11, 12, 14, 16, 18] if patched else list(range(10, 20)))
