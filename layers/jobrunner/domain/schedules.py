"""Schedules and their fire times.

A schedule is an immutable spec; its fire times are a pure function of (spec, instant):
``first_fire(now)`` is the first fire at or after submission and ``next_fire_after(t)`` the first
fire strictly after ``t``. Neither keeps state, so any process can compute the next run from the
stored spec alone.

Kinds:
- ``at``: one fire at an instant.
- ``every``: a fixed ISO 8601 duration (no years or months; use ``cron`` for calendar periods),
  firing at ``start + k * every`` for k >= 0, optionally until ``end`` (inclusive). Without ``start``
  the first fire is one interval after submission, like a rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Protocol

import isodate

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.time import rfc3339, utc

MIN_INTERVAL = timedelta(seconds=10)
#: How far in the past an ``at`` may be and still be accepted (it then runs at once): clock skew.
AT_PAST_TOLERANCE = timedelta(minutes=5)


class Schedule(Protocol):
    kind: ClassVar[str]

    @property
    def recurring(self) -> bool: ...

    def first_fire(self, now: datetime) -> datetime | None:
        """The first fire of a job submitted at ``now`` (may be slightly before ``now`` for ``at``)."""
        ...

    def next_fire_after(self, instant: datetime) -> datetime | None:
        """The first fire strictly after ``instant``, or None when the schedule is exhausted."""
        ...

    def to_dict(self) -> dict[str, Any]: ...


def parse_instant(value: str, field: str) -> datetime:
    """Parse an RFC 3339 instant; an offset is required so that the instant is unambiguous."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidField(field, f"not an RFC 3339 date-time: {value!r}") from None
    if parsed.tzinfo is None:
        raise InvalidField(field, "needs a UTC offset, e.g. 2026-11-22T10:00:00Z")
    return utc(parsed)


def parse_interval(value: str, field: str) -> timedelta:
    """Parse an ISO 8601 duration of fixed length (weeks, days, hours, minutes, seconds)."""
    try:
        parsed = isodate.parse_duration(value)
    except (isodate.ISO8601Error, ValueError):
        raise InvalidField(field, f"not an ISO 8601 duration: {value!r} (e.g. PT5M, PT1H, P1D)") from None
    if not isinstance(parsed, timedelta):
        raise InvalidField(field, "years and months have no fixed length; use a cron schedule")
    if parsed % timedelta(milliseconds=1):
        raise InvalidField(field, "must be a whole number of milliseconds")
    if parsed < MIN_INTERVAL:
        raise InvalidField(field, f"must be at least {int(MIN_INTERVAL.total_seconds())} seconds")
    return parsed


@dataclass(frozen=True)
class At:
    at: datetime
    kind: ClassVar[str] = "at"

    @property
    def recurring(self) -> bool:
        return False

    def first_fire(self, now: datetime) -> datetime | None:
        return self.at

    def next_fire_after(self, instant: datetime) -> datetime | None:
        return self.at if self.at > instant else None

    def to_dict(self) -> dict[str, Any]:
        return {"at": rfc3339(self.at)}


@dataclass(frozen=True)
class Every:
    every: timedelta
    start: datetime | None = None
    end: datetime | None = None
    kind: ClassVar[str] = "every"

    @property
    def recurring(self) -> bool:
        return True

    def anchored(self, now: datetime) -> Every:
        """This spec with ``start`` fixed: one interval after ``now`` when none was given."""
        if self.start is not None:
            return self
        return Every(every=self.every, start=utc(now) + self.every, end=self.end)

    def first_fire(self, now: datetime) -> datetime | None:
        spec = self.anchored(now)
        assert spec.start is not None
        if spec.start >= now:
            return spec.start if spec.end is None or spec.start <= spec.end else None
        return spec.next_fire_after(now - timedelta(milliseconds=1))

    def next_fire_after(self, instant: datetime) -> datetime | None:
        if self.start is None:
            raise ValueError("an unanchored every schedule has no fire times; call anchored() first")
        if instant < self.start:
            candidate = self.start
        else:
            steps = (instant - self.start) // self.every + 1
            candidate = self.start + steps * self.every
        if self.end is not None and candidate > self.end:
            return None
        return utc(candidate)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"every": isodate.duration_isoformat(self.every)}
        if self.start is not None:
            out["start"] = rfc3339(self.start)
        if self.end is not None:
            out["end"] = rfc3339(self.end)
        return out


def schedule_from_dict(data: dict[str, Any], field: str = "schedule") -> Schedule:
    """Build a schedule from its JSON form (the API's and the store's), naming the bad field on error."""
    kinds = [k for k in ("at", "every", "cron", "iso8601") if data.get(k) is not None]
    if len(kinds) != 1:
        raise InvalidField(field, "needs exactly one of 'at', 'every', 'cron', 'iso8601'")
    kind = kinds[0]
    if kind == "at":
        extra = set(data) - {"at"}
        if extra:
            raise InvalidField(f"{field}.{sorted(extra)[0]}", "not allowed with 'at'")
        return At(at=parse_instant(str(data["at"]), f"{field}.at"))
    if kind == "every":
        extra = set(data) - {"every", "start", "end"}
        if extra:
            raise InvalidField(f"{field}.{sorted(extra)[0]}", "not allowed with 'every'")
        every = parse_interval(str(data["every"]), f"{field}.every")
        start = parse_instant(str(data["start"]), f"{field}.start") if data.get("start") else None
        end = parse_instant(str(data["end"]), f"{field}.end") if data.get("end") else None
        if start is not None and end is not None and end < start:
            raise InvalidField(f"{field}.end", "is before start")
        return Every(every=every, start=start, end=end)
    raise InvalidField(f"{field}.{kind}", "this schedule kind is not supported yet")
