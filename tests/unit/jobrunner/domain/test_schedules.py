"""Schedules: fire times as a pure function of (spec, instant), and parsing that names the bad field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.schedules import At, Every, parse_instant, parse_interval, schedule_from_dict

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
S = timedelta(seconds=1)


# --- At -------------------------------------------------------------------------------------------


def test_at_fires_once_at_its_instant_whatever_the_submission_time() -> None:
    at = At(T0)
    assert at.first_fire(T0 - timedelta(days=1)) == T0
    assert at.first_fire(T0 + timedelta(minutes=2)) == T0  # slightly late submissions still run
    assert at.recurring is False


def test_at_next_fire_after_is_the_instant_only_strictly_before_it() -> None:
    at = At(T0)
    assert at.next_fire_after(T0 - S) == T0
    assert at.next_fire_after(T0) is None
    assert at.next_fire_after(T0 + S) is None


# --- Every: first fire ----------------------------------------------------------------------------


def test_every_without_start_first_fires_one_interval_after_submission() -> None:
    assert Every(timedelta(minutes=5)).first_fire(T0) == T0 + timedelta(minutes=5)


def test_every_with_future_start_first_fires_at_start() -> None:
    start = T0 + timedelta(hours=1, seconds=7)
    assert Every(timedelta(minutes=5), start=start).first_fire(T0) == start


def test_every_with_past_start_first_fires_at_the_next_grid_point() -> None:
    every = Every(timedelta(minutes=5), start=T0 - timedelta(minutes=12))
    assert every.first_fire(T0) == T0 + timedelta(minutes=3)


def test_every_submitted_exactly_on_a_grid_point_fires_then() -> None:
    every = Every(timedelta(minutes=5), start=T0 - timedelta(minutes=10))
    assert every.first_fire(T0) == T0


def test_every_whose_end_precedes_the_first_fire_never_fires() -> None:
    assert Every(timedelta(hours=1), end=T0 + timedelta(minutes=10)).first_fire(T0) is None
    past = Every(timedelta(minutes=5), start=T0 - timedelta(hours=2), end=T0 - timedelta(hours=1))
    assert past.first_fire(T0) is None


# --- Every: next fire, anchoring, bounds -----------------------------------------------------------


def test_every_next_fire_after_steps_along_the_grid() -> None:
    every = Every(timedelta(minutes=5), start=T0)
    assert every.next_fire_after(T0 - timedelta(days=3)) == T0
    assert every.next_fire_after(T0) == T0 + timedelta(minutes=5)
    assert every.next_fire_after(T0 + timedelta(minutes=7)) == T0 + timedelta(minutes=10)


def test_every_end_is_inclusive() -> None:
    every = Every(timedelta(minutes=5), start=T0, end=T0 + timedelta(minutes=10))
    assert every.next_fire_after(T0 + timedelta(minutes=9)) == T0 + timedelta(minutes=10)
    assert every.next_fire_after(T0 + timedelta(minutes=10)) is None


def test_unanchored_every_has_no_fire_times() -> None:
    with pytest.raises(ValueError, match="anchored"):
        Every(timedelta(minutes=5)).next_fire_after(T0)


def test_anchored_fixes_start_one_interval_after_now_and_keeps_end() -> None:
    end = T0 + timedelta(days=1)
    assert Every(timedelta(minutes=5), end=end).anchored(T0) == Every(
        timedelta(minutes=5), start=T0 + timedelta(minutes=5), end=end
    )


def test_anchored_keeps_an_explicit_start() -> None:
    every = Every(timedelta(minutes=5), start=T0 - timedelta(hours=1))
    assert every.anchored(T0 + timedelta(days=1)) == every


# --- to_dict / schedule_from_dict round trip ------------------------------------------------------


@pytest.mark.parametrize(
    "schedule",
    [
        At(T0),
        Every(timedelta(minutes=5)),
        Every(timedelta(seconds=90), start=T0),
        Every(timedelta(days=1, hours=2), start=T0, end=T0 + timedelta(days=30)),
        Every(timedelta(seconds=10, milliseconds=5), start=T0 + timedelta(milliseconds=250)),
    ],
    ids=["at", "every", "every-start", "every-start-end", "every-ms"],
)
def test_to_dict_round_trips_through_schedule_from_dict(schedule: At | Every) -> None:
    assert schedule_from_dict(schedule.to_dict()) == schedule


def test_to_dict_writes_utc_rfc3339() -> None:
    parsed = schedule_from_dict({"at": "2026-11-22T12:00:00+02:00"})
    assert parsed.to_dict() == {"at": "2026-11-22T10:00:00.000Z"}


# --- schedule_from_dict / parse_* errors name the field -------------------------------------------


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({}, "schedule"),
        ({"start": "2026-11-22T10:00:00Z"}, "schedule"),
        ({"at": "2026-11-22T10:00:00Z", "every": "PT5M"}, "schedule"),
        ({"every": "PT5M", "cron": "* * * * *"}, "schedule"),
        ({"at": "2026-11-22T10:00:00Z", "start": "2026-11-22T10:00:00Z"}, "schedule.start"),
        ({"every": "PT5M", "timezone": "UTC"}, "schedule.timezone"),
        ({"every": "PT5M", "colour": "red"}, "schedule.colour"),
        ({"every": "five minutes"}, "schedule.every"),
        ({"every": "P1M"}, "schedule.every"),
        ({"every": "P1Y"}, "schedule.every"),
        ({"every": "PT9S"}, "schedule.every"),
        ({"at": "2026-11-22T10:00:00"}, "schedule.at"),
        ({"at": "tomorrow"}, "schedule.at"),
        ({"every": "PT5M", "start": "2026-11-22T10:00:00"}, "schedule.start"),
        ({"every": "PT5M", "end": "2026-11-22 10:00"}, "schedule.end"),
        ({"every": "PT5M", "start": "2026-11-22T10:00:00Z", "end": "2026-11-22T09:59:59Z"}, "schedule.end"),
    ],
    ids=[
        "no-kind", "only-bounds", "at-and-every", "every-and-cron", "at-with-start", "every-with-timezone",
        "every-with-unknown-key", "bad-duration", "months", "years", "under-10s", "at-without-offset",
        "at-not-a-date", "start-without-offset", "end-without-offset", "end-before-start",
    ],
)
def test_schedule_from_dict_names_the_bad_field(data: dict[str, str], field: str) -> None:
    with pytest.raises(InvalidField) as caught:
        schedule_from_dict(data)
    assert caught.value.field == field


def test_schedule_from_dict_prefixes_fields_with_the_given_path() -> None:
    with pytest.raises(InvalidField) as caught:
        schedule_from_dict({"every": "PT1S"}, field="jobs.0.schedule")
    assert caught.value.field == "jobs.0.schedule.every"


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        ({"at": "2026-11-22T10:00:00Z"}, "at"),
        ({"every": "PT5M"}, "every"),
        ({"cron": "*/5 * * * *"}, "cron"),
        ({"iso8601": "R5/2026-11-22T10:00:00Z/PT1H"}, "iso8601"),
    ],
)
def test_every_kind_is_supported(data: dict[str, str], kind: str) -> None:
    assert schedule_from_dict(data).kind == kind


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"timezone": "UTC"}, "schedule"),
        ({"at": "2026-11-22T10:00:00Z", "timezone": "UTC"}, "schedule.timezone"),
        ({"iso8601": "R5/2026-11-22T10:00:00Z/PT1H", "timezone": "UTC"}, "schedule.timezone"),
        ({"iso8601": "R5/2026-11-22T10:00:00Z/PT1H", "start": "2026-11-22T10:00:00Z"}, "schedule.start"),
        ({"at": "2026-11-22T10:00:00Z", "end": "2026-11-22T10:00:00Z"}, "schedule.end"),
        ({"iso8601": "R5/2026-11-22T10:00:00Z/PT1H", "count": 3}, "schedule.count"),
        ({"cron": "* * * * *", "iso8601": "R5/2026-11-22T10:00:00Z/PT1H"}, "schedule"),
    ],
    ids=[
        "timezone-alone", "at-with-timezone", "iso8601-with-timezone", "iso8601-with-start", "at-with-end",
        "iso8601-with-count", "two-kinds",
    ],
)
def test_keys_of_other_kinds_are_named(data: dict[str, str], field: str) -> None:
    with pytest.raises(InvalidField) as caught:
        schedule_from_dict(data)
    assert caught.value.field == field


def test_the_package_still_exports_what_the_module_did() -> None:
    from jobrunner.domain import schedules

    for name in (
        "At", "Every", "Schedule", "schedule_from_dict", "parse_instant", "parse_interval", "MIN_INTERVAL",
        "AT_PAST_TOLERANCE", "Cron", "RepeatingInterval",
    ):
        assert hasattr(schedules, name), name


def test_parse_interval_reasons() -> None:
    with pytest.raises(InvalidField, match="cron"):
        parse_interval("P1M", "f")
    with pytest.raises(InvalidField, match="at least 10 seconds"):
        parse_interval("PT9.999S", "f")
    assert parse_interval("PT10S", "f") == timedelta(seconds=10)
    assert parse_interval("P1W", "f") == timedelta(days=7)


@pytest.mark.parametrize("value", [1795000000000, None, ["2026-11-22T10:00:00Z"], {"at": "x"}])
def test_parse_instant_rejects_what_is_not_a_string(value: object) -> None:
    with pytest.raises(InvalidField, match="not an RFC 3339 date-time") as caught:
        parse_instant(value, "scheduled_at")
    assert caught.value.field == "scheduled_at"


def test_parse_instant_converts_offsets_to_utc() -> None:
    assert parse_instant("2026-11-22T05:00:00-05:00", "f") == T0
    assert parse_instant("2026-11-22t10:00:00z", "f") == T0
    with pytest.raises(InvalidField, match="UTC offset") as caught:
        parse_instant("2026-11-22T10:00:00", "when")
    assert caught.value.field == "when"


def test_an_interval_finer_than_a_millisecond_is_rejected_or_still_advances() -> None:
    # Given an interval finer than the millisecond precision instants keep
    try:
        every = schedule_from_dict({"every": "PT10.0001S", "start": "2026-11-22T10:00:00Z"})
    except InvalidField as rejected:  # rejecting it is fine, if it names the field
        assert rejected.field == "schedule.every"
        return
    first = every.next_fire_after(T0)
    assert first is not None
    # When the scan asks for the fire after that one
    following = every.next_fire_after(first)
    # Then it is strictly later (the same instant would re-plan the same fire, and the job would stop)
    assert following is not None and following > first


# --- properties -----------------------------------------------------------------------------------

_MS = timedelta(milliseconds=1)
_EPOCH = datetime(2020, 1, 1, tzinfo=UTC)
_instants = st.integers(min_value=0, max_value=20 * 365 * 24 * 3600 * 1000).map(lambda ms: _EPOCH + ms * _MS)
_intervals = st.integers(min_value=10_000, max_value=400 * 24 * 3600 * 1000).map(lambda ms: ms * _MS)


@given(every=_intervals, start=_instants, t=_instants)
def test_next_fire_after_is_the_next_grid_point(every: timedelta, start: datetime, t: datetime) -> None:
    fire = Every(every, start=start).next_fire_after(t)
    assert fire is not None and fire > t
    assert fire >= start and (fire - start) % every == timedelta(0)  # on the grid start + k*every
    previous = fire - every
    assert previous < start or previous <= t  # no grid point strictly between t and fire


@given(every=_intervals, start=_instants, span=_intervals, t=_instants)
def test_end_bounds_the_grid(every: timedelta, start: datetime, span: timedelta, t: datetime) -> None:
    end = start + span
    unbounded = Every(every, start=start).next_fire_after(t)
    bounded = Every(every, start=start, end=end).next_fire_after(t)
    assert unbounded is not None
    assert bounded == (unbounded if unbounded <= end else None)


@given(every=_intervals, start=st.none() | _instants, span=st.none() | _intervals)
def test_round_trip_property(every: timedelta, start: datetime | None, span: timedelta | None) -> None:
    end = start + span if start is not None and span is not None else None
    schedule = Every(every, start=start, end=end)
    assert schedule_from_dict(schedule.to_dict()) == schedule
