"""Segment health: how far behind each segment's watermark is, and who last scanned it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from jobrunner.domain.time import MINUTE, minute_bucket

if TYPE_CHECKING:
    from jobrunner.ports import Clock, HeartbeatStore

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


class SegmentService:
    def __init__(self, heartbeats: HeartbeatStore, clock: Clock, segment_count: int) -> None:
        self._heartbeats = heartbeats
        self._clock = clock
        self._segment_count = segment_count

    def health(self) -> list[SegmentHealth]:
        """One entry per segment; lag is from the end of the watermark's minute to the current minute."""
        now = self._clock.now()
        states = {s.segment: s for s in self._heartbeats.segments(range(self._segment_count))}
        out = []
        for segment in range(self._segment_count):
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
                healthy=lag is not None and lag <= MAX_HEALTHY_LAG.total_seconds(),
            ))
        return out
