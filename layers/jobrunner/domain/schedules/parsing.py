"""``schedule_from_dict``: the JSON form of a schedule (the API's and the store's), naming the bad field.

A schedule's shape is declared here once: its kinds, the keys each accepts, and why a key is refused. The API's
models (``api/schedules.py``) take their kinds and their messages from here, and the values' parsers from the
kinds' own modules; this parser reads rows back from the store."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.schedules.at import At
from jobrunner.domain.schedules.base import parse_count, parse_instant, parse_interval
from jobrunner.domain.schedules.cron import Cron, parse_cron, parse_dst, parse_timezone
from jobrunner.domain.schedules.every import Every
from jobrunner.domain.schedules.iso8601 import parse_repeating_interval

if TYPE_CHECKING:
    from jobrunner.domain.schedules.base import Schedule

#: The keys each kind accepts (its own first).
ALLOWED = {"at": ("at",), "every": ("every", "start", "end", "count"),
           "cron": ("cron", "timezone", "dst", "start", "end", "count"), "iso8601": ("iso8601", "end")}
#: The kinds, each named by its key.
KINDS = tuple(ALLOWED)
#: Why a schedule with none of the kinds' keys, or several, is refused.
NO_KIND = f"needs exactly one of {', '.join(repr(kind) for kind in KINDS)}"
#: Why an end before the start is refused.
END_BEFORE_START = "is before start"


def not_allowed(kind: str, name: str) -> str:
    """Why a key of another kind is refused in a schedule of ``kind``."""
    if kind == "iso8601" and name == "count":
        return "an ISO 8601 repeat states its own count: R<n>/..."
    return f"not allowed with '{kind}'"


def schedule_from_dict(data: dict[str, Any], field: str = "schedule") -> Schedule:
    """Build a schedule from its JSON form, naming the bad field (``schedule.cron``, ...) on error."""
    kinds = [k for k in KINDS if data.get(k) is not None]
    if len(kinds) != 1:
        raise InvalidField(field, NO_KIND)
    kind = kinds[0]
    extra = set(data) - set(ALLOWED[kind])
    if kind == "iso8601" and "count" in extra:
        raise InvalidField(f"{field}.count", not_allowed(kind, "count"))
    if extra:
        name = sorted(extra)[0]
        raise InvalidField(f"{field}.{name}", not_allowed(kind, name))
    if kind == "at":
        return At(at=parse_instant(str(data["at"]), f"{field}.at"))
    start = parse_instant(str(data["start"]), f"{field}.start") if data.get("start") else None
    end = parse_instant(str(data["end"]), f"{field}.end") if data.get("end") else None
    if start is not None and end is not None and end < start:
        raise InvalidField(f"{field}.end", END_BEFORE_START)
    count = parse_count(data["count"], f"{field}.count") if data.get("count") is not None else None
    if kind == "every":
        every = parse_interval(str(data["every"]), f"{field}.every")
        return Every(every=every, start=start, end=end, count=count)
    if kind == "cron":
        timezone = data.get("timezone")
        return Cron(
            cron=parse_cron(data["cron"], f"{field}.cron"),
            timezone="UTC" if timezone is None else parse_timezone(timezone, f"{field}.timezone"),
            dst=parse_dst(data["dst"], f"{field}.dst") if data.get("dst") is not None else None,
            start=start, end=end, count=count,
        )
    return replace(parse_repeating_interval(data["iso8601"], f"{field}.iso8601"), until=end)
