"""``cron``: a five-field cron expression read on the wall clock of an IANA time zone.

croniter does the calendar matching, kept at arm's length:
- it only sees naive wall-clock times: with aware datetimes croniter 7 applies daylight-saving rules of its
  own (a 02:30 daily cron fires twice on a fall-back night, a skipped 02:30 fires at 03:00), so this module
  maps wall-clock times to instants itself, with the policy stated on ``Cron``;
- it only sees each field as ``*`` or a plain list of numbers, built from the values this module parses:
  croniter 7 reads any one-value range ``a-a`` as ``*`` (``0-0 * * * *`` would fire every minute) and
  accepts extensions (``L``, ``W``, ``#``, ``?``, ``H``, seconds, years) that are not part of our syntax.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any, ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.schedules.base import MILLISECOND, nth_fire
from jobrunner.domain.time import rfc3339, utc

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

#: Longer than any clock change on record (Samoa skipped a whole day in December 2011).
_LONGEST_JUMP = timedelta(hours=25)
_SECOND = timedelta(seconds=1)
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


@dataclass(frozen=True)
class Cron:
    """Fires at the wall-clock times a five-field cron expression names, in ``timezone``.

    Fields: minute hour day-of-month month day-of-week, with numbers, JAN-DEC and SUN-SAT (0 or 7 is
    Sunday), ``*``, ranges ``a-b``, steps ``*/n`` and ``a-b/n``, and lists. When both day fields are
    restricted (anything but a bare ``*``), a day matches if either does; otherwise both must match.

    Daylight saving follows Debian's (Vixie) cron, as its manual states it:
    - an expression whose minute or hour field starts with ``*`` (``*/5 * * * *``, ``30 * * * *``,
      ``0 */2 * * *``) follows the wall clock: it fires at every instant whose local time matches, so in
      both passes of a repeated stretch (clocks go back), and not at all in a skipped one (clocks go
      forward);
    - any other expression runs at fixed times of day: a time that occurs twice fires at its first
      occurrence only, and a time that does not exist fires once, just after the change (02:30 in a
      02:00->03:00 gap fires at 03:00 new time, merged with a fire the expression has there anyway).

    ``dst`` overrides either choice for one job: ``gap`` (a local time that does not exist: ``skip`` it or
    ``shift`` it to just after the change) and ``fold`` (a local time that occurs twice: fire at its
    ``first`` occurrence, its ``second``, or ``both``).
    """

    cron: str
    timezone: str = "UTC"
    dst: DstPolicy | None = None
    #: End conditions: no fire before ``start`` nor after ``end``; with ``count``, anchoring (``anchored``) makes
    #: the count-th fire from the job's submission the ``end`` (the count is kept, for people).
    start: datetime | None = None
    end: datetime | None = None
    count: int | None = None
    kind: ClassVar[str] = "cron"
    _zone: tzinfo = field(init=False, repr=False, compare=False)
    _walls: str = field(init=False, repr=False, compare=False)  # the expression as croniter is given it
    _follows_clock: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_zone", UTC if self.timezone == "UTC" else ZoneInfo(self.timezone))
        object.__setattr__(self, "_walls", _compile(self.cron, "cron"))
        minute, hour = self.cron.split()[:2]
        object.__setattr__(self, "_follows_clock", minute.startswith("*") or hour.startswith("*"))

    @property
    def follows_clock(self) -> bool:
        """True when the minute or hour field starts with ``*``: daylight-saving changes are followed on the
        wall clock (see the class)."""
        return self._follows_clock

    @property
    def recurring(self) -> bool:
        return True

    def first_fire(self, now: datetime) -> datetime | None:
        """The first fire at or after ``now``."""
        return self.next_fire_after(utc(now) - MILLISECOND)

    def next_fire_after(self, instant: datetime) -> datetime | None:
        t = utc(instant)
        if self.start is not None and t < self.start:
            t = self.start - MILLISECOND
        try:
            fire = self._next_fire_after(t)
        except OverflowError:  # a wall-clock time on 9999-12-31 whose UTC instant is in year 10000
            return None
        return None if fire is None or (self.end is not None and fire > self.end) else fire

    def anchored(self, now: datetime) -> Cron:
        """This spec as a job submitted (or changed) at ``now`` keeps it: with a ``count``, fires are counted from
        ``now`` (or the ``start`` given, if later), and the count-th is the ``end`` (or the one given, if sooner)."""
        if self.count is None:
            return self
        start = max(utc(now), self.start) if self.start is not None else utc(now)
        last = nth_fire(replace(self, start=start, end=None, count=None), start, self.count)
        end = last if self.end is None or (last is not None and last < self.end) else self.end
        return replace(self, start=start, end=end)

    def _next_fire_after(self, t: datetime) -> datetime | None:
        walls = croniter(self._walls, t.astimezone(self._zone).replace(tzinfo=None))
        if self.dst is None and self._follows_clock:
            return _next_on_the_clock(walls, t, self._zone)
        if self.dst is None:
            return _next_at_fixed_time(walls, t, self._zone)
        return _next_by_policy(walls, t, self._zone, self.dst)

    def clock_change_note(self, fire: datetime) -> str | None:
        """What a daylight-saving change did to ``fire``, one of this schedule's fires, in words (None: nothing).

        - At the end of a gap (clocks went forward): the matching times the gap skipped were moved to this
          fire (one: "moved"; several, or onto a time the expression names anyway: "merged"), or, where the
          schedule skips them, were not called for at all.
        - In a repeated stretch (clocks went back): which occurrence of its local time this fire is."""
        zone = self._zone
        if zone is UTC:
            return None
        wall = _wall(utc(fire), zone)
        skipped_from = _wall(utc(fire) - _SECOND, zone) + _SECOND
        if skipped_from < wall:  # the wall clock jumped from skipped_from to wall at this instant
            skipped = _walls_between(self._walls, skipped_from, wall, limit=6)
            if skipped:
                times = ", ".join(w.strftime("%H:%M") for w in skipped[:5]) + (" ..." if len(skipped) > 5 else "")
                day = f"on {skipped[0]:%Y-%m-%d} in {self.timezone}"
                if not self._shifts_gaps:
                    return f"{times} did not exist {day} (clocks went forward): not called for"
                here = bool(_walls_between(self._walls, wall, wall + _SECOND, limit=1))
                verb = "merged" if len(skipped) > 1 or here else "moved"
                return f"{verb}: {times} did not exist {day} (clocks went forward); fired once at {wall:%H:%M}"
        if _repeated(wall, zone):
            which = "second" if utc(fire).astimezone(zone).fold else "first"
            return f"{wall:%H:%M} occurred twice on {wall:%Y-%m-%d} in {self.timezone}: its {which} occurrence"
        return None

    @property
    def _shifts_gaps(self) -> bool:
        """Whether a matching local time that does not exist fires just after the change (else it is skipped)."""
        return self.dst.gap == "shift" if self.dst is not None else not self._follows_clock

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cron": self.cron, "timezone": self.timezone}
        if self.dst is not None:
            out["dst"] = {"gap": self.dst.gap, "fold": self.dst.fold}
        for name in ("start", "end"):
            if getattr(self, name) is not None:
                out[name] = rfc3339(getattr(self, name))
        if self.count is not None:
            out["count"] = self.count
        return out


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
    _compile(expression, path)
    return expression


def _compile(expression: str, path: str) -> str:
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


# --- wall clock <-> instants ------------------------------------------------------------------------


def _next_on_the_clock(walls: croniter, t: datetime, zone: tzinfo) -> datetime | None:
    """The first instant after ``t`` whose wall-clock time in ``zone`` matches. Between two clock changes
    the wall clock is the instant plus a constant offset; at each change the search goes on from the
    change, on the wall clock of the new offset (from a repeated time after clocks go back, or past the
    skipped stretch after they go forward)."""
    cursor, since = t, _wall(t, zone)  # the first match strictly after ``since``
    while (following := _next_wall(walls, since)) is not None:
        fire = utc((following - _offset(cursor, zone)).replace(tzinfo=UTC))
        change = _next_change(cursor, fire, zone)
        if change is None:
            return fire
        cursor, since = change, _wall(change, zone) - _SECOND  # a match at the change's own wall time counts
    return None


def _next_at_fixed_time(walls: croniter, t: datetime, zone: tzinfo) -> datetime | None:
    """The first fire after ``t`` of an expression of fixed times of day: each matching wall-clock time at
    its first occurrence, a skipped one at the end of the gap that skipped it."""
    cursor = _wall(t, zone)
    while (following := _next_wall(walls, cursor)) is not None:
        if not _exists(following, zone):
            # Skipped by a coming gap: fires as the gap ends, before any time after the gap can.
            return _instant(_first_second(following, lambda w: _exists(w, zone)), zone)
        fire = _instant(following, zone)
        if fire > t:
            return fire
        # t is in the second pass of a repeated stretch, whose times fired in the first pass.
        cursor = _first_second(following, lambda w: not _repeated(w, zone)) - _SECOND
    return None


def _next_by_policy(walls: croniter, t: datetime, zone: tzinfo, policy: DstPolicy) -> datetime | None:
    """The first fire after ``t`` under ``policy``. Each matching wall-clock time gives its instants: one
    if it occurs once; its first, second or both occurrences if it is repeated; none, or the end of the
    gap, if it is skipped. Within a repeated stretch a later wall time's first occurrence can come
    before an earlier one's second, so the search gathers the stretch's instants and stops at the first
    wall time outside any stretch that gives an instant after ``t`` (every later one is later still).
    When ``t`` is inside a repeated stretch the search starts where the stretch's wall times begin."""
    since = _wall(t, zone)
    if _repeated(since, zone):
        since = _first_second(since - _LONGEST_JUMP, lambda w: _repeated(w, zone)) - _SECOND
    best: datetime | None = None
    while (following := _next_wall(walls, since)) is not None:
        since = following
        if not _exists(following, zone):
            if policy.gap == "skip":
                continue
            instants = [_instant(_first_second(following, lambda w: _exists(w, zone)), zone)]
        elif _repeated(following, zone):
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


