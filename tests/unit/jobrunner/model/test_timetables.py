"""The reference's own schedules against fires worked out by hand (the model test trusts them to judge the product)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from tests.unit.jobrunner.model.timetables import cron_field, timetable

AT = datetime(2026, 11, 22, 10, 0, 17, tzinfo=UTC)


def first(data: dict[str, object], n: int, low: datetime = AT) -> list[str]:
    return [f"{t:%H:%M:%S}" for t in itertools.islice(timetable(data, AT).fires_from(low), n)]


def test_at_fires_once() -> None:
    assert first({"at": "2026-11-22T10:01:00.000Z"}, 3) == ["10:01:00"]
    assert first({"at": "2026-11-22T10:01:00.000Z"}, 3, low=AT + timedelta(minutes=1)) == []


def test_every_without_a_start_starts_one_period_after_the_request_and_a_count_ends_it() -> None:
    assert first({"every": "PT20S"}, 3) == ["10:00:37", "10:00:57", "10:01:17"]
    assert first({"every": "PT20S", "count": 2}, 5) == ["10:00:37", "10:00:57"]


def test_every_with_a_past_start_counts_its_fires_from_the_request() -> None:
    data = {"every": "PT30S", "start": "2026-11-22T09:59:00.000Z", "count": 2}
    assert first(data, 5, low=AT - timedelta(minutes=5)) == ["09:59:00", "09:59:30", "10:00:00", "10:00:30",
                                                             "10:01:00"]
    assert timetable(data, AT).last == datetime(2026, 11, 22, 10, 1, tzinfo=UTC)


def test_an_iso8601_interval_fires_its_count_from_its_start() -> None:
    assert first({"iso8601": "R3/2026-11-22T10:00:00.000Z/PT45S"}, 5, low=AT - timedelta(hours=1)) == [
        "10:00:00", "10:00:45", "10:01:30"]


def test_cron_reads_the_wall_clock_of_its_zone() -> None:
    # 10:00:17 UTC is 15:30:17 in Kolkata (+05:30) and 05:00:17 in New York (-05:00 in November)
    assert first({"cron": "*/2 * * * *", "timezone": "UTC"}, 2) == ["10:02:00", "10:04:00"]
    assert first({"cron": "*/2 * * * *", "timezone": "Asia/Kolkata"}, 2) == ["10:02:00", "10:04:00"]
    assert first({"cron": "15 16 * * *", "timezone": "Asia/Kolkata"}, 1) == ["10:45:00"]
    assert first({"cron": "1 5 * * *", "timezone": "America/New_York"}, 1) == ["10:01:00"]
    assert first({"cron": "*/1 * * * *", "timezone": "UTC", "count": 2}, 5) == ["10:01:00", "10:02:00"]


def test_cron_fields() -> None:
    assert cron_field("*/15", 0, 59) == {0, 15, 30, 45}
    assert cron_field("5-8,40/10", 0, 59) == {5, 6, 7, 8, 40, 50}
    # both day fields restricted: either one matches (cron's rule); one of them '*': the other decides
    sundays_or_the_first = timetable({"cron": "0 0 1 * 0"}, AT)
    assert sundays_or_the_first.is_fire(datetime(2026, 11, 29, tzinfo=UTC))  # a Sunday
    assert sundays_or_the_first.is_fire(datetime(2026, 12, 1, tzinfo=UTC))  # a Tuesday, the 1st
    assert not sundays_or_the_first.is_fire(datetime(2026, 11, 30, tzinfo=UTC))
    assert not timetable({"cron": "0 0 * * 0"}, AT).is_fire(datetime(2026, 12, 1, tzinfo=UTC))
