"""Segment health: how far behind each segment's watermark is, and who last scanned it.

Every segment below the highest count on record is listed, as the tick scans them: after the count
is lowered, the retired segments (``retired``) are still scanned, so that their rows drain. Reading
the health records the configured count too (``LeaseStore.record_segment_count``), as every
writer does before it places a row (``wiring``); when that fails, the configured count is listed,
which is then at least the one on record.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from jobrunner.domain.errors import Unavailable
from jobrunner.domain.time import MINUTE, minute_bucket

if TYPE_CHECKING:
    from jobrunner.ports import Clock, LeaseStore

log = logging.getLogger(__name__)

#: A segment whose watermark is more than this behind the running minute is unhealthy (alarm in AWS).
MAX_HEALTHY_LAG = timedelta(minutes=2)


@dataclass(frozen=True)
class SegmentHealth:
    segment: int
    watermark: datetime | None
    lag_s: float | None
    last_heartbeat: datetime | None
    last_owner: str | None
    published_total: int
    healthy: bool
    #: At or above the configured count: kept scanned for the rows written under a larger count.
    retired: bool = False
    #: Partitions whose scans kept failing, retried with backoff until done (jobrunner.services.tick).
    parked: int = 0


def start_segments(leases: LeaseStore, count: int, now: datetime) -> int:
    """What a writer does before it places a row under ``count`` segments; returns the highest count on
    record.

    Each segment the heartbeat table has never seen starts at the running minute: its watermark is set
    just before it, so the tick scans it from there however late its first tick comes (a segment the
    tick meets first starts only ``initial_lookback`` before that tick, and a row written into it
    earlier would never be read). Then the count is recorded (``LeaseStore.record_segment_count``),
    so the tick covers it. Rows are never placed in a minute before the running one, so no row of the
    writer can land before the start. Cost: one batch read, and a write per segment never seen.
    """
    seen = {state.segment for state in leases.segments(range(count))}
    for segment in range(count):
        if segment not in seen:
            leases.advance_watermark(segment, minute_bucket(now) - MINUTE)
    return leases.record_segment_count(count)


class SegmentService:
    def __init__(self, leases: LeaseStore, clock: Clock, segment_count: int) -> None:
        self._leases = leases
        self._clock = clock
        self._segment_count = segment_count

    def health(self) -> list[SegmentHealth]:
        """One entry per segment; lag is from the end of the watermark's minute to the current minute.
        A segment is healthy when its lag is at most ``MAX_HEALTHY_LAG`` and it has no parked partition."""
        now = self._clock.now()
        segments = range(self._covered())
        states = {s.segment: s for s in self._leases.segments(segments)}
        out = []
        for segment in segments:
            state = states.get(segment)
            watermark = state.watermark if state else None
            lag = None
            if watermark is not None:
                lag = max(0.0, (minute_bucket(now) - (watermark + MINUTE)).total_seconds())
            out.append(SegmentHealth(
                segment=segment, watermark=watermark, lag_s=lag,
                last_heartbeat=state.last_heartbeat if state else None,
                last_owner=state.last_owner if state else None,
                published_total=state.published_total if state else 0,
                healthy=lag is not None and lag <= MAX_HEALTHY_LAG.total_seconds() and not (state and state.parked),
                retired=segment >= self._segment_count,
                parked=len(state.parked) if state else 0,
            ))
        return out

    def _covered(self) -> int:
        """The segments the tick scans: the configured count, or the highest on record when larger."""
        try:
            return max(self._segment_count, self._leases.record_segment_count(self._segment_count))
        except Unavailable as exc:
            # A refused write means the configured count is above the record, so it is the larger one.
            log.warning("segment count on record unavailable: %s", exc)
            return self._segment_count
