"""``cron``: a five-field cron expression read on the wall clock of an IANA time zone.

croniter does the calendar matching, kept at arm's length:
- it only sees naive wall-clock times: with aware datetimes croniter 7 applies daylight-saving rules of its
  own (a 02:30 daily cron fires twice on a fall-back night, a skipped 02:30 fires at 03:00), so
  ``wall_clock`` maps wall-clock times to instants itself, with the policy stated on ``Cron``;
- it only sees each field as ``*`` or a plain list of numbers, built from the values ``cron_fields`` parses:
  croniter 7 reads any one-value range ``a-a`` as ``*`` (``0-0 * * * *`` would fire every minute) and
  accepts extensions (``L``, ``W``, ``#``, ``?``, ``H``, seconds, years) that are not part of our syntax.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, tzinfo
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

from croniter import croniter

from jobrunner.domain.schedules.base import MILLISECOND, nth_fire
from jobrunner.domain.schedules.cron_fields import for_croniter, parse_cron, parse_timezone
from jobrunner.domain.schedules.wall_clock import (
    AT_FIXED_TIMES,
    ON_THE_CLOCK,
    SECOND,
    DstPolicy,
    next_at_fixed_time,
    next_by_policy,
    next_on_the_clock,
    parse_dst,
    repeated,
    wall_time,
    walls_between,
)
from jobrunner.domain.time import rfc3339, utc

#: Handed on from the modules the expression's parsing and the wall clock's rules live in.
__all__ = ["AT_FIXED_TIMES", "ON_THE_CLOCK", "Cron", "DstPolicy", "parse_cron", "parse_dst", "parse_timezone"]


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
        object.__setattr__(self, "_walls", for_croniter(self.cron, "cron"))
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
            return next_on_the_clock(walls, t, self._zone)
        if self.dst is None:
            return next_at_fixed_time(walls, t, self._zone)
        return next_by_policy(walls, t, self._zone, self.dst)

    def clock_change_note(self, fire: datetime) -> str | None:
        """What a daylight-saving change did to ``fire``, one of this schedule's fires, in words (None: nothing).

        - At the end of a gap (clocks went forward): the matching times the gap skipped were moved to this
          fire (one: "moved"; several, or onto a time the expression names anyway: "merged"), or, where the
          schedule skips them, were not called for at all.
        - In a repeated stretch (clocks went back): which occurrence of its local time this fire is."""
        zone = self._zone
        if zone is UTC:
            return None
        wall = wall_time(utc(fire), zone)
        skipped_from = wall_time(utc(fire) - SECOND, zone) + SECOND
        if skipped_from < wall:  # the wall clock jumped from skipped_from to wall at this instant
            skipped = walls_between(self._walls, skipped_from, wall, limit=6)
            if skipped:
                times = ", ".join(w.strftime("%H:%M") for w in skipped[:5]) + (" ..." if len(skipped) > 5 else "")
                day = f"on {skipped[0]:%Y-%m-%d} in {self.timezone}"
                if not self._shifts_gaps:
                    return f"{times} did not exist {day} (clocks went forward): not called for"
                here = bool(walls_between(self._walls, wall, wall + SECOND, limit=1))
                verb = "merged" if len(skipped) > 1 or here else "moved"
                return f"{verb}: {times} did not exist {day} (clocks went forward); fired once at {wall:%H:%M}"
        if repeated(wall, zone):
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