def _wall(instant: datetime, zone: tzinfo) -> datetime:
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


def _repeated(wall: datetime, zone: tzinfo) -> bool:
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
            if low.microsecond and _offset(base + _SECOND, zone) != before:
                return base + _SECOND
            while hi - lo > 1:
                middle = (lo + hi) // 2
                if _offset(base + middle * _SECOND, zone) == before:
                    lo = middle
                else:
                    hi = middle
            return base + hi * _SECOND
        low = high
    return None


def _first_second(start: datetime, holds: Callable[[datetime], bool]) -> datetime:
    """The first whole second after ``start`` (where ``holds`` is false) at which ``holds`` is true.

    A binary search over the next day: the condition is a clock change ending, so it stays true once true.
    """
    base = start.replace(microsecond=0)
    low, high = 0, int(_LONGEST_JUMP.total_seconds())
    if not holds(base + high * _SECOND):
        return base + high * _SECOND  # no change ends within reach: move on as far as allowed
    while high - low > 1:
        middle = (low + high) // 2
        if holds(base + middle * _SECOND):
            high = middle
        else:
            low = middle
    return base + high * _SECOND


def _walls_between(expression: str, low: datetime, high: datetime, limit: int) -> list[datetime]:
    """Up to ``limit`` wall-clock times in [``low``, ``high``) that ``expression`` (as croniter is given it) names."""
    walls = croniter(expression, low)
    found: list[datetime] = []
    cursor = low - _SECOND
    while len(found) < limit and (following := _next_wall(walls, cursor)) is not None and following < high:
        found.append(following)
        cursor = following
    return found
