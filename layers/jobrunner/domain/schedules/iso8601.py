"""``iso8601``: ISO 8601 repeating intervals.

Three forms, ``R<n>`` meaning n fires (``R`` alone: no limit, only with a start):
- ``R5/2026-11-22T10:00:00Z/PT1H``: start and duration; fires at start, start + 1h, ... start + 4h.
- ``R3/PT1H/2026-11-22T12:00:00Z``: duration and end; the last fire is at the end, the others one
  duration apart before it (10:00, 11:00, 12:00).
- ``R2/2026-11-22T10:00:00Z/2026-11-22T12:00:00Z``: start and end; the duration is end - start and the
  fires are start, start + duration, ... (here 10:00 and 12:00).

Durations may use years and months (unlike ``every``). Fire k is always computed from the anchor as
``anchor + k * duration`` (never by adding to the previous fire, so nothing drifts), on the calendar of the
UTC offset the anchor was written with. ``k * duration`` adds k times the years and months first, then k
times the days and time (isodate's arithmetic); a day that a month lacks becomes that month's last day:
``R/2026-01-31T09:00:00Z/P1M`` fires on Jan 31, Feb 28, Mar 31, Apr 30, ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar

import isodate

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.schedules.base import MILLISECOND, MIN_INTERVAL, parse_aware
from jobrunner.domain.time import rfc3339, utc

_FORMS = "use R<n>/<start>/<duration>, R<n>/<duration>/<end> or R<n>/<start>/<end>"
_REPEATS = re.compile(r"R([0-9]*)")
#: The average calendar month, to estimate how many calendar durations fit in a span.
_AVERAGE_MONTH = timedelta(days=365.2425 / 12)


@dataclass(frozen=True)
class RepeatingInterval:
    """An ISO 8601 repeating interval; exactly two of ``start``, ``duration`` and ``end`` are set.

    ``count`` is the number of fires (None: unbounded, which needs a start). ``duration`` is a
    ``timedelta`` or, with years or months, an ``isodate.Duration``; ``offset`` is the UTC offset its
    calendar is counted in (zero unless the duration has years or months).
    """

    count: int | None
    start: datetime | None = None
    duration: Any = None  # timedelta | isodate.Duration | None
    end: datetime | None = None
    offset: timedelta = timedelta(0)
    #: An end condition besides the interval's own (the JSON form's ``end`` key): no fire after it.
    until: datetime | None = None
    kind: ClassVar[str] = "iso8601"

    def __post_init__(self) -> None:
        if sum(part is not None for part in (self.start, self.duration, self.end)) != 2:
            raise ValueError("a repeating interval needs exactly two of start, duration and end")
        if self.start is None and self.count is None:
            raise ValueError("an unbounded repeating interval needs a start")

    @property
    def recurring(self) -> bool:
        return self.count is None or self.count > 1

    def first_fire(self, now: datetime) -> datetime | None:
        """The first fire at or after ``now``; None when every fire is in the past."""
        return self.next_fire_after(utc(now) - MILLISECOND)

    def next_fire_after(self, instant: datetime) -> datetime | None:
        fire = self._next_in_interval(utc(instant))
        return None if fire is None or (self.until is not None and fire > self.until) else fire

    def _next_in_interval(self, t: datetime) -> datetime | None:
        if self.start is None:
            return self._next_counting_back(t)
        step = self._step
        if t < self.start:
            k = 0
        elif isinstance(step, timedelta):
            k = (t - self.start) // step + 1
        else:
            k = max(0, (t - self.start) // _approximate(step))
            while k > 0 and self._forward_after(k - 1, t):
                k -= 1
            while not self._forward_after(k, t):
                k += 1
        if self.count is not None and k >= self.count:
            return None
        return self._forward(k)

    def to_dict(self) -> dict[str, Any]:
        count = "" if self.count is None else str(self.count)
        parts = [
            self._format(self.start) if self.start is not None else None,
            isodate.duration_isoformat(self.duration) if self.duration is not None else None,
            self._format(self.end) if self.end is not None else None,
        ]
        out: dict[str, Any] = {"iso8601": "/".join([f"R{count}", *(p for p in parts if p is not None)])}
        if self.until is not None:
            out["end"] = rfc3339(self.until)
        return out

    # --- fires --------------------------------------------------------------------------------------

    @property
    def _step(self) -> Any:
        """The duration, or for ``R<n>/<start>/<end>`` the span from start to end."""
        if self.duration is not None:
            return self.duration
        assert self.start is not None and self.end is not None
        return self.end - self.start

    def _forward(self, k: int) -> datetime | None:
        """Fire k counting from the start, or None beyond year 9999."""
        assert self.start is not None
        return self._shift(self.start, self._step, k)

    def _forward_after(self, k: int, t: datetime) -> bool:
        fire = self._forward(k)
        return fire is None or fire > t  # None: after year 9999, so after t

    def _back(self, j: int) -> datetime | None:
        """The fire j durations before the end, or None before year 1."""
        assert self.end is not None
        return self._shift(self.end, self.duration, -j)

    def _back_after(self, j: int, t: datetime) -> bool:
        fire = self._back(j)
        return fire is not None and fire > t  # None: before year 1, so not after t

    def _shift(self, anchor: datetime, step: Any, k: int) -> datetime | None:
        try:
            if isinstance(step, timedelta):
                return anchor + k * step
            return utc(anchor.astimezone(timezone(self.offset)) + step * k)
        except (OverflowError, ValueError):  # out of datetime's years 1-9999
            return None

    def _next_counting_back(self, t: datetime) -> datetime | None:
        """``R<n>/<duration>/<end>``: the fires are end - j * duration for j in [0, n)."""
        assert self.end is not None and self.count is not None
        if t >= self.end:
            return None
        step = self.duration
        if isinstance(step, timedelta):
            # the largest j with end - j * step > t, i.e. j * step < end - t (all are whole milliseconds)
            j = min(self.count - 1, (self.end - t - MILLISECOND) // step)
            return self.end - j * step
        j = min(self.count - 1, (self.end - t) // _approximate(step))
        while j > 0 and not self._back_after(j, t):
            j -= 1
        while j < self.count - 1 and self._back_after(j + 1, t):
            j += 1
        return self._back(j)

    def _format(self, instant: datetime) -> str:
        if not self.offset:
            return rfc3339(instant)
        return instant.astimezone(timezone(self.offset)).isoformat(timespec="milliseconds")


def _approximate(duration: Any) -> timedelta:
    months = int(duration.years) * 12 + int(duration.months)
    fixed: timedelta = duration.tdelta
    return months * _AVERAGE_MONTH + fixed


def parse_repeating_interval(value: Any, path: str) -> RepeatingInterval:
    """Parse ``R<n>/<start>/<duration>``, ``R<n>/<duration>/<end>`` or ``R<n>/<start>/<end>``."""
    if not isinstance(value, str):
        raise InvalidField(path, f"must be a string, e.g. R5/2026-11-22T10:00:00Z/PT1H; {_FORMS}")
    parts = value.strip().split("/")
    repeats = _REPEATS.fullmatch(parts[0])
    if len(parts) != 3 or repeats is None:
        raise InvalidField(path, f"not an ISO 8601 repeating interval: {value!r}; {_FORMS}")
    count = int(repeats[1]) if repeats[1] else None
    if count == 0:
        raise InvalidField(path, "a repeat count of zero never fires")
    first_is_duration, second_is_duration = (_is_duration(part) for part in parts[1:])
    if first_is_duration and second_is_duration:
        raise InvalidField(path, f"needs a start or an end besides the duration; {_FORMS}")
    if first_is_duration:
        if count is None:
            raise InvalidField(path, "an unbounded repeat (R/...) needs a start: use R/<start>/<duration>")
        duration = _parse_duration(parts[1], path)
        end = _parse_instant(parts[2], path, "end")
        return RepeatingInterval(count, duration=duration, end=utc(end), offset=_calendar_offset(duration, end))
    start = _parse_instant(parts[1], path, "start")
    if second_is_duration:
        duration = _parse_duration(parts[2], path)
        return RepeatingInterval(count, start=utc(start), duration=duration, offset=_calendar_offset(duration, start))
    end = _parse_instant(parts[2], path, "end")
    span = utc(end) - utc(start)
    if span <= timedelta(0):
        raise InvalidField(path, "the end must be after the start")
    if span < MIN_INTERVAL:
        raise InvalidField(path, f"start and end must be at least {int(MIN_INTERVAL.total_seconds())} seconds apart")
    return RepeatingInterval(count, start=utc(start), end=utc(end))


def _parse_instant(text: str, path: str, role: str) -> datetime:
    """An RFC 3339 date-time with the offset it was written with (errors say which part is wrong)."""
    try:
        return parse_aware(text, path)
    except InvalidField as bad:
        raise InvalidField(path, f"{role}: {bad.reason}") from None


def _is_duration(part: str) -> bool:
    return part.lstrip("+-").upper().startswith("P")


def _parse_duration(text: str, path: str) -> Any:
    """A positive duration: a ``timedelta`` of at least ``MIN_INTERVAL``, or an ``isodate.Duration`` with
    whole years and months."""
    try:
        parsed = isodate.parse_duration(text)
    except (isodate.ISO8601Error, ValueError, OverflowError):
        raise InvalidField(path, f"not an ISO 8601 duration: {text!r} (e.g. PT1H, P1D, P1M)") from None
    if not isinstance(parsed, timedelta) and not parsed.years and not parsed.months:
        parsed = parsed.tdelta  # e.g. P0M1D: no calendar part after all
    fixed = parsed if isinstance(parsed, timedelta) else parsed.tdelta
    if fixed % MILLISECOND:
        raise InvalidField(path, "the duration must be a whole number of milliseconds")
    if isinstance(parsed, timedelta):
        if parsed <= timedelta(0):
            raise InvalidField(path, "the duration must be positive")
        if parsed < MIN_INTERVAL:
            raise InvalidField(path, f"the duration must be at least {int(MIN_INTERVAL.total_seconds())} seconds")
        return parsed
    if parsed.years % 1 or parsed.months % 1:
        raise InvalidField(path, "years and months must be whole numbers")
    if parsed.years < 0 or parsed.months < 0 or fixed < timedelta(0):
        raise InvalidField(path, "the duration must be positive")
    return parsed


def _calendar_offset(duration: Any, written: datetime) -> timedelta:
    """The offset calendar arithmetic happens in: the one the anchor was written with, for calendar durations."""
    if isinstance(duration, timedelta):
        return timedelta(0)
    return written.utcoffset() or timedelta(0)
