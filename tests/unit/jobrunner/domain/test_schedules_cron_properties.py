"""Cron properties: random expressions, zones and instants (biased towards clock changes), checked against a
brute-force reference that walks the wall clock minute by minute.

The reference restates the policy in its simplest form: the fires are the instants zoneinfo gives each
matching wall-clock minute with ``fold=0``, and the next fire after t is the smallest of them after t.
It shares no code with the implementation: the expressions are generated together with the values they
match.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from jobrunner.domain.schedules import Cron, schedule_from_dict

MINUTE = timedelta(minutes=1)
#: How far ahead the reference looks; a next fire further away is only checked to be that far away.
WINDOW = timedelta(days=2)
#: More than any clock change in the zones below, so the reference sees times shifted past t.
LOOKBACK = timedelta(hours=3)
ZONES = (
    "UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "America/Sao_Paulo", "Asia/Kolkata",
    "Pacific/Chatham", "Europe/Dublin",
)
MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


@dataclass(frozen=True)
class Expression:
    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # Sunday = 0
    days_restricted: bool
    weekdays_restricted: bool

    def never_fires(self) -> bool:
        longest = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
        only_days = self.days_restricted and not self.weekdays_restricted
        return only_days and not any(d <= longest[m - 1] for m in self.months for d in self.days)

    def matches(self, wall: datetime) -> bool:
        if wall.minute not in self.minutes or wall.hour not in self.hours or wall.month not in self.months:
            return False
        day = wall.day in self.days
        weekday = (wall.weekday() + 1) % 7 in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return day or weekday
        return day and weekday


@st.composite
def field(
    draw: st.DrawFn, low: int, high: int, names: tuple[str, ...] = (), first_name: int = 0, size: int | None = None
) -> tuple[str, set[int]]:
    """(text, values) of one cron field: ``*`` is ``size`` values from ``low`` (day-of-week: 0-6, yet 7 is
    allowed too, as Sunday)."""
    size = size or high - low + 1
    if draw(st.integers(0, 3)) == 0:
        return "*", set(range(low, low + size))

    def token(v: int) -> str:
        if names and first_name <= v < first_name + len(names) and draw(st.booleans()):
            name = names[v - first_name]
            return name.lower() if draw(st.booleans()) else name
        return str(v)

    texts, values = [], set()
    for _ in range(draw(st.integers(1, 3))):
        a, b = sorted((draw(st.integers(low, high)), draw(st.integers(low, high))))
        step = draw(st.integers(1, size - 1))
        kind = draw(st.sampled_from(("single", "range", "star-step", "range-step")))
        if kind == "single":
            texts.append(token(a))
            values.add(a)
        elif kind == "range":
            texts.append(f"{token(a)}-{token(b)}")
            values.update(range(a, b + 1))
        elif kind == "star-step":
            texts.append(f"*/{step}")
            values.update(range(low, low + size, step))
        else:
            texts.append(f"{a}-{b}/{step}")
            values.update(range(a, b + 1, step))
    return ",".join(texts), values


@st.composite
def expressions(draw: st.DrawFn) -> Expression:
    minute = draw(field(0, 59))
    hour = draw(field(0, 23))
    # days and months are '*' half the time, so the next fire is usually inside the reference's window
    day = draw(field(1, 31)) if draw(st.booleans()) else ("*", set(range(1, 32)))
    month = draw(field(1, 12, MONTHS, 1)) if draw(st.booleans()) else ("*", set(range(1, 13)))
    weekday = draw(field(0, 7, DAYS, 0, size=7)) if draw(st.booleans()) else ("*", set(range(7)))
    text = " ".join(t for t, _ in (minute, hour, day, month, weekday))
    return Expression(
        text=text, minutes=frozenset(minute[1]), hours=frozenset(hour[1]), days=frozenset(day[1]),
        months=frozenset(month[1]), weekdays=frozenset(v % 7 for v in weekday[1]),
        days_restricted=day[0] != "*", weekdays_restricted=weekday[0] != "*",
    )


@cache
def clock_changes(zone: str) -> tuple[datetime, ...]:
    """The instants the zone's UTC offset changes in 2024-2030 (to the second)."""
    tz = ZoneInfo(zone)
    found = []
    t = datetime(2024, 1, 1, tzinfo=UTC)
    while t < datetime(2030, 1, 1, tzinfo=UTC):
        later = t + timedelta(hours=6)
        if t.astimezone(tz).utcoffset() != later.astimezone(tz).utcoffset():
            low, high = t, later
            while high - low > timedelta(seconds=1):
                middle = low + (high - low) / 2
                if middle.astimezone(tz).utcoffset() == low.astimezone(tz).utcoffset():
                    low = middle
                else:
                    high = middle
            found.append(high.replace(microsecond=0))
        t = later
    return tuple(found)


