"""Cron schedules: five fields on a time zone's wall clock, the daylight-saving policy, and validation.

Policy under test (docs/schedules.md), Debian's cron: an expression with ``*`` at the start of its minute or
hour field follows the wall clock (both passes of a repeated hour, nothing in a skipped one); any other runs
at fixed times of day (a repeated time at its first occurrence, a skipped time once as the gap ends).
tests/unit/jobrunner/domain/test_schedules_cron_debian.py checks the same against an independent
implementation on many zones. Time is injected: every test passes the instant it asks about.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple
from zoneinfo import ZoneInfo

import pytest

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.schedules import Cron, schedule_from_dict

if TYPE_CHECKING:
    from jobrunner.domain.schedules import Schedule

MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
MS = timedelta(milliseconds=1)


def cron(expression: str, zone: str = "UTC") -> Schedule:
    return schedule_from_dict({"cron": expression, "timezone": zone})


def fires(schedule: Schedule, after: datetime, until: datetime) -> list[datetime]:
    """The fires in (after, until], found the way the scanner finds them: each from the one before."""
    found: list[datetime] = []
    t: datetime | None = after
    while t is not None and (t := schedule.next_fire_after(t)) is not None and t <= until:
        found.append(t)
    return found


def walls(instants: list[datetime], zone: str) -> list[str]:
    """Local wall-clock times with their offsets, as a reader would check them."""
    return [i.astimezone(ZoneInfo(zone)).strftime("%m-%d %H:%M%z") for i in instants]


class Changes(NamedTuple):
    zone: str
    spring: datetime  # UTC instant the clocks go forward
    fall: datetime  # UTC instant the clocks go back
    gap_hour: int  # the local hour that does not exist on the spring day
    repeated_hour: int  # the local hour that occurs twice on the fall day


PARIS = Changes("Europe/Paris", datetime(2026, 3, 29, 1, tzinfo=UTC), datetime(2026, 10, 25, 1, tzinfo=UTC), 2, 2)
NEW_YORK = Changes("America/New_York", datetime(2026, 3, 8, 7, tzinfo=UTC), datetime(2026, 11, 1, 6, tzinfo=UTC), 2, 1)
BOTH = pytest.mark.parametrize("changes", [PARIS, NEW_YORK], ids=["paris", "new-york"])


# --- basics ---------------------------------------------------------------------------------------

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)  # a Sunday


def test_cron_fires_on_the_zone_wall_clock_summer_and_winter() -> None:
    weekdays_at_nine = cron("0 9 * * MON-FRI", "Europe/Paris")
    summer = fires(weekdays_at_nine, datetime(2026, 7, 3, 12, tzinfo=UTC), datetime(2026, 7, 7, 12, tzinfo=UTC))
    winter = fires(weekdays_at_nine, datetime(2026, 12, 4, 12, tzinfo=UTC), datetime(2026, 12, 8, 12, tzinfo=UTC))
    assert walls(summer, "Europe/Paris") == ["07-06 09:00+0200", "07-07 09:00+0200"]
    assert walls(winter, "Europe/Paris") == ["12-07 09:00+0100", "12-08 09:00+0100"]
    assert [f.hour for f in summer + winter] == [7, 7, 8, 8]


def test_next_fire_after_is_strictly_after_and_first_fire_is_at_or_after() -> None:
    daily = cron("0 10 * * *")
    assert daily.next_fire_after(T0) == T0 + timedelta(days=1)
    assert daily.next_fire_after(T0 - MS) == T0
    assert daily.first_fire(T0) == T0  # submitted exactly on a fire: that fire
    assert daily.first_fire(T0 + MS) == T0 + timedelta(days=1)
    assert daily.first_fire(T0 - timedelta(seconds=30)) == T0
    assert daily.recurring is True


def test_fires_are_whole_minutes_whatever_the_instant_asked_about() -> None:
    every_minute = cron("* * * * *")
    assert every_minute.next_fire_after(T0 + timedelta(seconds=59, milliseconds=999)) == T0 + MINUTE
    assert every_minute.next_fire_after(T0 + timedelta(microseconds=1)) == T0 + MINUTE


def test_steps_ranges_lists_and_names() -> None:
    schedule = cron("*/20 9-10 * jan,NOV sun")
    assert fires(schedule, T0 - 2 * HOUR, T0 + 2 * HOUR) == [
        T0 - HOUR, T0 - 40 * MINUTE, T0 - 20 * MINUTE, T0, T0 + 20 * MINUTE, T0 + 40 * MINUTE,
    ]


def test_seven_and_zero_are_both_sunday() -> None:
    assert cron("0 10 * * 7").next_fire_after(T0 - MS) == T0
    assert cron("0 10 * * 0").next_fire_after(T0 - MS) == T0
    assert cron("0 10 * * 5-7").next_fire_after(T0 - timedelta(days=3)) == T0 - timedelta(days=2)  # Friday


def test_when_both_day_fields_are_restricted_either_one_matches() -> None:
    thirteenths_and_fridays = cron("0 0 13 * FRI")
    found = fires(thirteenths_and_fridays, datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 15, tzinfo=UTC))
    assert [f.strftime("%d %a") for f in found] == [
        "06 Fri", "13 Fri", "20 Fri", "27 Fri", "04 Fri", "11 Fri", "13 Sun",
    ]
    # */2 is a restriction too (as in POSIX), so this is "odd days or Mondays"
    odd_or_monday = fires(cron("0 0 */2 * MON"), datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 6, tzinfo=UTC))
    assert [f.day for f in odd_or_monday] == [2, 3, 5]


def test_only_the_restricted_day_field_decides_when_the_other_is_a_star() -> None:
    fridays = fires(cron("0 0 * * FRI"), datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 30, tzinfo=UTC))
    assert [f.day for f in fridays] == [6, 13, 20, 27]


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        # croniter 7 reads a one-value range as '*': these would fire every minute, hour or day
        ("0-0 * * * *", T0, T0 + HOUR),
        ("5-5/10 * * * *", T0, T0 + 5 * MINUTE),
        ("0 11-11 * * *", T0, T0 + HOUR),
        ("0 10 23-23 * *", T0, T0 + timedelta(days=1)),
        ("0 10 * 12-12 *", T0, datetime(2026, 12, 1, 10, tzinfo=UTC)),
        ("0 10 * * 2-2", T0, T0 + timedelta(days=2)),
        ("0 10 * * 2-2,3", T0, T0 + timedelta(days=2)),
        # croniter would turn these full day lists into '*' on one side only; either way it is every day
        ("0 10 1-31 * MON", T0, T0 + timedelta(days=1)),
        ("0 10 15 * 0-6", T0, T0 + timedelta(days=1)),
        ("0 10 */1 * */1", T0, T0 + timedelta(days=1)),
    ],
)
def test_spellings_croniter_misreads_mean_what_they_say(expression: str, after: datetime, expected: datetime) -> None:
    assert cron(expression).next_fire_after(after) == expected


def test_february_29_fires_in_leap_years_only() -> None:
    leap_day = cron("0 0 29 2 *")
    assert leap_day.next_fire_after(T0) == datetime(2028, 2, 29, tzinfo=UTC)
    assert leap_day.next_fire_after(datetime(2096, 3, 1, tzinfo=UTC)) == datetime(2104, 2, 29, tzinfo=UTC)


def test_no_fire_past_the_last_representable_year() -> None:
    assert cron("0 0 29 2 *").next_fire_after(datetime(9996, 3, 1, tzinfo=UTC)) is None
    assert cron("0 0 31 12 *").next_fire_after(datetime(9999, 12, 31, tzinfo=UTC)) is None
    # 23:59 on 9999-12-31 in New York would be in year 10000 in UTC
    assert cron("59 23 31 12 *", "America/New_York").next_fire_after(datetime(9999, 12, 31, tzinfo=UTC)) is None


# --- daylight saving: clocks go forward -----------------------------------------------------------


@BOTH
def test_a_fixed_daily_time_in_the_gap_fires_once_as_the_gap_ends(changes: Changes) -> None:
    # Given 02:30 every day, a time the spring-forward night does not have
    daily = cron(f"30 {changes.gap_hour} * * *", changes.zone)
    # When the fires around the change are listed
    found = fires(daily, changes.spring - timedelta(days=1), changes.spring + timedelta(days=1))
    # Then that night it fires once, just after the change: at 03:00 new time
    expected = {
        "Europe/Paris": ["03-28 02:30+0100", "03-29 03:00+0200", "03-30 02:30+0200"],
        "America/New_York": ["03-07 02:30-0500", "03-08 03:00-0400", "03-09 02:30-0400"],
    }
    assert walls(found, changes.zone) == expected[changes.zone]
    assert found[1] == changes.spring


@BOTH
def test_an_hourly_cron_follows_the_clock_past_the_skipped_hour(changes: Changes) -> None:
    hourly = cron("0 * * * *", changes.zone)
    found = fires(hourly, changes.spring - 3 * HOUR, changes.spring + 3 * HOUR)
    # 02:00 does not exist; 03:00 new time comes an hour after 01:00: every real hour, one wall hour fewer
    assert found == [changes.spring + k * HOUR for k in range(-2, 4)]


@BOTH
def test_an_every_minute_cron_fires_every_real_minute_across_the_gap(changes: Changes) -> None:
    every_minute = cron("* * * * *", changes.zone)
    found = fires(every_minute, changes.spring - 5 * MINUTE, changes.spring + 5 * MINUTE)
    assert found == [changes.spring + k * MINUTE for k in range(-4, 6)]


@BOTH
def test_a_star_in_the_minute_or_hour_field_skips_the_times_the_night_does_not_have(changes: Changes) -> None:
    # 30 past every hour: 01:30, then 03:30 new time (02:30 does not exist), an hour of real time later
    found = fires(cron("30 * * * *", changes.zone), changes.spring - HOUR, changes.spring + HOUR)
    assert found == [changes.spring - 30 * MINUTE, changes.spring + 30 * MINUTE]
    # every 15 minutes of the even hours, from 00:00 to 05:00 new time: nothing in the skipped 02:00 hour
    found = fires(cron("*/15 */2 * * *", changes.zone), changes.spring - 2 * HOUR, changes.spring + 2 * HOUR)
    assert found == [changes.spring - 2 * HOUR + k * 15 * MINUTE for k in range(1, 4)] + [
        changes.spring + HOUR + k * 15 * MINUTE for k in range(4)]


@BOTH
def test_fixed_times_in_the_gap_fire_once_merged_with_the_time_after_it(changes: Changes) -> None:
    # 02:00 and 02:30 fire as the gap ends, the same instant as 03:00 itself; then 03:30: two fires, not four
    schedule = cron(f"0,30 {changes.gap_hour},{changes.gap_hour + 1} * * *", changes.zone)
    found = fires(schedule, changes.spring - HOUR, changes.spring + 2 * HOUR)
    assert found == [changes.spring, changes.spring + 30 * MINUTE]


@BOTH
def test_asked_from_just_after_the_gap_a_skipped_time_has_fired_already(changes: Changes) -> None:
    # Given the scanner asks from 03:10 new time (e.g. after a manual run): the skipped 02:30 fired at 03:00
    daily = cron(f"30 {changes.gap_hour} * * *", changes.zone)
    t = changes.spring + 10 * MINUTE
    next_day = changes.spring + timedelta(days=1, minutes=30) - HOUR
    assert daily.next_fire_after(t) == next_day
    assert daily.next_fire_after(changes.spring - MS) == changes.spring
    assert daily.first_fire(changes.spring) == changes.spring


# --- daylight saving: clocks go back --------------------------------------------------------------


@BOTH
def test_a_fixed_daily_time_in_the_repeated_hour_fires_once_at_its_first_occurrence(changes: Changes) -> None:
    daily = cron(f"30 {changes.repeated_hour} * * *", changes.zone)
    found = fires(daily, changes.fall - timedelta(hours=26), changes.fall + timedelta(hours=26))
    expected = {
        "Europe/Paris": ["10-24 02:30+0200", "10-25 02:30+0200", "10-26 02:30+0100"],
        "America/New_York": ["10-31 01:30-0400", "11-01 01:30-0400", "11-02 01:30-0500"],
    }
    assert walls(found, changes.zone) == expected[changes.zone]
    assert found[1] == changes.fall - 30 * MINUTE  # the earlier of the two instants
    # and asked from between the two occurrences, it does not fire the second one
    assert daily.next_fire_after(changes.fall) == found[2]


@BOTH
def test_an_hourly_cron_fires_in_both_passes_of_the_repeated_hour(changes: Changes) -> None:
    hourly = cron("0 * * * *", changes.zone)
    found = fires(hourly, changes.fall - 3 * HOUR, changes.fall + 3 * HOUR)
    # every real hour: the repeated hour's wall time at fall - 1 h and again at fall
    assert found == [changes.fall + k * HOUR for k in range(-2, 4)]
    local = walls(found, changes.zone)
    assert local[1][:11] == local[2][:11] and local[1] != local[2]  # same wall time, two offsets


@BOTH
def test_an_every_minute_cron_fires_every_real_minute_across_the_repeat(changes: Changes) -> None:
    every_minute = cron("* * * * *", changes.zone)
    found = fires(every_minute, changes.fall - 3 * MINUTE, changes.fall + 63 * MINUTE)
    assert found == [changes.fall + k * MINUTE for k in range(-2, 64)]


@BOTH
def test_asked_from_the_second_pass_the_next_fire_follows_the_clock_or_the_fixed_time(changes: Changes) -> None:
    zone = ZoneInfo(changes.zone)
    local = datetime(2026, changes.fall.month, changes.fall.day, changes.repeated_hour, 30, tzinfo=zone, fold=1)
    second_pass = local.astimezone(UTC)
    assert second_pass == changes.fall + 30 * MINUTE
    assert cron("* * * * *", changes.zone).next_fire_after(local) == second_pass + MINUTE
    assert cron("0 * * * *", changes.zone).next_fire_after(local) == changes.fall + HOUR
    assert cron(f"45 {changes.repeated_hour} * * *", changes.zone).next_fire_after(local) == (
        changes.fall + timedelta(days=1, minutes=45)
    )
    assert cron("* * * * *", changes.zone).first_fire(local) == second_pass


def test_thirty_past_every_hour_fires_25_times_on_a_fall_back_day() -> None:
    # The example: Europe/Paris on 2027-10-31 (03:00 CEST -> 02:00 CET) has 25 hours
    zone = ZoneInfo("Europe/Paris")
    day_start = datetime(2027, 10, 31, tzinfo=zone).astimezone(UTC)
    day_end = datetime(2027, 11, 1, tzinfo=zone).astimezone(UTC)
    found = fires(cron("30 * * * *", "Europe/Paris"), day_start, day_end)
    assert len(found) == 25
    assert walls(found, "Europe/Paris")[2:4] == ["10-31 02:30+0200", "10-31 02:30+0100"]
    # and every 30 minutes has no hole: each fire 30 real minutes after the one before
    half_hours = fires(cron("*/30 * * * *", "Europe/Paris"), day_start, day_end)
    assert len(half_hours) == 50
    assert {b - a for a, b in itertools.pairwise(half_hours)} == {30 * MINUTE}


def test_every_real_minute_of_a_fall_back_day_fires() -> None:
    zone = ZoneInfo("Europe/Paris")
    day_start = datetime(2026, 10, 25, tzinfo=zone).astimezone(UTC)
    day_end = datetime(2026, 10, 26, tzinfo=zone).astimezone(UTC)
    found = fires(cron("* * * * *", "Europe/Paris"), day_start - MS, day_end - MS)
    local = [f.astimezone(zone).strftime("%H:%M") for f in found]
    assert len(local) == 25 * 60 and len(set(local)) == 24 * 60  # the repeated hour's 60 minutes twice


# --- other kinds of change ------------------------------------------------------------------------


def test_a_thirty_minute_change() -> None:
    # Australia/Lord_Howe: 02:00 -> 02:30 on 2026-10-04, 02:00 -> 01:30 on 2026-04-05
    spring, fall = datetime(2026, 10, 3, 15, 30, tzinfo=UTC), datetime(2026, 4, 4, 15, tzinfo=UTC)
    assert cron("15 2 * * *", "Australia/Lord_Howe").next_fire_after(spring - HOUR) == spring
    assert walls([spring], "Australia/Lord_Howe") == ["10-04 02:30+1100"]
    assert cron("45 1 * * *", "Australia/Lord_Howe").next_fire_after(fall - HOUR) == fall - 15 * MINUTE
    quarter_hours = fires(cron("*/15 * * * *", "Australia/Lord_Howe"), fall - HOUR, fall + HOUR)
    assert quarter_hours == [fall + k * 15 * MINUTE for k in range(-3, 5)]  # the repeated half hour twice


def test_a_change_at_midnight() -> None:
    # America/Sao_Paulo went from 00:00 to 01:00 on 2018-11-04: that day's midnight fires at 01:00
    midnight = cron("0 0 * * *", "America/Sao_Paulo")
    found = fires(midnight, datetime(2018, 11, 3, 12, tzinfo=UTC), datetime(2018, 11, 6, 12, tzinfo=UTC))
    assert walls(found, "America/Sao_Paulo") == ["11-04 01:00-0200", "11-05 00:00-0200", "11-06 00:00-0200"]


def test_a_skipped_day() -> None:
    # Pacific/Apia skipped 2011-12-30: its noon fires as the gap ends, at midnight starting the 31st
    noon = cron("0 12 * * *", "Pacific/Apia")
    found = fires(noon, datetime(2011, 12, 29, tzinfo=UTC), datetime(2012, 1, 1, tzinfo=UTC))
    assert walls(found, "Pacific/Apia") == ["12-29 12:00-1000", "12-31 00:00+1400", "12-31 12:00+1400",
                                            "01-01 12:00+1400"]
    just_after_the_gap = datetime(2011, 12, 31, 1, tzinfo=ZoneInfo("Pacific/Apia"))
    assert noon.next_fire_after(just_after_the_gap) == found[2]


# --- JSON form ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        {"cron": "0 9 * * MON-FRI", "timezone": "Europe/Paris"},
        {"cron": "*/5 * * * *", "timezone": "UTC"},
        {"cron": "0 0 29 2 *", "timezone": "America/New_York"},
        {"cron": "15,45 */2 1-15 jan-jun sun", "timezone": "Asia/Kolkata"},
    ],
)
def test_to_dict_round_trips_exactly(data: dict[str, str]) -> None:
    schedule = schedule_from_dict(data)
    assert schedule.to_dict() == data
    assert schedule_from_dict(schedule.to_dict()) == schedule


def test_timezone_defaults_to_utc_and_spacing_is_normalised() -> None:
    schedule = schedule_from_dict({"cron": "  0  9 *\t* MON "})
    assert schedule == Cron("0 9 * * MON", "UTC")
    assert schedule.to_dict() == {"cron": "0 9 * * MON", "timezone": "UTC"}
    assert schedule_from_dict({"cron": "0 9 * * MON", "timezone": None}) == schedule


def test_schedules_differing_only_in_zone_differ() -> None:
    assert cron("0 9 * * *", "Europe/Paris") != cron("0 9 * * *", "Europe/Berlin")
    assert hash(cron("0 9 * * *", "Europe/Paris")) == hash(cron("0 9 * * *", "Europe/Paris"))


# --- errors name the field ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("* * * *", "five fields"),
        ("* * * * * * * *", "five fields"),
        ("", "five fields"),
        ("0 0 * * * 5", "seconds and years are not supported"),
        ("0 0 0 1 1 * 2027", "seconds and years are not supported"),
        ("@daily", "@daily are not supported"),
        ("60 * * * *", "minute 60 is out of range 0-59"),
        ("* 24 * * *", "hour 24 is out of range"),
        ("* * 0 * *", "day-of-month 0 is out of range 1-31"),
        ("* * 32 * *", "day-of-month 32"),
        ("* * * 13 *", "month 13"),
        ("* * * 0 *", "month 0"),
        ("* * * * 8", "day-of-week 8"),
        ("5-1 * * * *", "goes backwards"),
        ("* * * * FRI-MON", "goes backwards"),
        ("*/0 * * * *", "step"),
        ("*/60 * * * *", "from 1 to 59"),
        ("0/15 * * * *", "needs a range"),
        ("0 0 L * *", "day-of-month 'L' is not a number"),
        ("0 0 ? * *", "day-of-month field '?' is not valid"),
        ("H * * * *", "is not a number"),
        ("0 0 * * 1#2", "day-of-week field '1#2' is not valid"),
        ("0 0 15W * *", "day-of-month field '15W' is not valid"),
        ("0 0 * * 5L", "day-of-week field '5L' is not valid"),
        ("0 0 * FOO *", "'FOO' is not a month name (JAN-DEC)"),
        ("0 0 * * MONDAY", "is not a day-of-week name (SUN-SAT)"),
        ("0 0 * MON *", "'MON' is not a month name"),
        ("1,,2 * * * *", "minute field '1,,2' is not valid"),
        ("-1 * * * *", "is not valid"),
        ("1-2-3 * * * *", "is not valid"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 2,4,6,9,11 *", "never fires"),
        ("0 0 30-31 FEB *", "never fires"),
        (5, "must be a string"),
        (["0", "0", "*", "*", "*"], "must be a string"),
    ],
)
def test_a_bad_expression_names_schedule_cron(expression: Any, reason: str) -> None:
    with pytest.raises(InvalidField) as caught:
        schedule_from_dict({"cron": expression})
    assert caught.value.field == "schedule.cron"
    assert reason in caught.value.reason


@pytest.mark.parametrize(
    "expression",
    ["0 0 29 2 *", "0 0 30 2 MON", "0 0 31 * *", "0 0 * * 0-7", "0 0 1-31 * *", "0 0 * * sun-sat/2", "59 23 31 12 *"],
)
def test_unusual_but_valid_expressions_are_accepted(expression: str) -> None:
    assert cron(expression).next_fire_after(T0) is not None


@pytest.mark.parametrize(
    ("timezone", "reason"),
    [
        ("Mars/Olympus_Mons", "unknown time zone"),
        ("europe/paris", "unknown time zone"),
        ("Europe", "unknown time zone"),
        ("", "unknown time zone"),
        ("/etc/passwd", "unknown time zone"),
        ("../../etc/passwd", "unknown time zone"),
        ("localtime", "is not a time zone"),
        ("right/UTC", "is not a time zone"),
        ("posix/Europe/Paris", "is not a time zone"),
        (1, "must be a string"),
    ],
)
def test_a_bad_timezone_names_schedule_timezone(timezone: Any, reason: str) -> None:
    with pytest.raises(InvalidField) as caught:
        schedule_from_dict({"cron": "0 9 * * *", "timezone": timezone})
    assert caught.value.field == "schedule.timezone"
    assert reason in caught.value.reason


def test_a_timezone_without_cron_is_named() -> None:
    with pytest.raises(InvalidField) as caught:
        schedule_from_dict({"every": "PT1H", "timezone": "Europe/Paris"}, field="jobs.0.schedule")
    assert caught.value.field == "jobs.0.schedule.timezone"
