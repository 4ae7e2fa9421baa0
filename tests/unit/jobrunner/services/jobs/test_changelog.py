"""The job use cases' change log: kept in a ``ChangeLog``, or, turned off, nothing kept and nothing read; a job's
submit entry read off its row while it is at version 1, and written when a change first moves it past 1."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.stores.changes import MemoryChangeLog
from jobrunner.domain.changes import JobChange, submit_entry
from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import Job
from jobrunner.domain.schedules import At
from jobrunner.domain.spec import JobSpec
from jobrunner.services.jobs import KeptChangeLog, NoChangeLog

if TYPE_CHECKING:
    from collections.abc import Sequence

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
    entry = submit_entry(JOB.with_changes(created_at=NOW + timedelta(microseconds=1500)))
    assert (entry.action, entry.version, entry.actor, entry.changed_at) == (
        "submit", 1, "ops", NOW + timedelta(milliseconds=1))  # to the millisecond, as the row stores it
    assert entry.details == {"schedule": JOB.spec.schedule.to_dict()}
    assert entry.change_id == submit_entry(JOB).change_id != submit_entry(JOB.with_changes(job_id="job-2")).change_id
    assert submit_entry(JOB.with_changes(created_by=None)).actor == "alice"  # no principal named: the tenant


def test_a_job_at_version_1_reads_with_its_submit_entry_as_its_oldest_without_one_written() -> None:
    # Given a job never changed, run now twice (entries that do not move its version)
    changes = MemoryChangeLog()
    log = KeptChangeLog(changes, ManualClock(NOW + timedelta(seconds=5)))
    log.record(JOB, "run", None, {})
    log.record(JOB, "run", None, {})
    # When its log is read, Then its submit entry ends it, though none is kept
    assert [c.action for c in changes.entries.values()] == ["run", "run"]
    assert [c.action for c in log.whole("job-1", job=JOB)[0]] == ["run", "run", "submit"]
    assert log.page("job-1", 50, job=JOB)[-1] == submit_entry(JOB)
    # and page by page, the last page ends with it, once
    first = log.page("job-1", 2, job=JOB)
    assert [c.action for c in first] == ["run", "run"]
    last = log.page("job-1", 2, (first[-1].changed_at, first[-1].change_id), job=JOB)
    assert last == [submit_entry(JOB)]
    assert log.page("job-1", 2, (last[-1].changed_at, last[-1].change_id), job=JOB) == []
    # and a job read at a later version (or not found) has only what the log holds
    assert log.page("job-1", 50, job=JOB.with_changes(version=2))[-1].action == "run"
    assert [c.action for c in log.page("job-1", 50, job=None)] == ["run", "run"]


def test_a_job_whose_log_has_its_submit_entry_shows_exactly_one() -> None:
    # Given a job submitted before submits stopped writing an entry (its own id, a moment after its creation)
    changes = MemoryChangeLog()
    old = JobChange(job_id="job-1", user_id="alice", changed_at=NOW + timedelta(milliseconds=3), change_id="c-old",
                    actor="ops", action="submit", version=1, details={"schedule": JOB.spec.schedule.to_dict()})
    changes.record(old)
    log = KeptChangeLog(changes, ManualClock(NOW + timedelta(seconds=5)))
    log.record(JOB, "run", None, {})
    # Then every read shows that one, and no other
    assert log.whole("job-1", job=JOB)[0][-1] == old
    assert [c.action for c in log.whole("job-1", job=JOB)[0]] == ["run", "submit"]
    assert [c.action for c in log.page("job-1", 50, job=JOB)] == ["run", "submit"]
    # also when the old entry was on a page before (an entry older than it on the last one)
    changes.record(JobChange(job_id="job-1", user_id="alice", changed_at=NOW + timedelta(milliseconds=1),
                             change_id="c-run", actor="ops", action="run", version=1, details={}))
    first = log.page("job-1", 2, job=JOB)
    assert [c.action for c in first] == ["run", "submit"]
    assert [c.action for c in log.page("job-1", 2, (first[-1].changed_at, first[-1].change_id), job=JOB)] == ["run"]
    # and a submit entry written ahead by a change that did not land is the very entry a read derives
    again = MemoryChangeLog()
    KeptChangeLog(again, ManualClock(NOW)).keep_submit(JOB)
    assert KeptChangeLog(again, ManualClock(NOW)).page("job-1", 50, job=JOB) == [submit_entry(JOB)]


def test_keep_submit_writes_the_entry_of_a_job_at_version_1_only_and_loses_it_rather_than_the_change() -> None:
    changes = MemoryChangeLog()
    log = KeptChangeLog(changes, ManualClock(NOW + timedelta(seconds=5)))
    log.keep_submit(JOB.with_changes(version=2))
    assert changes.entries == {}
    log.keep_submit(JOB)
    log.keep_submit(JOB)  # twice: one entry
    assert list(changes.entries.values()) == [submit_entry(JOB)]

    class Down(MemoryChangeLog):
        def record_many(self, changes: Sequence[JobChange]) -> None:
            raise Unavailable("timeout")

    KeptChangeLog(Down(), ManualClock(NOW)).keep_submit(JOB)  # logged, not raised
