"""Managing a tenant's calendars (``domain.calendars``): create or replace, read, list, delete.

What a change means for the jobs that name a calendar: the scan reads a job's calendar when it publishes
(or skips) each of its fires, so a change applies to every fire not yet published (within the scan's
``CALENDAR_REFRESH``), and never to fires already run or skipped. A calendar a job that is not cancelled
still names cannot be deleted (409, naming the jobs): change the jobs first (``PATCH`` ``calendar: null``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobrunner.domain.calendars import Calendar, calendar_from_dict, check_name, referencing
from jobrunner.domain.errors import Conflict, InvalidField, NotFound

if TYPE_CHECKING:
    from jobrunner.ports import CalendarStore, Clock, JobStore

#: Jobs read per store page when a delete looks for the jobs that name the calendar.
REFERENCE_PAGE = 1000
#: How many of those jobs a refused delete names.
NAMED_REFERENCES = 10


class CalendarService:
    def __init__(self, calendars: CalendarStore, jobs: JobStore, clock: Clock) -> None:
        self._calendars = calendars
        self._jobs = jobs
        self._clock = clock

    def put(self, user_id: str, name: str, data: dict[str, Any]) -> tuple[Calendar, bool]:
        """Create or replace the tenant's calendar ``name`` (validated whole first: nothing is written if any
        field is wrong); returns it and whether it was created."""
        calendar = calendar_from_dict(user_id, name, data, self._clock.now())
        created = self._calendars.get(user_id, name) is None
        self._calendars.put(calendar)
        return calendar, created

    def get(self, user_id: str, name: str) -> Calendar:
        check_name(name)
        calendar = self._calendars.get(user_id, name)
        if calendar is None:
            raise NotFound(f"calendar {name}")
        return calendar

    def list(self, user_id: str, limit: int, after: str | None = None) -> tuple[list[Calendar], str | None]:
        if after is not None:
            check_name(after, "cursor")
        page = self._calendars.list(user_id, limit + 1, after)
        return page[:limit], page[limit - 1].name if len(page) > limit else None

    def delete(self, user_id: str, name: str) -> None:
        """Delete the calendar, unless a job that is not cancelled names it (409). Reads the tenant's jobs (its
        own partition), ``REFERENCE_PAGE`` a read, to find them."""
        self.get(user_id, name)
        users: list[str] = []
        cursor: str | None = None
        while True:
            jobs, cursor = self._jobs.list_jobs(user_id, REFERENCE_PAGE, cursor)
            users += referencing(jobs, name)
            if cursor is None:
                break
        if users:
            shown = ", ".join(users[:NAMED_REFERENCES]) + (" ..." if len(users) > NAMED_REFERENCES else "")
            raise Conflict(f"calendar {name} is named by {len(users)} job(s) not cancelled: {shown}; change or "
                           "cancel them first")
        self._calendars.delete(user_id, name)


def check_calendar(calendars: CalendarStore, user_id: str, name: str | None, recurring: bool) -> None:
    """A job's ``calendar`` field: a calendar of the tenant's, and only on a recurring job (422 otherwise)."""
    if name is None:
        return
    check_name(name, "calendar")
    if not recurring:
        raise InvalidField("calendar", "only a recurring job may name a calendar (a one-time job fires when asked)")
    if calendars.get(user_id, name) is None:
        raise InvalidField("calendar", f"the tenant has no calendar named {name!r} (PUT /calendars/{name} first)")
