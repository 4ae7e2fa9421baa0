"""The job use cases' change log: kept in a ``ChangeLog``, or, turned off, nothing kept and nothing read."""

from __future__ import annotations

from datetime import UTC, datetime

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.stores.changes import MemoryChangeLog
from jobrunner.domain.jobs import Job
from jobrunner.domain.schedules import At
from jobrunner.domain.spec import JobSpec
from jobrunner.services.jobs import KeptChangeLog, NoChangeLog

NOW = datetime(2026, 11, 22, 10, 0, 10, tzinfo=UTC)
JOB = Job(user_id="alice", job_id="job-1", spec=JobSpec(schedule=At(NOW), payload={}, topic="jobs"), created_at=NOW,
          updated_at=NOW)


def test_a_log_turned_off_keeps_nothing_and_is_never_read_to_its_end() -> None:
    # The ledger then notes that earlier changes are not taken into account, as it did with no log at all
    log = NoChangeLog()
    log.record(JOB, "submit", None, {})
    log.record_many([(JOB, "pause", {})], "ops")
    assert log.page("job-1", 50) == []
    assert log.whole("job-1") == ([], False)


def test_a_kept_log_records_each_change_by_its_actor_and_is_read_whole() -> None:
    log = KeptChangeLog(MemoryChangeLog(), ManualClock(NOW))
    log.record(JOB, "submit", None, {"schedule": {}})
    log.record_many([(JOB, "pause", {})], "ops")
    entries, complete = log.whole("job-1")
    assert complete
    assert sorted((entry.action, entry.actor) for entry in entries) == [("pause", "ops"), ("submit", "alice")]
    assert [entry.action for entry in log.page("job-1", 1)] in (["pause"], ["submit"])
