"""Cron properties: random expressions, zones and instants (biased towards clock changes), checked against
cronsim, an independent implementation of Debian's cron rules (daylight saving included), and a sweep of the
next clock changes of zones around the world.

The expressions are generated together with the values they match; the day fields avoid ``*/n`` when both
are restricted (Debian then reads them with "and", this project with "or": docs/schedules.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from jobrunner.domain.schedules import Cron, DstPolicy, schedule_from_dict
from jobrunner.domain.schedules.cron import AT_FIXED_TIMES, ON_THE_CLOCK

MINUTE = timedelta(minutes=1)
#: How far before t the reference starts (more than any clock change), so it starts outside a repeated hour.
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
    day_text: str = "*"
    weekday_text: str = "*"

    def days_read_alike(self) -> bool:
        """Debian reads the day fields with "and" when either starts with ``*``; this project, when either
        is a bare ``*``. The two agree unless both are restricted and one is a ``*/n``."""
        both = self.days_restricted and self.weekdays_restricted
        return not (both and (self.day_text.startswith("*") or self.weekday_text.startswith("*")))

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
        days_restricted=day[0] != "*", weekdays_restricted=weekday[0] != "*", day_text=day[0],
        weekday_text=weekday[0],
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


#: Zones where cronsim 2.8 misplaces follow-the-clock fires next to a clock change: by a half hour after
#: Australia/Lord_Howe's 30-minute changes (``* 0 * * *`` asked from 2024-04-06T15:05Z: 00:30 local on the
#: 8th, not 00:00), and Pacific/Chatham's changes at 02:45/03:45 local (``*/15 */2 * * *`` leaves out
#: 02:45 of the repeated hour, 2027-04-03T14:00Z). For follow-the-clock expressions in them the reference
#: is the rule itself: every real minute whose local time matches (cronsim's matcher, minute by minute).
CRONSIM_MISPLACES = frozenset({"Australia/Lord_Howe", "Pacific/Chatham"})
#: How far the minute-by-minute walk looks ahead.
WALK = timedelta(days=2)


def for_cronsim(text: str) -> str:
    """The same expression for cronsim 2.8, which reads a one-value range with a step, ``a-a/n``, as ``a/n``
    (from a to the end): written ``a``."""
    return re.sub(r"\b(\d+)-\1/\d+\b", r"\1", text)


def follows_clock(text: str) -> bool:
    return text.split()[0].startswith("*") or text.split()[1].startswith("*")


def walked(text: str, zone: ZoneInfo, after: datetime, until: datetime) -> list[datetime]:
    """The real minutes in (after, until] whose wall-clock time in ``zone`` matches, by cronsim's matcher
    applied to one minute at a time (in UTC, where it has no daylight saving to handle)."""
    found = []
    minute = after.replace(second=0, microsecond=0) + MINUTE
    while minute <= until:
        wall = minute.astimezone(zone).replace(tzinfo=None)
        if next(CronSim(text, wall - timedelta(seconds=1))) == wall:
            found.append(minute)
        minute += MINUTE
    return found


def debian_fires(text: str, zone: ZoneInfo, after: datetime, until: datetime) -> list[datetime]:
    """Debian cron's fires in (after, until], by cronsim (iterated from ``LOOKBACK`` before ``after``)."""
    text = for_cronsim(text)
    if follows_clock(text) and str(zone) in CRONSIM_MISPLACES:
        return walked(text, zone, after, until)
    found = []
    for fire in CronSim(text, (after - LOOKBACK).astimezone(zone)):
        instant = fire.astimezone(UTC)
        if instant > until:
            break
        if instant > after:
            found.append(instant)
    return found


def debian_next(text: str, zone: ZoneInfo, t: datetime) -> datetime | None:
    """Debian cron's first fire after ``t``; None when the reference sees none within ``WALK``."""
    text = for_cronsim(text)
    if follows_clock(text) and str(zone) in CRONSIM_MISPLACES:
        return next(iter(walked(text, zone, t, t + WALK)), None)
    for fire in CronSim(text, (t - LOOKBACK).astimezone(zone)):
        instant = fire.astimezone(UTC)
        if instant > t:
            return instant
    return None


def our_fires(text: str, zone: str, after: datetime, until: datetime) -> list[datetime]:
    """This project's fires in (after, until], each from the one before, as the scanner finds them."""
    schedule = schedule_from_dict({"cron": text, "timezone": zone})
    found: list[datetime] = []
    t: datetime | None = after
    while (t := schedule.next_fire_after(t)) is not None and t <= until:
        found.append(t)
    return found


