"""The ChangeLog contract (jobrunner.ports.ChangeLog), on memory and on Cassandra."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from jobrunner.domain.changes import JobChange

if TYPE_CHECKING:
    from jobrunner.ports import ChangeLog

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)


def entry(job_id: str, seconds: int, action: str = "patch", change_id: str | None = None) -> JobChange:
    return JobChange(job_id=job_id, user_id="alice", changed_at=T0 + timedelta(seconds=seconds),
                     change_id=change_id or str(uuid.uuid4()), actor="arn:aws:iam::1:role/Ops", action=action,
                     version=seconds + 1, details={"fields": ["payload"], "n": seconds})


def test_changes_come_newest_first_page_by_page_without_loss_or_repeat(change_log: ChangeLog) -> None:
    job_id = str(uuid.uuid4())
    # Given 7 entries, two of them at the same instant, and an entry of another job
    entries = [entry(job_id, s) for s in (0, 1, 2, 3, 3, 5, 6)]
    for e in entries:
        change_log.record(e)
    change_log.record(entry(str(uuid.uuid4()), 4))
    # When they are read 3 at a time, each page after the last entry of the one before
    pages, before = [], None
    while True:
        page = change_log.changes(job_id, 3, before)
        pages.append(page)
        if len(page) < 3:
            break
        before = (page[-1].changed_at, page[-1].change_id)
    # Then every entry comes once, newest first, whole
    read = [e for page in pages for e in page]
    expected = sorted(entries, key=lambda e: e.change_id)
    expected.sort(key=lambda e: e.changed_at, reverse=True)
    assert read == expected


def test_recording_an_entry_again_keeps_one(change_log: ChangeLog) -> None:
    job_id = str(uuid.uuid4())
    first = entry(job_id, 0, "submit", change_id="c1")
    change_log.record(first)
    change_log.record(first)
    assert change_log.changes(job_id, 10) == [first]


def test_entries_recorded_together_each_land_with_their_job(change_log: ChangeLog) -> None:
    # Given 14 entries of 3 jobs recorded in one call (several batches of the Cassandra adapter)
    jobs = [str(uuid.uuid4()) for _ in range(3)]
    entries = [entry(jobs[n % 3], n, "submit") for n in range(14)]
    change_log.record_many(entries)
    # Then each job's log holds exactly its entries, newest first
    for job_id in jobs:
        mine = sorted((e for e in entries if e.job_id == job_id), key=lambda e: e.changed_at, reverse=True)
        assert change_log.changes(job_id, 20) == mine
