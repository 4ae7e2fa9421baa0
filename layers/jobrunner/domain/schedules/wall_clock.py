"""A cron's fires on the wall clock of a time zone: the daylight-saving policy (``DstPolicy``) and the search for the
next instant whose local time the expression names, across clock changes (``cron.Cron`` says which rule applies)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any, ClassVar

from croniter import croniter

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.time import utc

if TYPE_CHECKING:
    from collections.abc import Callable

#: Longer than any clock change on record (Samoa skipped a whole day in December 2011).
_LONGEST_JUMP = timedelta(hours=25)
SECOND = timedelta(seconds=1)


@dataclass(frozen=True)
class DstPolicy:
    """What a cron does with a local time that does not exist (``gap``: ``skip`` or ``shift`` to just after
    the change) and with one that occurs twice (``fold``: ``first``, ``second`` or ``both``)."""

    gap: str
    fold: str

    GAPS: ClassVar[tuple[str, ...]] = ("skip", "shift")
    FOLDS: ClassVar[tuple[str, ...]] = ("first", "second", "both")


#: Debian cron's choices (see ``Cron``): an expression that follows the clock, and one of fixed times.
ON_THE_CLOCK = DstPolicy(gap="skip", fold="both")
AT_FIXED_TIMES = DstPolicy(gap="shift", fold="first")


def parse_dst(value: Any, path: str) -> DstPolicy:
    """``{"gap": "skip" | "shift", "fold": "first" | "second" | "both"}``; a part left out keeps Debian
    cron's choice for a fixed-time expression (``shift``, ``first``)."""
    if not isinstance(value, dict):
        raise InvalidField(path, 'must be an object such as {"gap": "skip", "fold": "both"}')
    unknown = sorted(set(value) - {"gap", "fold"})
    if unknown:
        raise InvalidField(f"{path}.{unknown[0]}", "not allowed: only gap and fold")
    gap, fold = value.get("gap", AT_FIXED_TIMES.gap), value.get("fold", AT_FIXED_TIMES.fold)
    if gap not in DstPolicy.GAPS:
        raise InvalidField(f"{path}.gap", f"must be one of {', '.join(DstPolicy.GAPS)}")
    if fold not in DstPolicy.FOLDS:
        raise InvalidField(f"{path}.fold", f"must be one of {', '.join(DstPolicy.FOLDS)}")
    return DstPolicy(gap=gap, fold=fold)


def next_on_the_clock(walls: croniter, t: datetime, zone: tzinfo) -> datetime | None:
    """The first instant after ``t`` whose wall-clock time in ``zone`` matches. Between two clock changes
    the wall clock is the instant plus a constant offset; at each change the search goes on from the
    change, on the wall clock of the new offset (from a repeated time after clocks go back, or past the
    skipped stretch after they go forward)."""
    cursor, since = t, wall_time(t, zone)  # the first match strictly after ``since``
    while (following := _next_wall(walls, since)) is not None:
        fire = utc((following - _offset(cursor, zone)).replace(tzinfo=UTC))
        change = _next_change(cursor, fire, zone)
        if change is None:
            return fire
        cursor, since = change, wall_time(change, zone) - SECOND  # a match at the change's own wall time counts
    return None


def next_at_fixed_time(walls: croniter, t: datetime, zone: tzinfo) -> datetime | None:
    """The first fire after ``t`` of an expression of fixed times of day: each matching wall-clock time at
    its first occurrence, a skipped one at the end of the gap that skipped it."""
    cursor = wall_time(t, zone)
    while (following := _next_wall(walls, cursor)) is not None:
        if not _exists(following, zone):
            # Skipped by a coming gap: fires as the gap ends, before any time after the gap can.
            return _instant(_first_second(following, lambda w: _exists(w, zone)), zone)
        fire = _instant(following, zone)
        if fire > t:
            return fire
        # t is in the second pass of a repeated stretch, whose times fired in the first pass.
        cursor = _first_second(following, lambda w: not repeated(w, zone)) - SECOND
    return None


