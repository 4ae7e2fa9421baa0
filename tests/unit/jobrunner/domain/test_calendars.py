"""Calendars (``domain.calendars``): the three ways to write an exclusion, on the calendar's wall clock."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from jobrunner.domain.calendars import calendar_from_dict, calendar_of_note, exclusion_note
from jobrunner.domain.errors import InvalidField


def paris(*exclude: dict[str, str]) -> Any:
    return calendar_from_dict("alice", "holidays", {"timezone": "Europe/Paris", "exclude": list(exclude)})


def test_a_date_is_the_whole_local_day_in_the_calendars_zone() -> None:
    calendar = paris({"date": "2026-12-25", "note": "Christmas"})
    # 2026-12-24T23:00Z is midnight in Paris (CET, +01:00): the 25th has begun there
    assert calendar.excluding(datetime(2026, 12, 24, 22, 59, 59, 999000, tzinfo=UTC)) is None
    exclusion = calendar.excluding(datetime(2026, 12, 24, 23, 0, tzinfo=UTC))
    assert exclusion is not None and exclusion.note == "Christmas"
    assert calendar.excluding(datetime(2026, 12, 25, 22, 59, tzinfo=UTC)) is exclusion
    assert calendar.excluding(datetime(2026, 12, 25, 23, 0, tzinfo=UTC)) is None
    assert exclusion_note(calendar, exclusion) == "excluded by calendar holidays (2026-12-25 (Christmas), Europe/Paris)"
    assert calendar_of_note("calendar: " + exclusion_note(calendar, exclusion)) == "holidays"


def test_a_range_of_dates_includes_both_and_a_range_of_times_excludes_its_end() -> None:
    calendar = paris({"from": "2026-12-24", "to": "2026-12-26"},
                     {"from": "2027-01-08T18:00", "to": "2027-01-11T06:00", "note": "release freeze"})
    assert calendar.excluding(datetime(2026, 12, 26, 22, 30, tzinfo=UTC)) is not None  # 23:30 on the 26th in Paris
    assert calendar.excluding(datetime(2026, 12, 26, 23, 0, tzinfo=UTC)) is None  # the 27th
    assert calendar.excluding(datetime(2027, 1, 8, 16, 59, tzinfo=UTC)) is None  # 17:59 local
    assert calendar.excluding(datetime(2027, 1, 8, 17, 0, tzinfo=UTC)) is not None  # 18:00 local
    assert calendar.excluding(datetime(2027, 1, 11, 5, 0, tzinfo=UTC)) is None  # 06:00 local: the end, excluded
    # and the form written is the form kept
    assert calendar.to_dict()["exclude"][1] == {"from": "2027-01-08T18:00", "to": "2027-01-11T06:00",
                                                "note": "release freeze"}


@pytest.mark.parametrize(("data", "field"), [
    ({"timezone": "Mars/Olympus"}, "timezone"),
    ({"exclude": {"date": "2026-12-25"}}, "exclude"),
    ({"exclude": [{"date": "2026-12-25"}, {"date": "25/12/2026"}]}, "exclude.1.date"),
    ({"exclude": [{"date": "2026-02-30"}]}, "exclude.0.date"),
    ({"exclude": [{"from": "2026-12-24"}]}, "exclude.0.to"),
    ({"exclude": [{"to": "2026-12-24"}]}, "exclude.0.from"),
    ({"exclude": [{"from": "2026-12-26", "to": "2026-12-24"}]}, "exclude.0.to"),
    ({"exclude": [{"from": "2026-12-24", "to": "2026-12-26T10:00"}]}, "exclude.0.to"),
    ({"exclude": [{"from": "2026-12-24T10:00+01:00", "to": "2026-12-26T10:00"}]}, "exclude.0.from"),
    ({"exclude": [{"date": "2026-12-25", "from": "2026-12-24", "to": "2026-12-26"}]}, "exclude.0"),
    ({"exclude": [{"date": "2026-12-25", "when": "always"}]}, "exclude.0.when"),
    ({"exclude": [{"date": "2026-12-25", "note": "x" * 201}]}, "exclude.0.note"),
    ({"exclude": [{"date": "2026-12-25"}] * 1001}, "exclude"),
    ({"colour": "red"}, "colour"),
])
def test_a_wrong_calendar_names_its_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidField) as error:
        calendar_from_dict("alice", "holidays", data)
    assert error.value.field == field


def test_a_name_is_letters_digits_and_a_few_signs() -> None:
    with pytest.raises(InvalidField) as error:
        calendar_from_dict("alice", "no/slashes", {})
    assert error.value.field == "name"
