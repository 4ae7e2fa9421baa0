"""What every schedule kind shares: the ``Schedule`` contract, bounds, and instant/duration parsing."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, ClassVar, Protocol

import isodate

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.time import utc

MIN_INTERVAL = timedelta(seconds=10)
#: The longest fixed interval accepted: fire times then stay far inside the years a datetime can hold.
MAX_INTERVAL = timedelta(days=36_525)
#: How far in the past an ``at`` may be and still be accepted (it then runs at once): clock skew.
AT_PAST_TOLERANCE = timedelta(minutes=5)
MILLISECOND = timedelta(milliseconds=1)


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


def fires_at(schedule: Schedule, instant: datetime) -> bool:
    """Whether ``instant`` is one of the schedule's fire times."""
    return schedule.next_fire_after(instant - MILLISECOND) == instant


def parse_aware(value: object, field: str) -> datetime:
    """Parse an RFC 3339 date-time keeping the offset it was written with; an offset is required."""
    if not isinstance(value, str):  # a parsed JSON value may be anything
        raise InvalidField(field, f"not an RFC 3339 date-time: {value!r}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidField(field, f"not an RFC 3339 date-time: {value!r}") from None
    if parsed.tzinfo is None:
        raise InvalidField(field, "needs a UTC offset, e.g. 2026-11-22T10:00:00Z")
    try:
        utc(parsed)
    except OverflowError:
        raise InvalidField(field, "is outside the years 0001 to 9999 in UTC") from None
    return parsed


def parse_instant(value: object, field: str) -> datetime:
    """Parse an RFC 3339 instant; an offset is required so that the instant is unambiguous."""
    return utc(parse_aware(value, field))


def parse_interval(value: str, field: str) -> timedelta:
    """Parse an ISO 8601 duration of fixed length (weeks, days, hours, minutes, seconds)."""
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
