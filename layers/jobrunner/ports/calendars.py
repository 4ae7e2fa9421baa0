"""The calendar port: each tenant's calendars, by name."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobrunner.domain.calendars import Calendar


class CalendarStore(ABC):
    """Each tenant's calendars (``domain.calendars``), by name (Cassandra / Keyspaces in production).

    Contract:
    - ``put`` stores a calendar, replacing the tenant's calendar of that name whole (the last write wins).
    - ``get(user_id, name)`` returns it, or None; a calendar is only ever found under its own tenant.
    - ``list(user_id, limit, after)`` returns up to ``limit`` of the tenant's calendars in name order, those
      after the name ``after`` when given (the next page).
    - ``delete`` removes it (removing one that is not there is no error).
    - Reads reflect every write that returned before them (LOCAL_QUORUM in production).
    - Backend failures raise ``jobrunner.domain.errors.Unavailable``.
    """

    @abstractmethod
    def put(self, calendar: Calendar) -> None: ...

    @abstractmethod
    def get(self, user_id: str, name: str) -> Calendar | None: ...

    @abstractmethod
    def list(self, user_id: str, limit: int, after: str | None = None) -> list[Calendar]: ...

    @abstractmethod
    def delete(self, user_id: str, name: str) -> None: ...
