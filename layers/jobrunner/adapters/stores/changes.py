"""The ChangeLog on Cassandra / Keyspaces (``job_changes``), and in memory (unit tests, contract twin).

Table ``job_changes``: partition ``job_id``, newest first by ``(changed_at, change_id)``; every write
carries the tenant's history retention as its time to live (``USING TTL``).
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

from cassandra import ConsistencyLevel

from jobrunner.adapters.stores.driver import guarded, write_many
from jobrunner.adapters.stores.session import is_read
from jobrunner.domain.changes import JobChange
from jobrunner.domain.limits import Limits
from jobrunner.domain.time import utc
from jobrunner.ports import ChangeLog

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from datetime import datetime

    from cassandra.cluster import Session

INSERT_CHANGE = (
    "INSERT INTO job_changes (job_id, changed_at, change_id, user_id, actor, action, version, details)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?"
)
SELECT_CHANGES = "SELECT * FROM job_changes WHERE job_id = ? LIMIT ?"
SELECT_CHANGES_AT = "SELECT * FROM job_changes WHERE job_id = ? AND changed_at = ? AND change_id > ? LIMIT ?"
SELECT_CHANGES_BEFORE = "SELECT * FROM job_changes WHERE job_id = ? AND changed_at < ? LIMIT ?"
#: Every CQL string this adapter sends (checked against what Keyspaces supports, ``tests/infra``).
STATEMENTS = (INSERT_CHANGE, SELECT_CHANGES, SELECT_CHANGES_AT, SELECT_CHANGES_BEFORE)


class CassandraChangeLog(ChangeLog):
    def __init__(self, session: Session,
                 ttl_s: Callable[[str], int] = lambda _tenant: Limits().history_ttl_s) -> None:
        self._session = session
        self._ttl_s = ttl_s
        self._prepared: dict[str, Any] = {}

    def _stmt(self, cql: str) -> Any:
        if cql not in self._prepared:
            prepared = guarded(lambda: self._session.prepare(cql))
            prepared.consistency_level = ConsistencyLevel.LOCAL_QUORUM
            prepared.is_idempotent = is_read(cql)  # only reads may be sent twice (speculative execution)
            self._prepared[cql] = prepared
        return self._prepared[cql]

    def record(self, change: JobChange) -> None:
        guarded(lambda: self._session.execute(self._stmt(INSERT_CHANGE), self._values(change)))

    def record_many(self, changes: Sequence[JobChange]) -> None:
        write_many(self._session, self._stmt(INSERT_CHANGE), [self._values(c) for c in changes],
                   partition=lambda values: values[0])  # job_id

    def _values(self, change: JobChange) -> tuple[Any, ...]:
        return (change.job_id, change.changed_at, change.change_id, change.user_id, change.actor, change.action,
                change.version, json.dumps(change.details, sort_keys=True), self._ttl_s(change.user_id))

    def changes(self, job_id: str, limit: int, before: tuple[datetime, str] | None = None) -> list[JobChange]:
        if before is None:
            return self._read(SELECT_CHANGES, (job_id, limit))
        at, change_id = before
        same = self._read(SELECT_CHANGES_AT, (job_id, at, change_id, limit))
        return same + self._read(SELECT_CHANGES_BEFORE, (job_id, at, limit - len(same))) if len(same) < limit else same

    def _read(self, cql: str, params: tuple[Any, ...]) -> list[JobChange]:
        rows = guarded(lambda: list(self._session.execute(self._stmt(cql), params)))
        return [JobChange(job_id=r.job_id, user_id=r.user_id, changed_at=utc(r.changed_at), change_id=r.change_id,
                          actor=r.actor, action=r.action, version=r.version, details=json.loads(r.details or "{}"))
                for r in rows]


class MemoryChangeLog(ChangeLog):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entries: dict[tuple[str, datetime, str], JobChange] = {}

    def record(self, change: JobChange) -> None:
        self.record_many([change])

    def record_many(self, changes: Sequence[JobChange]) -> None:
        with self._lock:
            for change in changes:
                self.entries[(change.job_id, change.changed_at, change.change_id)] = change

    def changes(self, job_id: str, limit: int, before: tuple[datetime, str] | None = None) -> list[JobChange]:
        with self._lock:
            mine = [c for c in self.entries.values() if c.job_id == job_id]
        # newest first: changed_at descending, then change_id ascending (the table's clustering order)
        mine.sort(key=lambda c: c.change_id)
        mine.sort(key=lambda c: c.changed_at, reverse=True)
        if before is not None:
            at, change_id = before
            mine = [c for c in mine if c.changed_at < at or (c.changed_at == at and c.change_id > change_id)]
        return mine[:limit]
