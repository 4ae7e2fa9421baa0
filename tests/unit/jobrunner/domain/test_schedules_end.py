"""End conditions for every recurring kind: ``end`` (no fire after it) and ``count`` (at most that many fires,
counted from the job's submission), and ``fires_left``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.schedules import MAX_COUNT, Cron, Every, anchor, fires_left, schedule_from_dict

NOW = datetime(2026, 11, 22, 10, 0, 10, tzinfo=UTC)


def fires(schedule: object, after: datetime, most: int = 50) -> list[datetime]:
    out: list[datetime] = []
    instant = anchor(schedule, NOW).first_fire(after)  # type: ignore[arg-type]
    while instant is not None and len(out) < most:
        out.append(instant)
        instant = anchor(schedule, NOW).next_fire_after(instant)  # type: ignore[arg-type]
    return out


def test_a_count_is_of_fires_from_the_submission_on_and_its_last_becomes_the_end() -> None:
    # every: from a start in the past, the fires counted are those from the submission on
    every = schedule_from_dict({"every": "PT1M", "start": "2026-11-22T09:00:00Z", "count": 3})
    anchored = anchor(every, NOW)
    assert anchored == Every(timedelta(minutes=1), start=datetime(2026, 11, 22, 9, tzinfo=UTC),
                             end=datetime(2026, 11, 22, 10, 3, tzinfo=UTC), count=3)
    assert fires(every, NOW) == [datetime(2026, 11, 22, 10, m, tzinfo=UTC) for m in (1, 2, 3)]
    # cron: the first three fires at or after the submission, in the zone
    cron = schedule_from_dict({"cron": "0 9 * * MON-FRI", "timezone": "Europe/Paris", "count": 3})
    assert fires(cron, NOW) == [datetime(2026, 11, d, 8, tzinfo=UTC) for d in (23, 24, 25)]
    assert anchor(cron, NOW).to_dict() == {"cron": "0 9 * * MON-FRI", "timezone": "Europe/Paris",
                                           "start": "2026-11-22T10:00:10.000Z", "end": "2026-11-25T08:00:00.000Z",
                                           "count": 3}
    # the stored form reads back the same, and anchoring it again at that instant changes nothing (a PATCH
    # sending it back later counts its fires from then: count is "from the request that sets it")
    stored = schedule_from_dict(anchor(cron, NOW).to_dict())
    assert stored == anchor(cron, NOW) and anchor(stored, NOW) == stored


def test_an_end_stops_every_kind_and_the_sooner_of_count_and_end_wins() -> None:
    cron = schedule_from_dict({"cron": "*/10 * * * *", "end": "2026-11-22T10:30:00Z", "count": 10})
    assert fires(cron, NOW) == [datetime(2026, 11, 22, 10, m, tzinfo=UTC) for m in (10, 20, 30)]
    cron = schedule_from_dict({"cron": "*/10 * * * *", "start": "2026-11-22T11:00:00Z", "count": 2})
    assert fires(cron, NOW) == [datetime(2026, 11, 22, 11, m, tzinfo=UTC) for m in (0, 10)]
    iso = schedule_from_dict({"iso8601": "R/2026-11-22T10:00:00Z/PT1H", "end": "2026-11-22T13:00:00Z"})
    assert fires(iso, NOW) == [datetime(2026, 11, 22, h, tzinfo=UTC) for h in (11, 12, 13)]
    assert iso.to_dict() == {"iso8601": "R/2026-11-22T10:00:00.000Z/PT1H", "end": "2026-11-22T13:00:00.000Z"}
    assert schedule_from_dict(iso.to_dict()) == iso


def test_fires_left_counts_to_the_end_or_says_none_beyond_the_bound() -> None:
    cron = anchor(schedule_from_dict({"cron": "0 * * * *", "count": 5}), NOW)
    first = cron.first_fire(NOW)
    assert fires_left(cron, first) == 5 and fires_left(cron, cron.next_fire_after(first)) == 4
    assert fires_left(cron, None) == 0
    assert fires_left(Cron("* * * * *"), NOW) is None  # no end within MAX_COUNT fires
    assert fires_left(Every(timedelta(minutes=1), start=NOW, end=NOW + timedelta(minutes=MAX_COUNT - 1)),
                      NOW) == MAX_COUNT


@pytest.mark.parametrize(("data", "field"), [
    ({"every": "PT1M", "count": 0}, "schedule.count"),
    ({"cron": "* * * * *", "count": MAX_COUNT + 1}, "schedule.count"),
    ({"cron": "* * * * *", "count": "5"}, "schedule.count"),
    ({"cron": "* * * * *", "count": True}, "schedule.count"),
    ({"cron": "* * * * *", "start": "2026-11-23T00:00:00Z", "end": "2026-11-22T00:00:00Z"}, "schedule.end"),
    ({"cron": "* * * * *", "end": "tomorrow"}, "schedule.end"),
    ({"iso8601": "R/2026-11-22T10:00:00Z/PT1H", "count": 2}, "schedule.count"),
])
def test_a_wrong_end_condition_names_its_field(data: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidField) as error:
        schedule_from_dict(data)
    assert error.value.field == field