@settings(max_examples=300, deadline=None)
@given(expression=expressions(), zoned=zoned_instants())
def test_next_fire_after_is_debian_crons_next_fire(expression: Expression, zoned: tuple[str, datetime]) -> None:
    assume(not expression.never_fires() and expression.days_read_alike())
    zone_name, t = zoned
    schedule = schedule_from_dict({"cron": expression.text, "timezone": zone_name})
    fire = schedule.next_fire_after(t)
    assert fire is not None and fire > t
    assert fire.second == 0 and fire.microsecond == 0
    expected = debian_next(expression.text, ZoneInfo(zone_name), t)
    assert fire == expected or (expected is None and fire > t + WALK)
    # a fire is its own first fire (at or after), and the next one is strictly later
    assert schedule.first_fire(fire) == fire
    following = schedule.next_fire_after(fire)
    assert following is None or following > fire


#: Zones with daylight saving in both hemispheres, with 30- and 45-minute offsets and 30-minute changes,
#: changes at midnight, and zones without changes (whose fires the sweep checks all the same).
SWEEP_ZONES = (
    "Europe/Paris", "Europe/London", "Europe/Dublin", "Europe/Helsinki", "Europe/Chisinau", "America/New_York",
    "America/Chicago", "America/Denver", "America/Los_Angeles", "America/Anchorage", "America/Halifax",
    "America/St_Johns", "America/Havana", "America/Santiago", "America/Asuncion", "America/Godthab",
    "America/Scoresbysund", "Atlantic/Azores", "Africa/Cairo", "Asia/Beirut", "Asia/Jerusalem", "Asia/Gaza",
    "Australia/Sydney", "Australia/Adelaide", "Australia/Lord_Howe", "Australia/Hobart", "Pacific/Auckland",
    "Pacific/Chatham", "Pacific/Norfolk", "Pacific/Easter", "Antarctica/Troll", "Asia/Kolkata",
    "Asia/Kathmandu", "Australia/Eucla", "Asia/Tehran", "UTC",
)
SWEEP_EXPRESSIONS = (
    "30 * * * *", "*/30 * * * *", "*/15 */2 * * *", "*/5 * * * *", "0 * * * *", "* * * * *", "45 */3 * * *",
    "30 2 * * *", "0,30 1-3 * * *", "15 0 * * *", "0 12 * * *", "45 1,2 * * SUN", "0 0 * * *",
)


@pytest.mark.parametrize("zone_name", SWEEP_ZONES)
def test_fires_around_each_of_the_next_four_clock_changes_are_debian_crons(zone_name: str) -> None:
    zone = ZoneInfo(zone_name)
    changes = [c for c in clock_changes(zone_name) if c > datetime(2026, 11, 24, tzinfo=UTC)][:4]
    # around the changes, or a few days of a zone that has none
    windows = [(c - timedelta(hours=4), c + timedelta(hours=4)) for c in changes] or [
        (datetime(2027, 3, 1, tzinfo=UTC), datetime(2027, 3, 4, tzinfo=UTC))]
    for text in SWEEP_EXPRESSIONS:
        for after, until in windows:
            assert our_fires(text, zone_name, after, until) == debian_fires(text, zone, after, until), (
                f"{text!r} in {zone_name} between {after:%Y-%m-%d %H:%M} and {until:%Y-%m-%d %H:%M} UTC")


def offset(instant: datetime, zone: ZoneInfo) -> timedelta:
    return instant.astimezone(zone).utcoffset() or timedelta(0)


@settings(max_examples=100, deadline=None)
@given(expression=expressions(), zone=st.sampled_from(ZONES))
def test_round_trip(expression: Expression, zone: str) -> None:
    assume(not expression.never_fires())
    schedule = schedule_from_dict({"cron": expression.text, "timezone": zone})
    assert schedule == Cron(expression.text, zone)
    assert schedule_from_dict(schedule.to_dict()) == schedule


# -- a job's own daylight-saving policy (``dst``) -----------------------------------------------------------

POLICIES = [DstPolicy(gap, fold) for gap in DstPolicy.GAPS for fold in DstPolicy.FOLDS]
POLICY_ZONES = ("Europe/Paris", "America/New_York", "Australia/Sydney", "Australia/Lord_Howe", "Pacific/Chatham",
                "America/St_Johns")
