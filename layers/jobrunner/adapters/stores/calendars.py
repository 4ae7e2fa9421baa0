"""The CalendarStore on Cassandra / Keyspaces (``calendars``), and in memory (unit tests, contract twin).

Table ``calendars``: partition ``user_id`` (a tenant's calendars live together, and are only ever read by
their tenant), clustered by ``name``; the exclusions are stored as their JSON form (``Calendar.to_dict``).
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

from cassandra import ConsistencyLevel

from jobrunner.adapters.stores.driver import guarded
from jobrunner.domain.calendars import calendar_from_dict
from jobrunner.domain.time import utc
from jobrunner.ports import CalendarStore

if TYPE_CHECKING:
    from cassandra.cluster import Session

    from jobrunner.domain.calendars import Calendar

INSERT_CALENDAR = (
    "INSERT INTO calendars (user_id, name, timezone, exclude, description, updated_at) VALUES (?, ?, ?, ?, ?, ?)"
)
SELECT_CALENDAR = "SELECT * FROM calendars WHERE user_id = ? AND name = ?"
SELECT_CALENDARS = "SELECT * FROM calendars WHERE user_id = ? LIMIT ?"
SELECT_CALENDARS_AFTER = "SELECT * FROM calendars WHERE user_id = ? AND name > ? LIMIT ?"
DELETE_CALENDAR = "DELETE FROM calendars WHERE user_id = ? AND name = ?"
#: Every CQL string this adapter sends (checked against what Keyspaces supports, ``tests/infra``).
STATEMENTS = (INSERT_CALENDAR, SELECT_CALENDAR, SELECT_CALENDARS, SELECT_CALENDARS_AFTER, DELETE_CALENDAR)


def _from_row(row: Any) -> Calendar:
    data = {"timezone": row.timezone, "exclude": json.loads(row.exclude or "[]")}
    if row.description is not None:
        data["description"] = row.description
    return calendar_from_dict(row.user_id, row.name, data, utc(row.updated_at) if row.updated_at else None)


class CassandraCalendarStore(CalendarStore):
    def __init__(self, session: Session) -> None:
        self._session = session
        self._prepared: dict[str, Any] = {}

    def _stmt(self, cql: str) -> Any:
        if cql not in self._prepared:
            prepared = guarded(lambda: self._session.prepare(cql))
            prepared.consistency_level = ConsistencyLevel.LOCAL_QUORUM
            self._prepared[cql] = prepared
        return self._prepared[cql]

    def put(self, calendar: Calendar) -> None:
        data = calendar.to_dict()
        values = (calendar.user_id, calendar.name, calendar.timezone,
                  json.dumps(data["exclude"], separators=(",", ":")), calendar.description, calendar.updated_at)
        # A calendar replaced without a description loses the old one: its null is written (a rare write).
        guarded(lambda: self._session.execute(self._stmt(INSERT_CALENDAR), values))

    def get(self, user_id: str, name: str) -> Calendar | None:
        row = guarded(lambda: self._session.execute(self._stmt(SELECT_CALENDAR), (user_id, name)).one())
        return _from_row(row) if row is not None else None

    def list(self, user_id: str, limit: int, after: str | None = None) -> list[Calendar]:
        if after is None:
            rows = guarded(lambda: list(self._session.execute(self._stmt(SELECT_CALENDARS), (user_id, limit))))
        else:
            rows = guarded(lambda: list(self._session.execute(self._stmt(SELECT_CALENDARS_AFTER),
                                                              (user_id, after, limit))))
        return [_from_row(row) for row in rows]

    def delete(self, user_id: str, name: str) -> None:
        guarded(lambda: self._session.execute(self._stmt(DELETE_CALENDAR), (user_id, name)))


class MemoryCalendarStore(CalendarStore):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calendars: dict[tuple[str, str], Calendar] = {}
        #: How many times each (tenant, name) was read: the scan's cost is asserted on it.
        self.reads: dict[tuple[str, str], int] = {}

    def put(self, calendar: Calendar) -> None:
        with self._lock:
            self.calendars[(calendar.user_id, calendar.name)] = calendar

    def get(self, user_id: str, name: str) -> Calendar | None:
        with self._lock:
            self.reads[(user_id, name)] = self.reads.get((user_id, name), 0) + 1
            return self.calendars.get((user_id, name))

    def list(self, user_id: str, limit: int, after: str | None = None) -> list[Calendar]:
        with self._lock:
            mine = sorted((c for (u, _), c in self.calendars.items() if u == user_id), key=lambda c: c.name)
        return [c for c in mine if after is None or c.name > after][:limit]

    def delete(self, user_id: str, name: str) -> None:
        with self._lock:
            self.calendars.pop((user_id, name), None)
