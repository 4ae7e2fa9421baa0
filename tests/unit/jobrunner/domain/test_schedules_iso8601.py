"""ISO 8601 repeating intervals: the three forms, R<n> = n fires, calendar durations without drift, O(1)
next fires however many repetitions lie in the past, exact round trips, and errors naming the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import isodate
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.schedules import RepeatingInterval, schedule_from_dict
from jobrunner.domain.time import rfc3339, utc

if TYPE_CHECKING:
    from jobrunner.domain.schedules import Schedule

MS = timedelta(milliseconds=1)
HOUR = timedelta(hours=1)
LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)
T0 = datetime(2026, 11, 22, 10, tzinfo=UTC)


def iso(spec: str) -> Schedule:
    return schedule_from_dict({"iso8601": spec})


def all_fires(schedule: Schedule, now: datetime = LONG_AGO, limit: int = 20) -> list[str]:
    """The fires of a job submitted at ``now``, as the scanner finds them (each from the one before)."""
    found: list[str] = []
    fire = schedule.first_fire(now)
    while fire is not None and len(found) < limit:
        found.append(rfc3339(fire))
        fire = schedule.next_fire_after(fire)
    return found


# --- the three forms ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("R5/2026-11-22T10:00:00Z/PT1H", ["10:00", "11:00", "12:00", "13:00", "14:00"]),
        ("R3/PT1H/2026-11-22T12:00:00Z", ["10:00", "11:00", "12:00"]),
        ("R2/2026-11-22T10:00:00Z/2026-11-22T12:00:00Z", ["10:00", "12:00"]),
        ("R4/2026-11-22T10:00:00Z/2026-11-22T10:30:00Z", ["10:00", "10:30", "11:00", "11:30"]),
        ("R1/2026-11-22T10:00:00Z/PT1H", ["10:00"]),
        ("R1/PT1H/2026-11-22T10:00:00Z", ["10:00"]),
        ("R3/2026-11-22T11:00:00+01:00/PT30M", ["10:00", "10:30", "11:00"]),
    ],
)
def test_r_n_means_n_fires(spec: str, expected: list[str]) -> None:
    assert all_fires(iso(spec)) == [f"2026-11-22T{hm}:00.000Z" for hm in expected]


def test_an_unbounded_repeat_goes_on() -> None:
    daily = iso("R/2026-11-22T10:00:00Z/P1D")
    assert all_fires(daily, limit=3) == [
        "2026-11-22T10:00:00.000Z", "2026-11-23T10:00:00.000Z", "2026-11-24T10:00:00.000Z",
    ]
    assert daily.next_fire_after(datetime(2036, 1, 1, 10, tzinfo=UTC)) == datetime(2036, 1, 2, 10, tzinfo=UTC)
    assert daily.recurring is True


def test_recurring_is_about_more_than_one_fire() -> None:
    assert iso("R1/2026-11-22T10:00:00Z/PT1H").recurring is False
    assert iso("R1/PT1H/2026-11-22T10:00:00Z").recurring is False
    assert iso("R2/2026-11-22T10:00:00Z/PT1H").recurring is True


def test_next_fire_after_is_strictly_after_and_ends_with_the_last_fire() -> None:
    five = iso("R5/2026-11-22T10:00:00Z/PT1H")
    assert five.next_fire_after(T0 - MS) == T0
    assert five.next_fire_after(T0) == T0 + HOUR
    assert five.next_fire_after(T0 + 3 * HOUR + MS) == T0 + 4 * HOUR
    assert five.next_fire_after(T0 + 4 * HOUR) is None
    back = iso("R3/PT1H/2026-11-22T12:00:00Z")
    assert back.next_fire_after(T0 - timedelta(days=400)) == T0
    assert back.next_fire_after(T0 + HOUR) == T0 + 2 * HOUR
    assert back.next_fire_after(T0 + 2 * HOUR) is None


# --- first fire -----------------------------------------------------------------------------------


def test_first_fire_is_at_or_after_submission_skipping_past_fires() -> None:
    five = iso("R5/2026-11-22T10:00:00Z/PT1H")
    assert five.first_fire(T0 - timedelta(days=1)) == T0
    assert five.first_fire(T0 + HOUR) == T0 + HOUR  # submitted exactly on a fire: that fire
    assert five.first_fire(T0 + HOUR + MS) == T0 + 2 * HOUR
    assert five.first_fire(T0 + 4 * HOUR) == T0 + 4 * HOUR


def test_first_fire_is_none_when_every_fire_is_past() -> None:
    # the service answers 422 "never fires"
    assert iso("R5/2026-11-22T10:00:00Z/PT1H").first_fire(T0 + 4 * HOUR + MS) is None
    assert iso("R3/PT1H/2026-11-22T12:00:00Z").first_fire(T0 + 3 * HOUR) is None
    assert iso("R2/2026-11-22T10:00:00Z/2026-11-22T12:00:00Z").first_fire(T0 + 2 * HOUR + MS) is None


# --- calendar durations ---------------------------------------------------------------------------


def test_months_from_the_31st_use_each_month_last_day_without_drifting() -> None:
    monthly = iso("R/2026-01-31T09:00:00Z/P1M")
    assert [f[:10] for f in all_fires(monthly, limit=6)] == [
        "2026-01-31", "2026-02-28", "2026-03-31", "2026-04-30", "2026-05-31", "2026-06-30",
    ]
    # computed from the start, not from the previous fire: after Feb 28 comes Mar 31, not Mar 28
    assert monthly.next_fire_after(datetime(2026, 2, 28, 9, tzinfo=UTC)) == datetime(2026, 3, 31, 9, tzinfo=UTC)


def test_years_from_february_29() -> None:
    yearly = iso("R/2024-02-29T00:00:00Z/P1Y")
    assert [f[:10] for f in all_fires(yearly, limit=5)] == [
        "2024-02-29", "2025-02-28", "2026-02-28", "2027-02-28", "2028-02-29",
    ]


def test_counting_back_from_an_end_with_months() -> None:
    assert [f[:10] for f in all_fires(iso("R4/P1M/2026-05-31T00:00:00Z"))] == [
        "2026-02-28", "2026-03-31", "2026-04-30", "2026-05-31",
    ]
    # not the same as counting forward from the earliest fire (Feb 28 + P1M is Mar 28)
    assert [f[:10] for f in all_fires(iso("R2/P1M/2026-03-31T00:00:00Z"))] == ["2026-02-28", "2026-03-31"]


def test_a_mixed_calendar_duration_adds_k_months_then_k_days_and_hours() -> None:
    # fire 1: Jan 31 + 1 month = Feb 28, + 1 day 1 hour; fire 2: Jan 31 + 2 months = Mar 31, + 2 days 2 hours
    assert all_fires(iso("R3/2026-01-31T00:00:00Z/P1M1DT1H")) == [
        "2026-01-31T00:00:00.000Z", "2026-03-01T01:00:00.000Z", "2026-04-02T02:00:00.000Z",
    ]


def test_calendar_arithmetic_happens_at_the_offset_the_start_was_written_with() -> None:
    # 08:00 in +09:00 is 23:00 UTC the day before: the last day of each month in +09:00, not in UTC
    tokyo_month_ends = iso("R/2026-01-31T08:00:00+09:00/P1M")
    assert all_fires(tokyo_month_ends, limit=3) == [
        "2026-01-30T23:00:00.000Z", "2026-02-27T23:00:00.000Z", "2026-03-30T23:00:00.000Z",
    ]
    assert tokyo_month_ends.to_dict() == {"iso8601": "R/2026-01-31T08:00:00.000+09:00/P1M"}


def test_with_a_fixed_duration_the_offset_makes_no_difference_and_is_stored_as_utc() -> None:
    spec = iso("R5/2026-11-22T11:00:00+01:00/PT1H")
    assert spec == iso("R5/2026-11-22T10:00:00Z/PT1H")
    assert spec.to_dict() == {"iso8601": "R5/2026-11-22T10:00:00.000Z/PT1H"}


# --- many repetitions, and the ends of time -------------------------------------------------------


def test_next_fire_is_computed_not_iterated_with_millions_of_past_fires() -> None:
    # ~83 million ten-second fires since 2000: answered by division
    every_ten_seconds = iso("R/2000-01-01T00:00:00Z/PT10S")
    t = datetime(2026, 5, 5, 1, 2, 3, 456000, tzinfo=UTC)
    assert every_ten_seconds.next_fire_after(t) == datetime(2026, 5, 5, 1, 2, 10, tzinfo=UTC)
    # a billion fires counting back from the end
    back = iso("R1000000000/PT10S/2026-11-22T10:00:00Z")
    assert back.next_fire_after(t) == datetime(2026, 5, 5, 1, 2, 10, tzinfo=UTC)
    assert back.first_fire(LONG_AGO) == LONG_AGO
    # 24,300 months since year 1: estimated, then adjusted
    monthly = iso("R/0001-01-31T00:00:00Z/P1M")
    assert monthly.next_fire_after(t) == datetime(2026, 5, 31, tzinfo=UTC)
    assert monthly.next_fire_after(datetime(2026, 5, 31, tzinfo=UTC)) == datetime(2026, 6, 30, tzinfo=UTC)


def test_fires_beyond_year_9999_or_before_year_1_do_not_exist() -> None:
    assert iso("R/9999-12-01T00:00:00Z/P1M").next_fire_after(datetime(9999, 12, 1, tzinfo=UTC)) is None
    assert iso("R/9999-12-31T00:00:00Z/P1D").next_fire_after(datetime(9999, 12, 31, tzinfo=UTC)) is None
    # counting back 99,999,999 years from 2026: the fires before year 1 do not exist
    far_back = iso("R99999999/P1Y/2026-06-01T00:00:00Z")
    assert far_back.next_fire_after(datetime(1, 1, 1, tzinfo=UTC)) == datetime(1, 6, 1, tzinfo=UTC)
    assert far_back.next_fire_after(datetime(1, 6, 1, tzinfo=UTC)) == datetime(2, 6, 1, tzinfo=UTC)


# --- JSON form ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "stored"),
    [
        ("R5/2026-11-22T10:00:00Z/PT1H", "R5/2026-11-22T10:00:00.000Z/PT1H"),
        ("R/2026-11-22T10:00:00.250Z/P1D", "R/2026-11-22T10:00:00.250Z/P1D"),
        ("R3/PT1H/2026-11-22T12:00:00Z", "R3/PT1H/2026-11-22T12:00:00.000Z"),
        ("R2/2026-11-22T10:00:00Z/2026-11-22T12:00:00Z", "R2/2026-11-22T10:00:00.000Z/2026-11-22T12:00:00.000Z"),
        ("R/2026-01-31T09:00:00-05:00/P1Y2M3DT4H5M6.007S", "R/2026-01-31T09:00:00.000-05:00/P1Y2M3DT4H5M6.007S"),
        ("R12/P1M/2026-12-31T23:00:00+05:30", "R12/P1M/2026-12-31T23:00:00.000+05:30"),
        ("R5/2026-11-22T10:00:00Z/P1W", "R5/2026-11-22T10:00:00.000Z/P7D"),
        (" R5/2026-11-22T10:00:00Z/PT90S ", "R5/2026-11-22T10:00:00.000Z/PT1M30S"),
    ],
)
def test_to_dict_round_trips_exactly(spec: str, stored: str) -> None:
    schedule = iso(spec)
    assert schedule.to_dict() == {"iso8601": stored}
    assert schedule_from_dict(schedule.to_dict()) == schedule
    assert schedule_from_dict(schedule.to_dict()).to_dict() == schedule.to_dict()


def test_a_repeating_interval_needs_two_of_start_duration_end() -> None:
    with pytest.raises(ValueError, match="exactly two"):
        RepeatingInterval(count=3, start=T0)
    with pytest.raises(ValueError, match="needs a start"):
        RepeatingInterval(count=None, duration=HOUR, end=T0)


# --- errors name the field ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("R0/2026-11-22T10:00:00Z/PT1H", "a repeat count of zero never fires"),
        ("R00/PT1H/2026-11-22T10:00:00Z", "a repeat count of zero never fires"),
        ("R5/2026-11-22T10:00:00/PT1H", "start: needs a UTC offset"),
        ("R5/PT1H/2026-11-22T10:00:00", "end: needs a UTC offset"),
        ("R2/2026-11-22T10:00:00Z/2026-11-22T12:00:00", "end: needs a UTC offset"),
        ("R5/tomorrow/PT1H", "start: not an RFC 3339 date-time"),
        ("R5/2026-11-22T10:00:00Z/PT1H/PT1H", "not an ISO 8601 repeating interval"),
        ("R5/2026-11-22T10:00:00Z", "not an ISO 8601 repeating interval"),
        ("2026-11-22T10:00:00Z/PT1H", "not an ISO 8601 repeating interval"),
        ("X5/2026-11-22T10:00:00Z/PT1H", "not an ISO 8601 repeating interval"),
        ("R-1/2026-11-22T10:00:00Z/PT1H", "not an ISO 8601 repeating interval"),
        ("R5.5/2026-11-22T10:00:00Z/PT1H", "not an ISO 8601 repeating interval"),
        ("", "not an ISO 8601 repeating interval"),
        ("R5/PT1H/PT2H", "needs a start or an end"),
        ("R/PT1H/2026-11-22T12:00:00Z", "an unbounded repeat (R/...) needs a start"),
        ("R5/2026-11-22T10:00:00Z/PT9S", "at least 10 seconds"),
        ("R5/2026-11-22T10:00:00Z/PT0S", "positive"),
        ("R5/2026-11-22T10:00:00Z/-PT1H", "positive"),
        ("R5/2026-11-22T10:00:00Z/P0M", "positive"),
        ("R5/2026-11-22T10:00:00Z/PT10.0001S", "whole number of milliseconds"),
        ("R5/2026-11-22T10:00:00Z/P1MT0.0001S", "whole number of milliseconds"),
        ("R5/2026-11-22T10:00:00Z/P1.5M", "whole numbers"),
        ("R5/2026-11-22T10:00:00Z/P0.5Y", "whole numbers"),
        ("R5/2026-11-22T10:00:00Z/Pfive", "not an ISO 8601 duration"),
        ("R5/2026-11-22T10:00:00Z/2026-11-22T10:00:00Z", "the end must be after the start"),
        ("R5/2026-11-22T12:00:00Z/2026-11-22T10:00:00Z", "the end must be after the start"),
        ("R5/2026-11-22T10:00:00Z/2026-11-22T10:00:09Z", "at least 10 seconds apart"),
        (5, "must be a string"),
        (["R5", "2026-11-22T10:00:00Z", "PT1H"], "must be a string"),
    ],
)
def test_a_bad_interval_names_schedule_iso8601(spec: Any, reason: str) -> None:
    with pytest.raises(InvalidField) as caught:
        schedule_from_dict({"iso8601": spec}, field="jobs.0.schedule")
    assert caught.value.field == "jobs.0.schedule.iso8601"
    assert reason in caught.value.reason


# --- properties -----------------------------------------------------------------------------------

_EPOCH = datetime(1990, 1, 1, tzinfo=UTC)
_instants = st.integers(0, 70 * 365 * 24 * 3600 * 1000).map(lambda ms: _EPOCH + ms * MS)
_fixed = st.integers(10_000, 40 * 24 * 3600 * 1000).map(lambda ms: ms * MS)
_calendar = st.builds(
    lambda years, months, days, seconds: isodate.Duration(years=years, months=months, days=days, seconds=seconds),
    st.integers(0, 2), st.integers(0, 14), st.integers(0, 40), st.integers(0, 86_399),
).filter(lambda d: d.years or d.months)
_offsets = st.integers(-14 * 4, 14 * 4).map(lambda quarters: timedelta(minutes=15 * quarters))


def _brute_force(fires: list[datetime], t: datetime) -> datetime | None:
    return next((f for f in fires if f > t), None)


@settings(max_examples=150, deadline=None)
@given(start=_instants, duration=st.one_of(_fixed, _calendar), count=st.none() | st.integers(1, 150),
       offset=_offsets, position=st.floats(-5, 160), jitter=st.integers(-1, 1))
def test_starting_forms_match_a_brute_force_walk(
    start: datetime, duration: Any, count: int | None, offset: timedelta, position: float, jitter: int
) -> None:
    calendar = not isinstance(duration, timedelta)
    schedule = RepeatingInterval(count, start=start, duration=duration, offset=offset if calendar else timedelta(0))
    local = start.astimezone(timezone(offset)) if calendar else start
    fires = [(local + duration * k).astimezone(UTC) for k in range(count or 170)]
    t = _near(fires, position, jitter)
    assert schedule.next_fire_after(t) == _brute_force(fires, t)
    assert schedule_from_dict(schedule.to_dict()) == schedule


@settings(max_examples=150, deadline=None)
@given(end=_instants, duration=st.one_of(_fixed, _calendar), count=st.integers(1, 150),
       offset=_offsets, position=st.floats(-5, 160), jitter=st.integers(-1, 1))
def test_the_ending_form_matches_a_brute_force_walk(
    end: datetime, duration: Any, count: int, offset: timedelta, position: float, jitter: int
) -> None:
    calendar = not isinstance(duration, timedelta)
    schedule = RepeatingInterval(count, duration=duration, end=end, offset=offset if calendar else timedelta(0))
    local = end.astimezone(timezone(offset)) if calendar else end
    fires = [(local - duration * j).astimezone(UTC) for j in reversed(range(count))]
    t = _near(fires, min(position, count + 5), jitter)
    assert schedule.next_fire_after(t) == _brute_force(fires, t)
    assert schedule_from_dict(schedule.to_dict()) == schedule


def _near(fires: list[datetime], position: float, jitter: int) -> datetime:
    """An instant around fire number ``position`` (fractional: between two fires), give or take a millisecond."""
    index = int(position)
    if index < 0:
        base = fires[0] - HOUR * (-position)
    elif index >= len(fires) - 1:
        base = fires[-1] + HOUR * (position - len(fires) + 1)
    else:
        base = fires[index] + (fires[index + 1] - fires[index]) * (position - index)
    return utc(base) + jitter * MS
