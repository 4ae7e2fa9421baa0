"""JobStore on Apache Cassandra or Amazon Keyspaces, through the DataStax driver.

Every statement here is Keyspaces-compatible (checked by ``tests/contract/test_cql_compat.py``):
prepared DML only, LOCAL_QUORUM writes and reads, logged batches for the atomic steps, no TRUNCATE,
no secondary index, no ALLOW FILTERING.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any, TypeVar

from cassandra import ConsistencyLevel, DriverException, InvalidRequest
from cassandra.cluster import NoHostAvailable
from cassandra.concurrent import execute_concurrent
from cassandra.query import BatchStatement, BatchType, PreparedStatement

from jobrunner.adapters.stores import codec
from jobrunner.domain.errors import InvalidField, Unavailable
from jobrunner.ports import Completion, JobStore, Outcome

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from datetime import datetime

    from cassandra.cluster import Session

    from jobrunner.domain.jobs import ExecutionRecord, Job, Lane, ScheduledExecution

T = TypeVar("T")

INSERT_JOB = (
    "INSERT INTO job_table (user_id, job_id, schedule, payload, topic, state, version, retry, timeout_s,"
    " created_at, updated_at, next_run_at, last_run_at, last_execution_id, last_status)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
SELECT_JOB = "SELECT * FROM job_table WHERE user_id = ? AND job_id = ?"
UPDATE_JOB_RUN = (
    "UPDATE job_table SET last_run_at = ?, last_execution_id = ?, last_status = ?"
    " WHERE user_id = ? AND job_id = ?"
)
UPDATE_JOB_RUN_AND_NEXT = (
    "UPDATE job_table SET last_run_at = ?, last_execution_id = ?, last_status = ?, next_run_at = ?"
    " WHERE user_id = ? AND job_id = ?"
)
INSERT_SCHEDULED = (
    "INSERT INTO task_schedule (next_execution_time, segment, lane, due_at, job_id, execution_id, user_id,"
    " scheduled_at, attempt, job_version, trigger) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
SELECT_SCHEDULED = (
    "SELECT * FROM task_schedule WHERE next_execution_time = ? AND segment = ? AND lane = ?"
)
DELETE_SCHEDULED = (
    "DELETE FROM task_schedule WHERE next_execution_time = ? AND segment = ? AND lane = ? AND due_at = ?"
    " AND job_id = ? AND execution_id = ?"
)
INSERT_RECORD = (
    "INSERT INTO task_history (job_id, execution_time, attempt, execution_id, user_id, status, trigger,"
    " due_at, published_at, finished_at, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
SELECT_RECORDS = "SELECT * FROM task_history WHERE job_id = ? LIMIT ?"
SELECT_RECORDS_UNTIL = "SELECT * FROM task_history WHERE job_id = ? AND execution_time <= ? LIMIT ?"
SELECT_RECORD = "SELECT * FROM task_history WHERE job_id = ? AND execution_time = ? AND attempt = ?"
UPDATE_JOB_USER_FIELDS = (
    "UPDATE job_table SET schedule = ?, payload = ?, topic = ?, state = ?, version = ?, retry = ?, timeout_s = ?,"
    " updated_at = ?, next_run_at = ? WHERE user_id = ? AND job_id = ?"
)
UPDATE_JOB_LAST_STATUS = "UPDATE job_table SET last_status = ? WHERE user_id = ? AND job_id = ?"
SELECT_JOBS = "SELECT * FROM job_table WHERE user_id = ?"
CLAIM_IDEMPOTENCY_KEY = (
    "INSERT INTO job_idempotency (user_id, idempotency_key, job_id, fingerprint, created_at)"
    " VALUES (?, ?, ?, ?, toTimestamp(now())) IF NOT EXISTS"
)

STATEMENTS = (
    INSERT_JOB, SELECT_JOB, UPDATE_JOB_RUN, UPDATE_JOB_RUN_AND_NEXT, INSERT_SCHEDULED, SELECT_SCHEDULED,
    DELETE_SCHEDULED, INSERT_RECORD, SELECT_RECORDS, SELECT_RECORDS_UNTIL, SELECT_RECORD, UPDATE_JOB_USER_FIELDS,
    UPDATE_JOB_LAST_STATUS, SELECT_JOBS, CLAIM_IDEMPOTENCY_KEY,
)

_DRIVER_ERRORS = (DriverException, NoHostAvailable)


def _guard(call: Callable[[], T]) -> T:
    try:
        return call()
    except _DRIVER_ERRORS as exc:
        raise Unavailable(f"database unavailable: {type(exc).__name__}: {exc}") from exc


class CassandraJobStore(JobStore):
    """Takes a connected driver ``Session`` whose keyspace is set (see ``jobrunner.adapters.stores.session``)."""

    def __init__(self, session: Session, *, page_size: int = 1000, concurrency: int = 64) -> None:
        self._session = session
        self._page_size = page_size
        self._concurrency = concurrency
        self._prepared: dict[str, PreparedStatement] = {}

    def _stmt(self, cql: str) -> PreparedStatement:
        prepared = self._prepared.get(cql)
        if prepared is None:
            prepared = _guard(lambda: self._session.prepare(cql))
            prepared.consistency_level = ConsistencyLevel.LOCAL_QUORUM
            self._prepared[cql] = prepared
        return prepared

    def _batch(self) -> BatchStatement:
        return BatchStatement(batch_type=BatchType.LOGGED, consistency_level=ConsistencyLevel.LOCAL_QUORUM)

    def _run_concurrently(self, statements: Sequence[tuple[Any, Sequence[Any] | None]]) -> list[Any]:
        if not statements:
            return []
        results = _guard(lambda: execute_concurrent(
            self._session, statements, concurrency=self._concurrency, raise_on_first_error=True
        ))
        return [result for _ok, result in results]

    def create(self, job: Job, first: ScheduledExecution | None) -> None:
        batch = self._batch()
        batch.add(self._stmt(INSERT_JOB), codec.job_values(job))
        if first is not None:
            batch.add(self._stmt(INSERT_SCHEDULED), codec.scheduled_values(first))
        _guard(lambda: self._session.execute(batch))

    def get(self, user_id: str, job_id: str) -> Job | None:
        row = _guard(lambda: self._session.execute(self._stmt(SELECT_JOB), (user_id, job_id)).one())
        return codec.job_from_row(row) if row is not None else None

    def get_many(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Job]:
        stmt = self._stmt(SELECT_JOB)
        results = self._run_concurrently([(stmt, key) for key in keys])
        found: dict[tuple[str, str], Job] = {}
        for result in results:
            row = result.one()
            if row is not None:
                found[(row.user_id, row.job_id)] = codec.job_from_row(row)
        return found

    def scheduled(self, bucket: datetime, segment: int, lane: Lane) -> Iterator[ScheduledExecution]:
        stmt = self._stmt(SELECT_SCHEDULED)
        stmt.fetch_size = self._page_size
        result = _guard(lambda: self._session.execute(stmt, (bucket, segment, lane.value)))
        rows = iter(result)
        while True:  # the driver fetches the next page lazily inside next()
            row = _guard(lambda: next(rows, None))
            if row is None:
                return
            yield codec.scheduled_from_row(row)

    def complete(self, completions: Sequence[Completion]) -> None:
        statements: list[tuple[Any, Sequence[Any] | None]] = []
        for c in completions:
            batch = self._batch()
            record = c.record
            batch.add(self._stmt(INSERT_RECORD), codec.record_values(record))
            for row in (c.following, c.watchdog):
                if row is not None:
                    batch.add(self._stmt(INSERT_SCHEDULED), codec.scheduled_values(row))
            run = (record.published_at, record.execution_id, record.status.value)
            key = (c.done.user_id, c.done.job_id)
            if c.sets_next_run:
                batch.add(self._stmt(UPDATE_JOB_RUN_AND_NEXT), (*run, c.next_run_at, *key))
            else:
                batch.add(self._stmt(UPDATE_JOB_RUN), (*run, *key))
            batch.add(self._stmt(DELETE_SCHEDULED), codec.scheduled_key(c.done))
            statements.append((batch, None))
        self._run_concurrently(statements)

    def drop(self, rows: Sequence[ScheduledExecution]) -> None:
        stmt = self._stmt(DELETE_SCHEDULED)
        self._run_concurrently([(stmt, codec.scheduled_key(row)) for row in rows])

    def history(self, job_id: str, limit: int, before: tuple[datetime, int] | None = None) -> list[ExecutionRecord]:
        if before is None:
            result = _guard(lambda: self._session.execute(self._stmt(SELECT_RECORDS), (job_id, limit)))
            return [codec.record_from_row(row) for row in result]
        # Rows at the cursor's own instant are read again and filtered here: a plain slice on the
        # first clustering column is what every backend (Keyspaces included) supports.
        params = (job_id, before[0], limit + before[1])
        result = _guard(lambda: self._session.execute(self._stmt(SELECT_RECORDS_UNTIL), params))
        records = [codec.record_from_row(row) for row in result]
        return [r for r in records if (r.scheduled_at, r.attempt) < before][:limit]

    def update(self, job: Job, next_row: ScheduledExecution | None) -> None:
        batch = self._batch()
        batch.add(self._stmt(UPDATE_JOB_USER_FIELDS), (*codec.job_user_fields(job), job.user_id, job.job_id))
        if next_row is not None:
            batch.add(self._stmt(INSERT_SCHEDULED), codec.scheduled_values(next_row))
        _guard(lambda: self._session.execute(batch))

    def schedule(self, rows: Sequence[ScheduledExecution]) -> None:
        stmt = self._stmt(INSERT_SCHEDULED)
        self._run_concurrently([(stmt, codec.scheduled_values(row)) for row in rows])

    def list_jobs(self, user_id: str, limit: int, cursor: str | None) -> tuple[list[Job], str | None]:
        stmt = self._stmt(SELECT_JOBS)
        try:
            paging_state = base64.urlsafe_b64decode(cursor.encode()) if cursor else None
        except (ValueError, binascii.Error):
            raise InvalidField("cursor", "not a cursor this API returned") from None
        bound = stmt.bind((user_id,))
        bound.fetch_size = limit
        try:
            result = self._session.execute(bound, paging_state=paging_state)
        except InvalidRequest:
            raise InvalidField("cursor", "not a cursor this API returned") from None
        except _DRIVER_ERRORS as exc:
            raise Unavailable(f"database unavailable: {exc}") from exc
        jobs = [codec.job_from_row(row) for row in result.current_rows]
        next_state = result.paging_state if result.has_more_pages else None
        return jobs, base64.urlsafe_b64encode(next_state).decode() if next_state else None

    def claim_idempotency_key(self, user_id: str, key: str, job_id: str, fingerprint: str) -> tuple[str, str]:
        bound = self._stmt(CLAIM_IDEMPOTENCY_KEY).bind((user_id, key, job_id, fingerprint))
        bound.serial_consistency_level = ConsistencyLevel.LOCAL_SERIAL
        row = _guard(lambda: self._session.execute(bound).one())
        if row.applied:
            return job_id, fingerprint
        return row.job_id, row.fingerprint

    def record(self, job_id: str, scheduled_at: datetime, attempt: int) -> ExecutionRecord | None:
        params = (job_id, scheduled_at, attempt)
        row = _guard(lambda: self._session.execute(self._stmt(SELECT_RECORD), params).one())
        return codec.record_from_row(row) if row is not None else None

    def find_record(self, job_id: str, execution_id: str, scan_limit: int = 1000) -> ExecutionRecord | None:
        return next((r for r in self.history(job_id, scan_limit) if r.execution_id == execution_id), None)

    def finish(self, outcome: Outcome) -> None:
        batch = self._batch()
        record = outcome.record
        batch.add(self._stmt(INSERT_RECORD), codec.record_values(record))
        if outcome.retry is not None:
            batch.add(self._stmt(INSERT_SCHEDULED), codec.scheduled_values(outcome.retry))
        if outcome.job_status is not None:
            batch.add(self._stmt(UPDATE_JOB_LAST_STATUS), (outcome.job_status.value, record.user_id, record.job_id))
        _guard(lambda: self._session.execute(batch))