@st.composite
def zoned_instants(draw: st.DrawFn) -> tuple[str, datetime]:
    """A zone and an instant at millisecond precision, often within hours of one of its clock changes."""
    zone = draw(st.sampled_from(ZONES))
    changes = clock_changes(zone)
    ms = draw(st.integers(-4 * 3600 * 1000, 4 * 3600 * 1000))
    if bool(changes) and draw(st.booleans()):
        return zone, draw(st.sampled_from(changes)) + timedelta(milliseconds=ms)
    day = draw(st.integers(0, 6 * 365))
    return zone, datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=day, milliseconds=ms)


def offset(instant: datetime, zone: ZoneInfo) -> timedelta:
    return instant.astimezone(zone).utcoffset() or timedelta(0)


def fire_of(wall: datetime, zone: ZoneInfo) -> datetime:
    return wall.replace(tzinfo=zone, fold=0).astimezone(UTC)


def reference_next(expression: Expression, zone: ZoneInfo, t: datetime) -> datetime | None:
    """The smallest fire after t among the wall-clock minutes from t - LOOKBACK to t + WINDOW."""
    wall = t.astimezone(zone).replace(tzinfo=None, second=0, microsecond=0) - LOOKBACK
    end = wall + LOOKBACK + WINDOW
    best = None
    while wall <= end:
        if wall.hour not in expression.hours or not expression.matches(wall.replace(minute=min(expression.minutes))):
            wall = wall.replace(minute=0) + 60 * MINUTE  # nothing this hour: skip it
            continue
        if expression.matches(wall):
            fire = fire_of(wall, zone)
            if fire > t and (best is None or fire < best):
                best = fire
        wall += MINUTE
    return best


@settings(max_examples=200, deadline=None)
@given(expression=expressions(), zoned=zoned_instants())
def test_next_fire_after_is_the_earliest_fire_after_t(expression: Expression, zoned: tuple[str, datetime]) -> None:
    assume(not expression.never_fires())
    zone_name, t = zoned
    zone = ZoneInfo(zone_name)
    schedule = schedule_from_dict({"cron": expression.text, "timezone": zone_name})
    fire = schedule.next_fire_after(t)
    assert fire is not None and fire > t
    assert fire.second == 0 and fire.microsecond == 0
    # it is the fire of a matching wall-clock minute: its own, or the skipped one it was shifted from
    wall = fire.astimezone(zone).replace(tzinfo=None)
    shift = offset(fire, zone) - offset(fire - timedelta(days=1), zone)
    assert (expression.matches(wall) and fire_of(wall, zone) == fire) or (
        expression.matches(wall - shift) and fire_of(wall - shift, zone) == fire
    )
    # and nothing fires in between
    expected = reference_next(expression, zone, t)
    horizon = t + WINDOW - LOOKBACK  # beyond this the reference may not have seen every candidate
    if expected is not None and expected <= horizon:
        assert fire == expected
    else:
        assert fire > horizon and (expected is None or fire <= expected)
    # a fire is its own first fire (at or after), and the next one is strictly later
    assert schedule.first_fire(fire) == fire
    following = schedule.next_fire_after(fire)
    assert following is None or following > fire


@settings(max_examples=100, deadline=None)
@given(expression=expressions(), zone=st.sampled_from(ZONES))
def test_round_trip(expression: Expression, zone: str) -> None:
    assume(not expression.never_fires())
    schedule = schedule_from_dict({"cron": expression.text, "timezone": zone})
    assert schedule == Cron(expression.text, zone)
    assert schedule_from_dict(schedule.to_dict()) == schedule
