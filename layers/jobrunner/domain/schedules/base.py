"""What every schedule kind shares: the ``Schedule`` contract, bounds, and instant/duration parsing."""

from __future__ import annotations

import functools
import json
from datetime import datetime, timedelta
from typing import Any, ClassVar, Protocol

import isodate

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.time import utc
from jobrunner_client.protocol import parse_rfc3339

MIN_INTERVAL = timedelta(seconds=10)
#: The longest fixed interval accepted: fire times then stay far inside the years a datetime can hold.
MAX_INTERVAL = timedelta(days=36_525)
#: How far in the past an ``at`` may be and still be accepted (it then runs at once): clock skew.
AT_PAST_TOLERANCE = timedelta(minutes=5)
MILLISECOND = timedelta(milliseconds=1)
#: The most fires a ``count`` may ask for (an end condition: the schedule stops after that many fires).
MAX_COUNT = 1000


class Schedule(Protocol):
    """A schedule spec. Its fire times are a pure function of (spec, instant); it keeps no state."""

    kind: ClassVar[str]

    @property
    def recurring(self) -> bool: ...

    def first_fire(self, now: datetime) -> datetime | None:
        """The first fire of a job submitted at ``now`` (may be slightly before ``now`` for ``at``)."""
        ...

    def next_fire_after(self, instant: datetime) -> datetime | None:
        """The first fire strictly after ``instant``, or None when the schedule is exhausted."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; ``schedule_from_dict(s.to_dict()) == s``."""
        ...


def anchor(schedule: Schedule, now: datetime) -> Schedule:
    """``schedule`` as a job submitted (or changed) at ``now`` keeps it: what is relative to that moment made
    absolute (``every`` without a start starts one interval later; a ``count`` becomes the instant of the
    count-th fire, the schedule's ``end``). Stored schedules are anchored already: this is done once."""
    anchored = getattr(schedule, "anchored", None)
    return anchored(now) if anchored is not None else schedule


def nth_fire(schedule: Schedule, start: datetime, count: int) -> datetime | None:
    """The ``count``-th fire of ``schedule`` at or after ``start`` (None: it has fewer)."""
    fire = schedule.next_fire_after(start - MILLISECOND)
    for _ in range(count - 1):
        if fire is None:
            return None
        fire = schedule.next_fire_after(fire)
    return fire


#: ``fires_left`` answers, by (schedule, from): the job page asks for them every few seconds.
_LEFT: dict[tuple[str, datetime], int | None] = {}


def fires_left(schedule: Schedule, first: datetime | None) -> int | None:
    """How many fires ``schedule`` has from ``first`` on (``first`` included, when it is one), for a schedule
    with an end: None when it has no end within ``MAX_COUNT`` fires (or ``first`` is None: 0)."""
    if first is None:
        return 0
    key = (json.dumps(schedule.to_dict(), sort_keys=True), first)
    if key not in _LEFT:
        if len(_LEFT) > 4096:
            _LEFT.clear()
        fire: datetime | None = schedule.next_fire_after(first - MILLISECOND)
        left = 0
        while fire is not None and left <= MAX_COUNT:
            left += 1
            fire = schedule.next_fire_after(fire)
        _LEFT[key] = left if left <= MAX_COUNT else None
    return _LEFT[key]


def parse_count(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        raise InvalidField(field, f"must be a whole number of fires from 1 to {MAX_COUNT}")
    return value


def fires_at(schedule: Schedule, instant: datetime) -> bool:
    """Whether ``instant`` is one of the schedule's fire times."""
    return schedule.next_fire_after(instant - MILLISECOND) == instant


def parse_aware(value: object, field: str) -> datetime:
    """Parse an RFC 3339 date-time keeping the offset it was written with; an offset is required (the rule the
    result messages follow too: ``jobrunner_client.protocol.parse_rfc3339``)."""
    try:
        return parse_rfc3339(value)
    except ValueError as exc:
        raise InvalidField(field, str(exc)) from None


def parse_instant(value: object, field: str) -> datetime:
    """Parse an RFC 3339 instant; an offset is required so that the instant is unambiguous."""
    return utc(parse_aware(value, field))


@functools.lru_cache(maxsize=1024)
def parse_interval(value: str, field: str) -> timedelta:
    """Parse an ISO 8601 duration of fixed length (weeks, days, hours, minutes, seconds). Remembered: a
    scan parses every job it reads, and jobs share few periods (``PT1H``...); a timedelta is immutable,
    and a refused one raises again each time (exceptions are not cached)."""
    try:
        parsed = isodate.parse_duration(value)
    except (isodate.ISO8601Error, ValueError, OverflowError):
        raise InvalidField(field, f"not an ISO 8601 duration: {value!r} (e.g. PT5M, PT1H, P1D)") from None
    if not isinstance(parsed, timedelta):
        raise InvalidField(field, "years and months have no fixed length; use a cron schedule")
    if parsed % MILLISECOND:
        raise InvalidField(field, "must be a whole number of milliseconds")
    if parsed < MIN_INTERVAL:
        raise InvalidField(field, f"must be at least {int(MIN_INTERVAL.total_seconds())} seconds")
    if parsed > MAX_INTERVAL:
        raise InvalidField(field, "must be at most 100 years")
    return parsed
