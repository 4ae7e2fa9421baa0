"""Calendars: a tenant's named lists of excluded dates and ranges (holidays, freeze windows) in a time zone.

A recurring job may name one (``JobSpec.calendar``): a fire of its schedule whose local time, on the calendar's
wall clock, falls in an excluded range is not run; the scan records it SKIPPED (``SkipReason.CALENDAR``,
naming the calendar and the range) and the schedule goes on. The fire itself is what is checked (not its
jittered due instant), so a jitter window never moves a fire into or out of an exclusion.

An exclusion is written three ways, each a range of local wall-clock time:
- ``{"date": "2026-12-25"}``: that whole day;
- ``{"from": "2026-12-24", "to": "2026-12-26"}``: whole days, both included;
- ``{"from": "2026-12-24T18:00", "to": "2026-12-27T06:00"}``: from the first local time (included) to the
  second (excluded), on the calendar's wall clock (a time a daylight-saving change skips or repeats is
  read as Python reads it: the local time of the instant, whichever occurrence it is).
Each may carry a ``note`` (a person's words: "Christmas", "release freeze"), which the skip record repeats.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.jobs import JobState
from jobrunner.domain.schedules import parse_timezone
from jobrunner.domain.time import utc

if TYPE_CHECKING:
    from collections.abc import Sequence

    from jobrunner.domain.jobs import Job

#: A calendar's name: what a job's ``calendar`` field and the API's path name it by.
NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MAX_EXCLUSIONS = 1000
MAX_NOTE = 200
MAX_DESCRIPTION = 500
_DAY = timedelta(days=1)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_LOCAL = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?")


def check_name(name: str, field: str = "name") -> str:
    if not NAME.fullmatch(name):
        raise InvalidField(field, "a calendar name is 1 to 64 letters, digits, '_', '.' or '-'")
    return name


@dataclass(frozen=True)
class Exclusion:
    """Local wall-clock time from ``start`` (included) to ``end`` (excluded), as it was written (``spec``)."""

    start: datetime
    end: datetime
    spec: dict[str, str]

    @property
    def note(self) -> str | None:
        return self.spec.get("note")

    def describe(self) -> str:
        """The range in words, with its note: ``2026-12-25 (Christmas)``, ``2026-12-24 to 2026-12-26``."""
        spec = self.spec
        text = spec["date"] if "date" in spec else f"{spec['from']} to {spec['to']}"
        return f"{text} ({spec['note']})" if spec.get("note") else text


@dataclass(frozen=True)
class Calendar:
    user_id: str
    name: str
    timezone: str
    exclusions: tuple[Exclusion, ...]
    description: str | None = None
    updated_at: datetime | None = None

    def excluding(self, fire: datetime) -> Exclusion | None:
        """The exclusion ``fire`` falls in, on this calendar's wall clock (None: the fire is not excluded)."""
        wall = utc(fire).astimezone(ZoneInfo(self.timezone)).replace(tzinfo=None)
        return next((e for e in self.exclusions if e.start <= wall < e.end), None)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form the API takes and returns (``calendar_from_dict`` reads it back)."""
        out: dict[str, Any] = {"timezone": self.timezone, "exclude": [dict(e.spec) for e in self.exclusions]}
        if self.description is not None:
            out["description"] = self.description
        return out


def calendar_from_dict(user_id: str, name: str, data: dict[str, Any], updated_at: datetime | None = None) -> Calendar:
    """A calendar from its JSON form, naming the wrong field (``exclude.3.to``, ``timezone``, ...) and why."""
    check_name(name)
    extra = set(data) - {"timezone", "exclude", "description"}
    if extra:
        raise InvalidField(sorted(extra)[0], "unknown field")
    timezone = parse_timezone(data.get("timezone", "UTC"), "timezone")
    description = data.get("description")
    if description is not None and (not isinstance(description, str) or len(description) > MAX_DESCRIPTION):
        raise InvalidField("description", f"a text of at most {MAX_DESCRIPTION} characters")
    entries = data.get("exclude", [])
    if not isinstance(entries, list):
        raise InvalidField("exclude", "must be a list of exclusions")
    if len(entries) > MAX_EXCLUSIONS:
        raise InvalidField("exclude", f"has {len(entries)} exclusions; at most {MAX_EXCLUSIONS}")
    exclusions = tuple(_exclusion(entry, f"exclude.{i}") for i, entry in enumerate(entries))
    return Calendar(user_id, name, timezone, exclusions, description, updated_at)


def _exclusion(entry: Any, path: str) -> Exclusion:
    if not isinstance(entry, dict):
        raise InvalidField(path, 'must be {"date": ...} or {"from": ..., "to": ...}')
    extra = set(entry) - {"date", "from", "to", "note"}
    if extra:
        raise InvalidField(f"{path}.{sorted(extra)[0]}", "unknown field")
    note = entry.get("note")
    if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE):
        raise InvalidField(f"{path}.note", f"a text of at most {MAX_NOTE} characters")
    spec = {k: v for k, v in entry.items() if v is not None}
    if "date" in entry:
        if "from" in entry or "to" in entry:
            raise InvalidField(path, "give a date, or from and to, not both")
        day = _date(entry["date"], f"{path}.date")
        return Exclusion(_midnight(day), _midnight(day) + _DAY, spec)
    if "from" not in entry or "to" not in entry:
        raise InvalidField(f"{path}.{'to' if 'from' in entry else 'from'}", "is required (or give a date)")
    low, high = entry["from"], entry["to"]
    if isinstance(low, str) and _DATE.fullmatch(low):
        start = _midnight(_date(low, f"{path}.from"))
        end = _midnight(_date(high, f"{path}.to", dates_only=True)) + _DAY
    else:
        start, end = _local(low, f"{path}.from"), _local(high, f"{path}.to")
    if end <= start:
        raise InvalidField(f"{path}.to", "is before from")
    return Exclusion(start, end, spec)


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day)


def _date(value: Any, path: str, dates_only: bool = False) -> date:
    if not isinstance(value, str) or not _DATE.fullmatch(value):
        hint = " (from is a date, so to is one too)" if dates_only else ""
        raise InvalidField(path, f"not a date YYYY-MM-DD: {value!r}{hint}")
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidField(path, f"not a date: {value!r}") from None


def _local(value: Any, path: str) -> datetime:
    if not isinstance(value, str) or not _LOCAL.fullmatch(value):
        raise InvalidField(path, f"not a local date-time YYYY-MM-DDTHH:MM[:SS] (no offset: the calendar's time zone "
                                 f"applies), nor a date: {value!r}")
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise InvalidField(path, f"not a date-time: {value!r}") from None


def exclusion_note(calendar: Calendar, exclusion: Exclusion) -> str:
    """The detail of a fire's SKIPPED record (after ``calendar: ``): which calendar, which range."""
    return f"excluded by calendar {calendar.name} ({exclusion.describe()}, {calendar.timezone})"


def calendar_of_note(text: str | None) -> str | None:
    """The calendar a SKIPPED record's detail names (``exclusion_note``), if any."""
    match = re.match(r"(?:calendar: )?excluded by calendar ([A-Za-z0-9_.-]+)", text or "")
    return match.group(1) if match else None


def referencing(jobs: Sequence[Job], name: str) -> list[str]:
    """The ids of ``jobs`` (not cancelled) that name calendar ``name``."""
    return [job.job_id for job in jobs if job.spec.calendar == name and job.state in (JobState.ACTIVE, JobState.PAUSED)]
