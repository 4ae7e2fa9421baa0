"""``every``: a fixed ISO 8601 duration (no years or months; use ``cron`` or ``iso8601`` for calendar periods),
firing at ``start + k * every`` for k >= 0, optionally until ``end`` (inclusive), and at most ``count`` times.
Without ``start`` the first fire is one interval after submission, like a rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

import isodate

from jobrunner.domain.time import rfc3339, utc


@dataclass(frozen=True)
class Every:
    every: timedelta
    start: datetime | None = None
    end: datetime | None = None
    #: At most this many fires from ``start``: anchoring makes the last of them the ``end`` (kept too).
    count: int | None = None
    kind: ClassVar[str] = "every"

    @property
    def recurring(self) -> bool:
        return True

    def anchored(self, now: datetime) -> Every:
        """This spec as a job submitted (or changed) at ``now`` keeps it: ``start`` fixed (one interval after ``now``
        when none was given) and, with a ``count``, its ``end`` at the count-th fire from ``now`` on (or the one
        given, if sooner)."""
        start = self.start if self.start is not None else utc(now) + self.every
        spec = Every(every=self.every, start=start, end=self.end, count=self.count)
        if self.count is None:
            return spec
        first = spec.next_fire_after(utc(now) - timedelta(milliseconds=1))
        try:
            last = first + (self.count - 1) * self.every if first is not None else None
        except OverflowError:  # past the year 9999: the count does not end it sooner
            last = None
        end = last if self.end is None or (last is not None and last < self.end) else self.end
        return Every(every=self.every, start=start, end=end, count=self.count)

    def first_fire(self, now: datetime) -> datetime | None:
        spec = self.anchored(now) if self.start is None else self
        assert spec.start is not None
        if spec.start >= now:
            return spec.start if spec.end is None or spec.start <= spec.end else None
        return spec.next_fire_after(now - timedelta(milliseconds=1))

    def next_fire_after(self, instant: datetime) -> datetime | None:
        if self.start is None:
            raise ValueError("an unanchored every schedule has no fire times; call anchored() first")
        try:
            if instant < self.start:
                candidate = self.start
            else:
                steps = (instant - self.start) // self.every + 1
                candidate = self.start + steps * self.every
        except OverflowError:  # past the year 9999: the schedule has no further fire
            return None
        if self.end is not None and candidate > self.end:
            return None
        return utc(candidate)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"every": isodate.duration_isoformat(self.every)}
        if self.start is not None:
            out["start"] = rfc3339(self.start)
        if self.end is not None:
            out["end"] = rfc3339(self.end)
        if self.count is not None:
            out["count"] = self.count
        return out
