"""The minute tick: decide which (minute, segment) partitions to scan, and start their scans.

The tick that fires during minute M dispatches bucket M+1, ahead of time, so that scans are already
waiting when the minute starts. It takes M from the event's own time, never from the clock, so a
late or repeated event dispatches the same partitions. For each segment it also re-dispatches every
bucket after the segment's watermark that is neither done nor held by a live lease (missed ticks,
crashed scans), oldest first and at most ``max_catch_up`` per segment per tick.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from jobrunner.domain.time import MINUTE, minute_bucket

if TYPE_CHECKING:
    from jobrunner.ports import HeartbeatStore, Invoker, PartitionState

from jobrunner.ports import ScanRequest


@dataclass(frozen=True)
class TickRules:
    segment_count: int
    max_catch_up: int = 5
    #: How far back a segment that has never been scanned starts (a fresh heartbeat table).
    initial_lookback: timedelta = timedelta(minutes=10)


@dataclass
class TickReport:
    target: datetime
    dispatched: list[ScanRequest] = field(default_factory=list)
    watermarks: dict[int, datetime] = field(default_factory=dict)
    #: Per segment: seconds from the end of its watermark minute to the start of the running minute.
    lag_s: dict[int, float] = field(default_factory=dict)

    @property
    def max_lag_s(self) -> float:
        return max(self.lag_s.values(), default=0.0)


class TickService:
    def __init__(self, heartbeats: HeartbeatStore, invoker: Invoker, rules: TickRules) -> None:
        self._heartbeats = heartbeats
        self._invoker = invoker
        self._rules = rules

    def tick(self, event_time: datetime, now: datetime) -> TickReport:
        """Dispatch the scans due for the tick of ``event_time``; ``now`` only judges lease expiry."""
        target = minute_bucket(event_time) + MINUTE
        report = TickReport(target=target)
        segments = range(self._rules.segment_count)
        states = {s.segment: s for s in self._heartbeats.segments(segments)}
        pending: dict[int, list[datetime]] = {}
        for segment in segments:
            state = states.get(segment)
            watermark = state.watermark if state and state.watermark else None
            if watermark is None:
                watermark = target - MINUTE - self._rules.initial_lookback
                self._heartbeats.advance_watermark(segment, watermark)
            buckets = []
            bucket = watermark + MINUTE
            while bucket <= target:
                buckets.append(bucket)
                bucket += MINUTE
            pending[segment] = buckets
        known = {
            (p.segment, p.bucket): p
            for p in self._heartbeats.partitions((s, b) for s, bs in pending.items() for b in bs)
        }
        for segment, buckets in pending.items():
            advanced = self._advance(segment, buckets, known, report)
            watermark = advanced or (buckets[0] - MINUTE if buckets else target)
            # Healthy is a watermark at the minute before the running one (target - 1 min is running).
            report.lag_s[segment] = max(0.0, (target - 2 * MINUTE - watermark).total_seconds())
            backlog = [b for b in buckets if self._needs_scan(known.get((segment, b)), now)]
            chosen = backlog[: self._rules.max_catch_up]
            for urgent in (target - MINUTE, target):  # the running and the next minute never wait
                if urgent in backlog and urgent not in chosen:
                    chosen.append(urgent)
            for bucket in chosen:
                request = ScanRequest(segment=segment, bucket=bucket)
                self._invoker.invoke_scan(request)
                report.dispatched.append(request)
        return report

    @staticmethod
    def _needs_scan(state: PartitionState | None, now: datetime) -> bool:
        if state is None:
            return True
        if state.done:
            return False
        return state.lease_expires_at is None or state.lease_expires_at <= now

    def _advance(
        self, segment: int, buckets: list[datetime], known: dict[tuple[int, datetime], PartitionState],
        report: TickReport,
    ) -> datetime | None:
        """Move the watermark over the leading run of done partitions; returns the new watermark."""
        last_done = None
        for bucket in buckets:
            state = known.get((segment, bucket))
            if state is None or not state.done:
                break
            last_done = bucket
        if last_done is not None:
            self._heartbeats.advance_watermark(segment, last_done)
            report.watermarks[segment] = last_done
        return last_done
