"""``schedule_from_dict``: the JSON form of a schedule (the API's and the store's), naming the bad field."""

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

#: The keys each kind accepts besides its own.
_ALLOWED = {"at": {"at"}, "every": {"every", "start", "end", "count"},
            "cron": {"cron", "timezone", "dst", "start", "end", "count"}, "iso8601": {"iso8601", "end"}}


def schedule_from_dict(data: dict[str, Any], field: str = "schedule") -> Schedule:
    """Build a schedule from its JSON form, naming the bad field (``schedule.cron``, ...) on error."""
    kinds = [k for k in _ALLOWED if data.get(k) is not None]
    if len(kinds) != 1:
        raise InvalidField(field, "needs exactly one of 'at', 'every', 'cron', 'iso8601'")
    kind = kinds[0]
    extra = set(data) - _ALLOWED[kind]
    if kind == "iso8601" and "count" in extra:
        raise InvalidField(f"{field}.count", "an ISO 8601 repeat states its own count: R<n>/...")
    if extra:
        raise InvalidField(f"{field}.{sorted(extra)[0]}", f"not allowed with '{kind}'")
    if kind == "at":
        return At(at=parse_instant(str(data["at"]), f"{field}.at"))
    start = parse_instant(str(data["start"]), f"{field}.start") if data.get("start") else None
    end = parse_instant(str(data["end"]), f"{field}.end") if data.get("end") else None
    if start is not None and end is not None and end < start:
        raise InvalidField(f"{field}.end", "is before start")
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