POLICY_EXPRESSIONS = ("30 * * * *", "*/15 */2 * * *", "30 2 * * *", "0,30 1-3 * * *", "45 1,2 * * SUN",
                      "15 0 * * *", "0 3 * * *")


def policy_fires(text: str, zone: ZoneInfo, after: datetime, until: datetime, policy: DstPolicy) -> list[datetime]:
    """The rule of a policy, applied minute by minute: each real minute in (after, until] whose local time
    matches (cronsim's matcher) fires, unless its local time occurs twice and the policy keeps the other
    occurrence; with ``gap == "shift"``, a change that skips a matching local time fires at the change."""
    found = set()
    minute = after.replace(second=0, microsecond=0) + MINUTE
    while minute <= until:
        local = minute.astimezone(zone)  # fold=1 marks the second occurrence of a repeated local time
        wall = local.replace(tzinfo=None)
        if next(CronSim(text, wall - timedelta(seconds=1))) == wall:
            repeated = local.replace(fold=0).utcoffset() != local.replace(fold=1).utcoffset()
            if not repeated or policy.fold == "both" or local.fold == ("first", "second").index(policy.fold):
                found.add(minute)
        minute += MINUTE
    if policy.gap == "shift":
        for change in clock_changes(str(zone)):
            before, after_change = offset(change - timedelta(seconds=1), zone), offset(change, zone)
            if after < change <= until and after_change > before:
                skipped = (change + before).replace(tzinfo=None)  # the local times never shown, minute by minute
                while skipped < (change + after_change).replace(tzinfo=None):
                    if next(CronSim(text, skipped - timedelta(seconds=1))) == skipped:
                        found.add(change)
                        break
                    skipped += MINUTE
    return sorted(found)


@pytest.mark.parametrize("zone_name", POLICY_ZONES)
def test_each_daylight_saving_policy_fires_as_its_rule_says_around_the_next_clock_changes(zone_name: str) -> None:
    zone = ZoneInfo(zone_name)
    changes = [c for c in clock_changes(zone_name) if c > datetime(2026, 11, 24, tzinfo=UTC)][:2]
    for text in POLICY_EXPRESSIONS:
        for change in changes:
            after, until = change - timedelta(hours=3), change + timedelta(hours=3)
            for policy in POLICIES:
                schedule = Cron(text, zone_name, dst=policy)
                ours, t = [], schedule.next_fire_after(after)
                while t is not None and t <= until:
                    ours.append(t)
                    t = schedule.next_fire_after(t)
                assert ours == policy_fires(text, zone, after, until, policy), (
                    f"{text!r} in {zone_name} around {change:%Y-%m-%d %H:%M}Z with {policy}")


@pytest.mark.parametrize("zone_name", SWEEP_ZONES)
def test_the_policy_a_job_gives_explicitly_as_debian_crons_fires_as_debian_cron(zone_name: str) -> None:
    zone = ZoneInfo(zone_name)
    changes = [c for c in clock_changes(zone_name) if c > datetime(2026, 11, 24, tzinfo=UTC)][:2]
    for text in SWEEP_EXPRESSIONS:
        debian = ON_THE_CLOCK if follows_clock(text) else AT_FIXED_TIMES
        schedule = Cron(text, zone_name, dst=debian)
        for change in changes:
            after, until = change - timedelta(hours=4), change + timedelta(hours=4)
            ours, t = [], schedule.next_fire_after(after)
            while t is not None and t <= until:
                ours.append(t)
                t = schedule.next_fire_after(t)
            assert ours == debian_fires(text, zone, after, until), f"{text!r} in {zone_name} with {debian}"


@settings(max_examples=100, deadline=None)
@given(expression=expressions(), zone=st.sampled_from(ZONES), gap=st.sampled_from(DstPolicy.GAPS),
       fold=st.sampled_from(DstPolicy.FOLDS))
def test_a_policy_round_trips(expression: Expression, zone: str, gap: str, fold: str) -> None:
    assume(not expression.never_fires())
    schedule = schedule_from_dict({"cron": expression.text, "timezone": zone, "dst": {"gap": gap, "fold": fold}})
    assert schedule == Cron(expression.text, zone, dst=DstPolicy(gap, fold))
    assert schedule_from_dict(schedule.to_dict()) == schedule
