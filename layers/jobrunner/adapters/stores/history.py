"""The executions' history on Cassandra / Keyspaces (``task_history_v2``): the records ``CassandraJobStore`` writes
and reads for ``HistoryStore``, one per execution, from its publish to its end.

Partition ``job_id``, in history order (newest ``execution_time`` first, then highest ``attempt``, then
``execution_id``); every record carries its tenant's history retention as its time to live (``USING TTL``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobrunner.adapters.stores import codec
from jobrunner.adapters.stores.driver import guarded, unset_nulls

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from datetime import datetime

    from jobrunner.adapters.stores.driver import Statements
    from jobrunner.domain.jobs import ExecutionRecord
    from jobrunner.ports import RecordKey

INSERT_RECORD = (
    "INSERT INTO task_history_v2 (job_id, execution_time, attempt, execution_id, user_id, status, trigger,"
    " due_at, published_at, finished_at, error, job_version, next_fire_at, retry_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?"
)
#: The record of a publish: every column but the end (status, finished_at, error), which only ``write_outcomes``
#: writes, so a replayed publish never moves an ended execution back to RUNNING.
INSERT_RECORD_STARTED = (
    "INSERT INTO task_history_v2 (job_id, execution_time, attempt, execution_id, user_id, trigger, due_at,"
    " published_at, job_version, next_fire_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?"
)
SELECT_RECORDS = "SELECT * FROM task_history_v2 WHERE job_id = ? LIMIT ?"
#: The pages after a record, in the key's order: the rest of its (fire, attempt), of its fire, then older fires.
SELECT_RECORDS_SAME_ATTEMPT = (
    "SELECT * FROM task_history_v2 WHERE job_id = ? AND execution_time = ? AND attempt = ? AND execution_id > ?"
    " LIMIT ?"
)
SELECT_RECORDS_SAME_TIME = (
    "SELECT * FROM task_history_v2 WHERE job_id = ? AND execution_time = ? AND attempt < ? LIMIT ?"
)
SELECT_RECORDS_BEFORE = "SELECT * FROM task_history_v2 WHERE job_id = ? AND execution_time < ? LIMIT ?"
SELECT_RECORD = (
    "SELECT * FROM task_history_v2 WHERE job_id = ? AND execution_time = ? AND attempt = ? AND execution_id = ?"
)

#: Every CQL string this adapter sends (checked against what Keyspaces supports, ``tests/infra``).
STATEMENTS = (
    INSERT_RECORD, INSERT_RECORD_STARTED, SELECT_RECORDS, SELECT_RECORDS_SAME_ATTEMPT, SELECT_RECORDS_SAME_TIME,
    SELECT_RECORDS_BEFORE, SELECT_RECORD,
)


class CassandraHistory:
    """The history table's writes and reads, on the store's prepared statements (``CassandraJobStore`` composes it
    and orders the writes that span two tables: ``write_outcomes``)."""

    def __init__(self, statements: Statements, history_ttl_s: Callable[[str], int]) -> None:
        self._statements = statements
        #: A tenant's history retention: each record is written to expire that long after (``USING TTL``).
        self._history_ttl_s = history_ttl_s

    def write_started(self, records: Sequence[ExecutionRecord]) -> None:
        values = [(*unset_nulls(codec.started_record_values(r)), self._history_ttl_s(r.user_id)) for r in records]
        self._statements.write_many(INSERT_RECORD_STARTED, values, partition=lambda v: v[0])  # job_id

    def write_records(self, records: Sequence[ExecutionRecord]) -> None:
        """Write the records whole (their end too): an execution's outcome."""
        values = [(*unset_nulls(codec.record_values(r)), self._history_ttl_s(r.user_id)) for r in records]
        self._statements.write_many(INSERT_RECORD, values, partition=lambda v: v[0])  # job_id

    def history_page(
        self, job_id: str, limit: int, before: tuple[datetime, int, str | None] | None = None
    ) -> list[ExecutionRecord]:
        if before is None:
            return self._records(SELECT_RECORDS, (job_id, limit))
        # The rest of the cursor's (fire, attempt), then its fire's lower attempts, then older fires: plain
        # slices, each with a range on one clustering column only (Keyspaces-safe), read until the page is full.
        at, attempt, execution_id = before
        slices: list[tuple[str, tuple[Any, ...]]] = [
            (SELECT_RECORDS_SAME_TIME, (job_id, at, attempt)), (SELECT_RECORDS_BEFORE, (job_id, at)),
        ]
        if execution_id is not None:  # None: an older API's cursor, past the whole (fire, attempt)
            slices.insert(0, (SELECT_RECORDS_SAME_ATTEMPT, (job_id, at, attempt, execution_id)))
        records: list[ExecutionRecord] = []
        for cql, params in slices:
            if len(records) >= limit:
                break
            records += self._records(cql, (*params, limit - len(records)))
        return records

    def _records(self, cql: str, params: tuple[Any, ...]) -> list[ExecutionRecord]:
        session, stmt = self._statements.session, self._statements.prepared(cql)
        return guarded(lambda: [codec.record_from_row(row) for row in session.execute(stmt, params)])

    def get_record(
        self, job_id: str, scheduled_at: datetime, attempt: int, execution_id: str
    ) -> ExecutionRecord | None:
        params = (job_id, scheduled_at, attempt, execution_id)
        stmt = self._statements.prepared(SELECT_RECORD)
        row = guarded(lambda: self._statements.session.execute(stmt, params).one())
        return codec.record_from_row(row) if row is not None else None

    def get_records(self, keys: Sequence[RecordKey]) -> dict[RecordKey, ExecutionRecord]:
        stmt = self._statements.prepared(SELECT_RECORD)
        unique = list(dict.fromkeys(keys))
        found: dict[RecordKey, ExecutionRecord] = {}
        results = self._statements.run_concurrently([(stmt, key) for key in unique])
        for key, result in zip(unique, results, strict=True):
            row = result.one()
            if row is not None:
                found[key] = codec.record_from_row(row)
        return found

    def record_by_execution_id(self, job_id: str, execution_id: str, scan_limit: int = 1000) -> ExecutionRecord | None:
        return next((r for r in self.history_page(job_id, scan_limit) if r.execution_id == execution_id), None)

    def latest_records(
        self, job_ids: Sequence[str], limit: int, *, stale_ok: bool = False
    ) -> dict[str, list[ExecutionRecord]]:
        stmt = self._statements.prepared(SELECT_RECORDS)
        requests: list[tuple[Any, Sequence[Any] | None]] = [
            (self._statements.stale(SELECT_RECORDS, (job_id, limit)), None) if stale_ok else (stmt, (job_id, limit))
            for job_id in job_ids]
        results = self._statements.run_concurrently(requests)
        return {job_id: [codec.record_from_row(row) for row in result]
                for job_id, result in zip(job_ids, results, strict=True)}
