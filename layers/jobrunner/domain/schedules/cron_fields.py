"""A cron expression's five fields and a time zone's name: what ``cron.Cron`` takes, validated, and the expression
as croniter is given it (each field ``*`` or a plain list of numbers: why, ``cron``'s module doc)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from jobrunner.domain.errors import InvalidField

if TYPE_CHECKING:
    from collections.abc import Mapping

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_MONTH_NAMES = {name: n for n, name in enumerate(_MONTHS, 1)}
_DAY_NAMES = {name: n for n, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
_LONGEST_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_ITEM = re.compile(r"(?:(?P<star>\*)|(?P<low>[0-9]+|[A-Za-z]+)(?:-(?P<high>[0-9]+|[A-Za-z]+))?)(?:/(?P<step>[0-9]+))?")
#: Names ZoneInfo can load that are not time zones to schedule in: the machine's own zone, a legacy
#: rules file, and the duplicate trees (``right/`` counts leap seconds, which datetime cannot).
_NOT_ZONES = ("localtime", "posixrules", "Factory")
_NOT_ZONE_TREES = ("right/", "posix/")


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    size: int  # how many distinct values: '*' is low..low+size-1, and values wrap modulo low+size
    names: Mapping[str, int]


_FIELDS = (
    _Field("minute", 0, 59, 60, {}),
    _Field("hour", 0, 23, 24, {}),
    _Field("day-of-month", 1, 31, 31, {}),
    _Field("month", 1, 12, 12, _MONTH_NAMES),
    _Field("day-of-week", 0, 7, 7, _DAY_NAMES),  # 0 and 7 are both Sunday
)


def parse_cron(value: Any, path: str) -> str:
    """Validate a five-field cron expression; returns it with single spaces between the fields."""
    if not isinstance(value, str):
        raise InvalidField(path, "must be a string, e.g. '0 9 * * MON-FRI'")
    fields = value.split()
    if value.strip().startswith("@"):
        raise InvalidField(path, "macros such as @daily are not supported; use five fields, e.g. '0 0 * * *'")
    if len(fields) in (6, 7):
        raise InvalidField(
            path, f"has {len(fields)} fields; seconds and years are not supported: use five fields "
            "(minute hour day-of-month month day-of-week)"
        )
    if len(fields) != 5:
        raise InvalidField(path, f"needs five fields (minute hour day-of-month month day-of-week), got {len(fields)}")
    expression = " ".join(fields)
    for_croniter(expression, path)
    return expression


def for_croniter(expression: str, path: str) -> str:
    """Validate the five fields; returns the expression as croniter is given it: each field ``*`` or a
    plain list of numbers, days already combined by our rule (see ``Cron``)."""
    fields = expression.split()
    minutes, hours, days, months, weekdays = (
        _field_values(text, spec, path) for text, spec in zip(fields, _FIELDS, strict=True)
    )
    days_restricted, weekdays_restricted = fields[2] != "*", fields[4] != "*"
    if days_restricted and not weekdays_restricted and not any(
        d <= _LONGEST_MONTH[m - 1] for m in months for d in days
    ):
        raise InvalidField(path, "never fires: no month in the expression has those days")
    # Every day matches when a restricted day field covers its whole range: either side of the "or"
    # matches, or the "and" is with a field matching every day. Then both are '*' for croniter.
    every_day = (days_restricted and len(days) == _FIELDS[2].size) or (
        weekdays_restricted and len(weekdays) == _FIELDS[4].size
    )
    return " ".join(
        _plain(values, spec, restricted)
        for values, spec, restricted in zip(
            (minutes, hours, days, months, weekdays),
            _FIELDS,
            (True, True, days_restricted and not every_day, True, weekdays_restricted and not every_day),
            strict=True,
        )
    )


def _plain(values: frozenset[int], spec: _Field, restricted: bool) -> str:
    if not restricted or len(values) == spec.size:
        return "*"
    return ",".join(str(v) for v in sorted(values))


def parse_timezone(value: Any, path: str) -> str:
    """Validate an IANA time zone name (``UTC``, ``Europe/Paris``, ``America/New_York``, ...)."""
    hint = "use an IANA time zone name such as 'Europe/Paris' or 'UTC'"
    if not isinstance(value, str):
        raise InvalidField(path, f"must be a string; {hint}")
    if value == "UTC":
        return value
    if value in _NOT_ZONES or value.startswith(_NOT_ZONE_TREES):
        raise InvalidField(path, f"{value!r} is not a time zone; {hint}")
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidField(path, f"unknown time zone {value!r}; {hint}") from None
    return value


def _field_values(text: str, spec: _Field, path: str) -> frozenset[int]:
    """The values a cron field matches (Sunday as 0), raising ``InvalidField`` with a precise reason."""
    values: set[int] = set()
    for item in text.split(","):
        match = _ITEM.fullmatch(item)
        if match is None:
            names = " or names" if spec.names else ""
            raise InvalidField(
                path, f"{spec.name} field {text!r} is not valid: use numbers{names}, '*', ranges a-b, "
                "steps */n or a-b/n, and lists a,b"
            )
        if match["star"]:
            low, high = spec.low, spec.low + spec.size - 1
        else:
            low = _value(match["low"], spec, path)
            high = _value(match["high"], spec, path) if match["high"] else low
            if match["step"] and not match["high"]:
                raise InvalidField(path, f"{spec.name} step {item!r} needs a range: use */n or a-b/n")
            if high < low:
                raise InvalidField(path, f"{spec.name} range {item!r} goes backwards")
        step = int(match["step"]) if match["step"] else 1
        if not 1 <= step < spec.size:
            raise InvalidField(path, f"{spec.name} step in {item!r} must be from 1 to {spec.size - 1}")
        values.update(v % (spec.low + spec.size) for v in range(low, high + 1, step))
    return frozenset(values)


def _value(token: str, spec: _Field, path: str) -> int:
    if token.isdigit():
        number = int(token)
        if not spec.low <= number <= spec.high:
            raise InvalidField(path, f"{spec.name} {number} is out of range {spec.low}-{spec.high}")
        return number
    named = spec.names.get(token.upper())
    if named is None:
        if spec.names:
            first, *_, last = spec.names
            raise InvalidField(path, f"{token!r} is not a {spec.name} name ({first}-{last})")
        raise InvalidField(path, f"{spec.name} {token!r} is not a number")
    return named