def next_by_policy(walls: croniter, t: datetime, zone: tzinfo, policy: DstPolicy) -> datetime | None:
    """The first fire after ``t`` under ``policy``. Each matching wall-clock time gives its instants: one
    if it occurs once; its first, second or both occurrences if it is repeated; none, or the end of the
    gap, if it is skipped. Within a repeated stretch a later wall time's first occurrence can come
    before an earlier one's second, so the search gathers the stretch's instants and stops at the first
    wall time outside any stretch that gives an instant after ``t`` (every later one is later still).
    When ``t`` is inside a repeated stretch the search starts where the stretch's wall times begin."""
    since = wall_time(t, zone)
    if repeated(since, zone):
        since = _first_second(since - _LONGEST_JUMP, lambda w: repeated(w, zone)) - SECOND
    best: datetime | None = None
    while (following := _next_wall(walls, since)) is not None:
        since = following
        if not _exists(following, zone):
            if policy.gap == "skip":
                continue
            instants = [_instant(_first_second(following, lambda w: _exists(w, zone)), zone)]
        elif repeated(following, zone):
            first, second = _instant(following, zone), utc(following.replace(tzinfo=zone, fold=1))
            instants = {"first": [first], "second": [second], "both": [first, second]}[policy.fold]
            later = [instant for instant in instants if instant > t]
            best = min([*later, *([best] if best else [])], default=None)
            continue
        else:
            instants = [_instant(following, zone)]
        later = [instant for instant in instants if instant > t]
        if later:
            return min([*later, *([best] if best else [])])
    return best


def wall_time(instant: datetime, zone: tzinfo) -> datetime:
    return instant.astimezone(zone).replace(tzinfo=None)


def _next_wall(walls: croniter, after: datetime) -> datetime | None:
    """The first wall-clock time the expression matches strictly after ``after`` (None past year 9999)."""
    try:
        return walls.get_next(datetime, start_time=after)
    except (ValueError, OverflowError):  # CroniterBadDateError is a ValueError
        return None


def _instant(wall: datetime, zone: tzinfo) -> datetime:
    """The instant of an existing wall-clock time; of a repeated one, its first occurrence (``fold=0``,
    PEP 495)."""
    return utc(wall.replace(tzinfo=zone, fold=0))


def _exists(wall: datetime, zone: tzinfo) -> bool:
    return wall.replace(tzinfo=zone).astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall


def repeated(wall: datetime, zone: tzinfo) -> bool:
    first, second = wall.replace(tzinfo=zone, fold=0), wall.replace(tzinfo=zone, fold=1)
    return first.utcoffset() != second.utcoffset() and _exists(wall, zone)


def _offset(instant: datetime, zone: tzinfo) -> timedelta:
    return instant.astimezone(zone).utcoffset() or timedelta(0)


def _next_change(after: datetime, until: datetime, zone: tzinfo) -> datetime | None:
    """The first whole second in (``after``, ``until``] at which ``zone``'s UTC offset differs from the one at
    ``after``, or None. Looks a day at a time (two changes within ``_LONGEST_JUMP`` are not on record)."""
    before = _offset(after, zone)
    low = after
    while low < until:
        high = min(low + _LONGEST_JUMP, until)
        if _offset(high, zone) != before:
            base = low.replace(microsecond=0)  # clocks change on whole seconds: the change is base + hi s
            lo, hi = 0, math.ceil((high - base).total_seconds())
            if low.microsecond and _offset(base + SECOND, zone) != before:
                return base + SECOND
            while hi - lo > 1:
                middle = (lo + hi) // 2
                if _offset(base + middle * SECOND, zone) == before:
                    lo = middle
                else:
                    hi = middle
            return base + hi * SECOND
        low = high
    return None


def _first_second(start: datetime, holds: Callable[[datetime], bool]) -> datetime:
    """The first whole second after ``start`` (where ``holds`` is false) at which ``holds`` is true.

    A binary search over the next day: the condition is a clock change ending, so it stays true once true.
    """
    base = start.replace(microsecond=0)
    low, high = 0, int(_LONGEST_JUMP.total_seconds())
    if not holds(base + high * SECOND):
        return base + high * SECOND  # no change ends within reach: move on as far as allowed
    while high - low > 1:
        middle = (low + high) // 2
        if holds(base + middle * SECOND):
            high = middle
        else:
            low = middle
    return base + high * SECOND


def walls_between(expression: str, low: datetime, high: datetime, limit: int) -> list[datetime]:
    """Up to ``limit`` wall-clock times in [``low``, ``high``) that ``expression`` (as croniter is given it) names."""
    walls = croniter(expression, low)
    found: list[datetime] = []
    cursor = low - SECOND
    while len(found) < limit and (following := _next_wall(walls, cursor)) is not None and following < high:
        found.append(following)
        cursor = following
    return found
