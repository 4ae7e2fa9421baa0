"""Schedules and their fire times.

A schedule is an immutable spec; its fire times are a pure function of (spec, instant):
``first_fire(now)`` is the first fire at or after submission and ``next_fire_after(t)`` the first
fire strictly after ``t``. Neither keeps state, so any process can compute the next run from the
stored spec alone. Kinds, one module each:

- ``at``: one fire at an instant.
- ``every``: a fixed ISO 8601 duration from an optional start, until an optional end.
- ``cron``: a five-field cron expression in an IANA time zone, with a stated daylight-saving policy.
- ``iso8601``: an ISO 8601 repeating interval (``R5/2026-11-22T10:00:00Z/PT1H``), calendar durations allowed.

``docs/schedules.md`` describes them for users.
"""

from jobrunner.domain.schedules.at import At
from jobrunner.domain.schedules.base import (
    AT_PAST_TOLERANCE,
    MAX_COUNT,
    MIN_INTERVAL,
    Schedule,
    anchor,
    fires_at,
    fires_left,
    nth_fire,
    parse_instant,
    parse_interval,
)
from jobrunner.domain.schedules.cron import Cron, DstPolicy, parse_cron, parse_timezone
from jobrunner.domain.schedules.every import Every
from jobrunner.domain.schedules.iso8601 import RepeatingInterval, parse_repeating_interval
from jobrunner.domain.schedules.parsing import schedule_from_dict

__all__ = [
    "AT_PAST_TOLERANCE",
    "MAX_COUNT",
    "MIN_INTERVAL",
    "At",
    "Cron",
    "DstPolicy",
    "Every",
    "RepeatingInterval",
    "Schedule",
    "anchor",
    "fires_at",
    "fires_left",
    "nth_fire",
    "parse_cron",
    "parse_instant",
    "parse_interval",
    "parse_repeating_interval",
    "parse_timezone",
    "schedule_from_dict",
]
