"""The reference's own schedules: read from the JSON a user sends, their fires found by plain arithmetic and brute
force, with no code of the product's (its parsing, ``next_fire_after``, croniter) in between.

- ``at``: one fire, at that instant.
- ``every`` (``PT<n>S``): ``start + k * period`` for k = 0, 1, ...; without a start, it starts one period after
  the request. A ``count`` keeps the first that many fires at or after the request: the last of them ends it.
- ``iso8601`` (``R<n>/<start>/PT<s>S``): n fires, ``start + k * period`` for k < n.
- ``cron``: every whole minute whose wall-clock time in the job's zone matches the five fields, tested one
  minute after another (a ``count`` as for ``every``). The model's dates have no daylight-saving change, and
  the reference does not model one: a cron fire at another UTC offset than the model's start fails loudly.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo

if TYPE_CHECKING:
    from collections.abc import Iterator

MINUTE = timedelta(minutes=1)
#: The model's start: cron fires are read at the UTC offset their zone has then.
START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
#: How far ahead a cron search looks for its next fire before it concludes there is none.
CRON_SEARCH = timedelta(days=366)
#: Each cron field's values, and whether ``*`` names them all: minute, hour, day of month, month, day of week.
CRON_FIELDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))


def utc_instant(text: str) -> datetime:
    """An RFC 3339 instant (``...Z`` or an offset), as an aware UTC datetime."""
    parsed = datetime.fromisoformat(text)
    assert parsed.tzinfo is not None, f"an instant without an offset: {text}"
    return parsed.astimezone(UTC)


def seconds(duration: str) -> timedelta:
    """``PT<n>S``, the only durations the model writes."""
    assert duration.startswith("PT") and duration.endswith("S"), f"a duration the reference does not read: {duration}"
    return timedelta(seconds=int(duration[2:-1]))


@dataclass(frozen=True)
class Timetable:
    """A schedule as the reference reads it: ``fires_from`` is its fires in order, ``is_fire`` one of them."""

    kind: Literal["at", "every", "iso8601", "cron"]
    #: The JSON it was read from (for messages).
    text: dict[str, Any]
    #: at, every, iso8601: the first fire; then one every ``period``.
    first: datetime | None = None
    period: timedelta | None = None
    #: cron: the values each field matches, and whether its day-of-month and day-of-week fields were ``*``.
    cron: tuple[frozenset[int], ...] = ()
    any_day: tuple[bool, bool] = (True, True)
    zone: str = "UTC"
    #: No fire before ``start`` (cron with a count: the request) nor after ``last``.
    start: datetime | None = None
    last: datetime | None = None
    #: How many fires it keeps (every and cron with a count, iso8601's R<n>).
    count: int | None = None
    _zone: ZoneInfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_zone", ZoneInfo(self.zone))

    def fires_from(self, low: datetime) -> Iterator[datetime]:
        """Its fires at or after ``low``, in order (lazily: a recurring one may have no end)."""
        if self.kind == "cron":
            yield from self._cron_fires(low)
            return
        assert self.first is not None
        if self.period is None:  # at
            fires: Iterator[datetime] = iter([self.first])
        else:
            step = self.period
            ahead = max(0, -((self.first - low) // step))  # the first k with first + k * step >= low
            fires = (self.first + k * step for k in itertools.count(ahead))
        for fire in fires:
            if self.last is not None and fire > self.last:
                return
            if fire >= low:
                yield fire

    def is_fire(self, t: datetime) -> bool:
        if (self.start is not None and t < self.start) or (self.last is not None and t > self.last):
            return False
        if self.kind == "cron":
            return t.second == 0 and t.microsecond == 0 and self._matches(t)
        assert self.first is not None
        if self.period is None:
            return t == self.first
        return t >= self.first and (t - self.first) % self.period == timedelta(0)

    @property
    def recurring(self) -> bool:
        """Whether it may fire more than once (what a tenant holds against ``jobs_held``): an ``every`` or a
        ``cron`` whatever its count, an ``iso8601`` of more than one repetition."""
        if self.kind == "iso8601":
            return self.count is None or self.count > 1
        return self.kind != "at"

    def most_in_a_minute(self) -> int:
        """The most fires a recurring schedule has in one minute: a period shorter than a minute fits that many,
        rounded up; a cron at most one; never more than its count."""
        fires = math.ceil(MINUTE / self.period) if self.period is not None else 1
        return min(fires, self.count) if self.count is not None else fires

    def __str__(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in self.text.items())

    # -- cron, by brute force ------------------------------------------------------------------------------

    def _cron_fires(self, low: datetime) -> Iterator[datetime]:
        if self.start is not None:
            low = max(low, self.start)
        t = low.replace(second=0, microsecond=0)
        if t < low:
            t += MINUTE
        for _ in range(int(CRON_SEARCH / MINUTE)):
            if self.last is not None and t > self.last:
                return
            if self._matches(t):
                yield t
            t += MINUTE

    def _matches(self, t: datetime) -> bool:
        wall = t.astimezone(self._zone)
        assert wall.utcoffset() == START.astimezone(self._zone).utcoffset(), (
            f"{t} is at another UTC offset in {self.zone} than the model's start: the reference models no "
            "daylight-saving change")
        minutes, hours, days, months, weekdays = self.cron
        weekday = (wall.weekday() + 1) % 7  # cron counts from Sunday (0, and 7)
        day_ok, weekday_ok = wall.day in days, weekday in weekdays or (weekday == 0 and 7 in weekdays)
        any_day, any_weekday = self.any_day
        # Both day fields restricted: either matches (cron's rule); otherwise the restricted one must.
        on_day = (day_ok or weekday_ok) if not (any_day or any_weekday) else (day_ok and weekday_ok)
        return wall.minute in minutes and wall.hour in hours and wall.month in months and on_day


def cron_field(text: str, low: int, high: int) -> frozenset[int]:
    """One field: ``*``, ``a``, ``a-b``, each with an optional ``/step``, separated by commas (numbers only)."""
    values: set[int] = set()
    for item in text.split(","):
        span, _, step = item.partition("/")
        if span == "*":
            first, last = low, high
        else:
            first_text, _, last_text = span.partition("-")
            first = int(first_text)
            last = int(last_text) if last_text else (high if step else first)
        assert low <= first <= last <= high, f"a cron field the reference does not read: {text}"
        values.update(range(first, last + 1, int(step) if step else 1))
    return frozenset(values)


def timetable(data: dict[str, Any], at: datetime) -> Timetable:
    """The schedule a user sent as ``data`` (its JSON form), requested at ``at``."""
    if "at" in data:
        return Timetable("at", data, first=utc_instant(data["at"]))
    if "iso8601" in data:
        repeats, start, duration = data["iso8601"].split("/")
        assert repeats.startswith("R") and repeats[1:], f"an interval the reference does not read: {data}"
        repeat, first, period = int(repeats[1:]), utc_instant(start), seconds(duration)
        return Timetable("iso8601", data, first=first, period=period, last=first + (repeat - 1) * period, count=repeat)
    count: int | None = data.get("count")
    if "every" in data:
        period = seconds(data["every"])
        first = utc_instant(data["start"]) if "start" in data else at + period
        bounded = Timetable("every", data, first=first, period=period, count=count)
    else:
        fields = data["cron"].split()
        assert len(fields) == 5, f"a cron expression the reference does not read: {data}"
        matched = tuple(cron_field(text, *span) for text, span in zip(fields, CRON_FIELDS, strict=True))
        bounded = Timetable("cron", data, cron=matched,
                            any_day=(fields[2] == "*", fields[4] == "*"), zone=data.get("timezone", "UTC"),
                            start=at if count is not None else None, count=count)
    if count is None:
        return bounded
    kept = list(itertools.islice(bounded.fires_from(at), count))  # the first ``count`` from the request on
    return Timetable(bounded.kind, data, first=bounded.first, period=bounded.period, cron=bounded.cron,
                     any_day=bounded.any_day, zone=bounded.zone, start=bounded.start,
                     last=kept[-1] if len(kept) == count else None, count=count)
