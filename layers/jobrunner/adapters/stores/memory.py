"""The store ports in memory, for fast unit tests of the services (never a stand-in for integration tests)."""

from __future__ import annotations

import json
import threading
from dataclasses import fields, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from jobrunner.adapters.stores.cursors import decode_job_cursor, encode_job_cursor
from jobrunner.domain.expiry import row_expires_at
from jobrunner.domain.jobs import ExecutionRecord, ExecutionStatus, Job, Lane, LanePosition, ScheduledExecution
from jobrunner.domain.limits import Limits
from jobrunner.ports import (
    Completion,
    HistoryStore,
    IdempotencyClaim,
    IdempotencyStore,
    JobStore,
    Outcome,
    ScheduledRowStore,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from jobrunner.ports import Clock, RecordKey

_RowKey = tuple[datetime, int, Lane, datetime, str, str, int]
#: A history record's key: (job_id, scheduled_at, attempt, execution_id), as in ``task_history_v2``.
_RecordKey = tuple[str, datetime, int, str]
_ENDED = (ExecutionStatus.SUCCESS, ExecutionStatus.FAILED, ExecutionStatus.SKIPPED)


def _row_key(row: ScheduledExecution) -> _RowKey:
    return (row.bucket, row.segment, row.lane, row.due_at, row.job_id, row.execution_id, row.job_version)


def _record_key(record: ExecutionRecord) -> _RecordKey:
    return (record.job_id, record.scheduled_at, record.attempt, record.execution_id)


def _upsert(known: ExecutionRecord | None, record: ExecutionRecord) -> ExecutionRecord:
    """``record`` written over ``known`` as a Cassandra insert does: a column given no value keeps its own."""
    if known is None:
        return record
    kept = {f.name: getattr(known, f.name) for f in fields(record) if getattr(record, f.name) is None}
    return replace(record, **kept)


def _after(record: ExecutionRecord, before: tuple[datetime, int, str | None]) -> bool:
    """Whether ``record`` comes after the cursor ``before`` in history order (see ``HistoryStore.history_page``)."""
    at, attempt, execution_id = before
    if (record.scheduled_at, record.attempt) != (at, attempt):
        return (record.scheduled_at, record.attempt) < (at, attempt)
    return execution_id is not None and record.execution_id > execution_id


class MemoryJobStore(JobStore, ScheduledRowStore, HistoryStore, IdempotencyStore):
    """The four store ports in one class, as ``CassandraJobStore`` has them: the writes that span two tables (a
    job and its first run, a record and its retry) take the one lock over both, and the tests read the tables
    (``jobs``, ``rows``, ``records``) from one object.

    Given a ``clock``, a one-time job's row expires as in Cassandra (``JobStore``, "expiry"): each write of it
    keeps the instant ``domain.expiry.row_expires_at`` gives for the job as written (with ``history_ttl_s``, the
    tenant's history retention), and from that instant of the clock the job is gone, as if it had never been (a
    retired job's, ``ttl_s`` after its retire). Without one (or with ``one_time_rows_expire`` False) nothing
    expires."""

    def __init__(self, clock: Clock | None = None, *,
                 history_ttl_s: Callable[[str], int] = lambda _tenant: Limits().history_ttl_s,
                 one_time_rows_expire: bool = True) -> None:
        self._lock = threading.RLock()
        self._clock = clock if one_time_rows_expire else None
        self._history_ttl_s = history_ttl_s
        self.jobs: dict[tuple[str, str], Job] = {}
        #: When each expiring job's row goes (absent: never).
        self.expires: dict[tuple[str, str], datetime] = {}
        self.rows: dict[_RowKey, ScheduledExecution] = {}
        self.records: dict[_RecordKey, ExecutionRecord] = {}
        self.idempotency: dict[tuple[str, str], IdempotencyClaim] = {}

    def create_job(self, job: Job, first: ScheduledExecution | None) -> None:
        self._create([(job, first)])

    def create_jobs(self, jobs: Sequence[tuple[Job, ScheduledExecution | None]]) -> None:
        self._create(jobs)

    def _create(self, jobs: Sequence[tuple[Job, ScheduledExecution | None]]) -> None:
        with self._lock:
            for job, first in jobs:
                self._put(replace(job, schedule_from=job.next_run_at))
                if first is not None:
                    self.rows[_row_key(first)] = first

    def _put(self, job: Job, expires_at: datetime | None = None) -> None:
        """Store ``job`` with the instant its row expires: ``expires_at``, or as every write of it sets it."""
        key = (job.user_id, job.job_id)
        self.jobs[key] = job
        if expires_at is None and self._clock is not None:
            expires_at = row_expires_at(job, timedelta(seconds=self._history_ttl_s(job.user_id)))
        if expires_at is None:
            self.expires.pop(key, None)
        else:
            self.expires[key] = expires_at

    def _expire(self) -> None:
        """Drop the jobs whose row has expired by the clock (under the lock)."""
        if self._clock is None or not self.expires:
            return
        now = self._clock.now()
        for key in [key for key, at in self.expires.items() if at <= now]:
            del self.expires[key]
            self.jobs.pop(key, None)

    def get_job(self, user_id: str, job_id: str) -> Job | None:
        with self._lock:
            self._expire()
            return self.jobs.get((user_id, job_id))

    def get_job_settled(self, user_id: str, job_id: str) -> Job | None:
        return self.get_job(user_id, job_id)  # (every write here lands whole, at once)

    def get_jobs(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Job]:
        with self._lock:
            self._expire()
            return {k: self.jobs[k] for k in keys if k in self.jobs}

    def lane_rows(
        self, bucket: datetime, segment: int, lane: Lane, after: LanePosition | None = None, *,
        since: datetime | None = None, until: datetime | None = None, stale_ok: bool = False,
    ) -> Iterator[ScheduledExecution]:
        with self._lock:
            keys = sorted(k for k in self.rows if k[:3] == (bucket, segment, lane)
                          and (after is None or LanePosition(*k[3:]) > after)
                          and (since is None or k[3] >= since) and (until is None or k[3] < until))
        for key in keys:  # like a paged read: rows removed meanwhile are not returned
            with self._lock:
                row = self.rows.get(key)
            if row is not None:
                yield row

    def write_started(self, records: Sequence[ExecutionRecord]) -> None:
        with self._lock:
            for record in records:
                key = _record_key(record)
                known = self.records.get(key)
                if known is not None and known.status in _ENDED:  # never backwards: the end stays
                    record = replace(record, status=known.status, finished_at=known.finished_at, error=known.error)
                self.records[key] = _upsert(known, record)

    def settle_published(self, completions: Sequence[Completion]) -> None:
        with self._lock:
            for c in completions:
                for row in (c.following, c.watchdog):  # (the done row stays: the scan removes a LATE one)
                    if row is not None:
                        self.rows[_row_key(row)] = row

    def delete_scheduled(self, rows: Sequence[ScheduledExecution]) -> None:
        with self._lock:
            for row in rows:
                self.rows.pop(_row_key(row), None)

    def history_page(
        self, job_id: str, limit: int, before: tuple[datetime, int, str | None] | None = None
    ) -> list[ExecutionRecord]:
        with self._lock:
            mine = [r for (j, *_), r in self.records.items() if j == job_id]
        # history order, the key's: newest fire, highest attempt, then execution_id ascending (stable sorts)
        mine.sort(key=lambda r: r.execution_id)
        mine.sort(key=lambda r: (r.scheduled_at, r.attempt), reverse=True)
        if before is not None:
            mine = [r for r in mine if _after(r, before)]
        return mine[:limit]

    def update_job(self, job: Job, rows: Sequence[ScheduledExecution], expected_version: int, *,
                   was_one_time: bool = False) -> bool:
        with self._lock:
            for row in rows:
                self.rows[_row_key(row)] = row
        with self._lock:  # a separate step, as in Cassandra: a scan may read the rows in between
            self._expire()  # an expired job is no job: the compare-and-set finds nothing
            current = self.jobs.get((job.user_id, job.job_id))
            if current is None or current.version != expected_version:
                return False  # the rows stay: the winner may have written the same ones (``JobStore.update_job``)
            # as stored: the API's fields only (run fields are derived from history); the next run stays
            # as it was written unless the schedule changes
            keeps_schedule = job.schedule_version != job.version
            self._put(replace(
                job, created_at=current.created_at, created_by=current.created_by, last_run_at=None,
                last_execution_id=None, last_status=None,
                next_run_at=current.next_run_at if keeps_schedule else job.next_run_at,
                schedule_from=current.schedule_from if keeps_schedule else job.next_run_at,
            ))
            return True

    def write_scheduled(self, rows: Sequence[ScheduledExecution]) -> None:
        with self._lock:
            for row in rows:
                self.rows[_row_key(row)] = row

    def list_jobs(self, user_id: str, limit: int, cursor: str | None) -> tuple[list[Job], str | None]:
        with self._lock:
            self._expire()
            mine = sorted((j for (u, _), j in self.jobs.items() if u == user_id), key=lambda j: j.job_id)
        if cursor is not None:
            after = decode_job_cursor(cursor)
            mine = [j for j in mine if j.job_id > after]
        page = mine[:limit]
        return page, (encode_job_cursor(page[-1].job_id) if len(mine) > limit else None)

    def claim_idempotency_key(self, claim: IdempotencyClaim) -> IdempotencyClaim:
        with self._lock:
            return self.idempotency.setdefault((claim.user_id, claim.key), claim)

    def idempotency_key(self, user_id: str, key: str) -> IdempotencyClaim | None:
        with self._lock:
            return self.idempotency.get((user_id, key))

    def get_record(
        self, job_id: str, scheduled_at: datetime, attempt: int, execution_id: str
    ) -> ExecutionRecord | None:
        with self._lock:
            return self.records.get((job_id, scheduled_at, attempt, execution_id))

    def record_by_execution_id(self, job_id: str, execution_id: str, scan_limit: int = 1000) -> ExecutionRecord | None:
        return next((r for r in self.history_page(job_id, scan_limit) if r.execution_id == execution_id), None)

    def get_records(self, keys: Sequence[RecordKey]) -> dict[RecordKey, ExecutionRecord]:
        with self._lock:
            return {key: self.records[key] for key in keys if key in self.records}

    def write_outcomes(self, outcomes: Sequence[Outcome]) -> None:
        with self._lock:
            for outcome in outcomes:
                record = outcome.record
                self.records[_record_key(record)] = _upsert(self.records.get(_record_key(record)), record)
                if outcome.retry is not None:
                    self.rows[_row_key(outcome.retry)] = outcome.retry

    def latest_records(
        self, job_ids: Sequence[str], limit: int, *, stale_ok: bool = False
    ) -> dict[str, list[ExecutionRecord]]:
        return {job_id: self.history_page(job_id, limit) for job_id in job_ids}

    def walk_jobs(self, after: str | None, limit: int) -> tuple[list[Job], str | None]:
        # In (user_id, job_id) order; the cursor is the last key returned.
        start = tuple(json.loads(after)) if after is not None else None
        with self._lock:
            self._expire()
            keys = sorted(k for k in self.jobs if start is None or k > start)[:limit]
            page = [self.jobs[k] for k in keys]
        return page, (json.dumps(list(keys[-1])) if len(keys) == limit else None)

    def retire_job(self, job: Job, expected_version: int, ttl_s: int) -> bool:
        with self._lock:
            self._expire()
            current = self.jobs.get((job.user_id, job.job_id))
            if current is None or current.version != expected_version:
                return False
            expires_at = self._clock.now() + timedelta(seconds=ttl_s) if self._clock is not None else None
            self._put(replace(job, created_at=current.created_at, last_run_at=None, last_execution_id=None,
                              last_status=None, schedule_from=job.next_run_at), expires_at)
            return True
