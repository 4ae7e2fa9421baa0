"""The minute tick: decide which (minute, segment) partitions to scan, and start their scans.

The tick that fires during minute M dispatches bucket M+1, ahead of time, so that scans are already
waiting when the minute starts. It takes M from the event's own time, never from the clock, so a
late or repeated event dispatches the same partitions. For each segment it also re-dispatches the
buckets after the segment's watermark that are neither done nor held by a live lease (missed ticks,
crashed scans), at most ``max_catch_up`` per segment per tick besides the running and the next minute,
which never wait.

Partitions that keep failing. Every lease a scan takes counts an attempt on its partition, and the
catch-up backlog is ordered by (attempts, bucket): minutes never tried go first, oldest first, so
minutes whose scans keep failing cannot use up the budget. After ``park_after`` attempts, a partition
that is neither done nor leased is *parked*: added to its segment's parked set, and only then may the
watermark move past it (so every partition behind a watermark is done or parked, and nothing is
lost). Parked partitions are retried with exponential backoff from their last lease
(``parked_backoff`` doubling up to ``parked_backoff_cap``), at least one per segment per tick and as
many as the catch-up budget leaves unused, and each is unparked once it is done; until then it is
counted in ``TickReport.parked``. So a tick reads at most ``max_window`` minutes after each watermark
plus the parked set (at most ``max_parked`` a segment; beyond that the watermark waits, as it did
before parking existed), however long a partition stays stuck.

Segment count. The tick covers every segment below the highest count ever recorded in the heartbeat
store (``LeaseStore.record_segment_count``), not only the configured one: after the count is
lowered, the retired segments' rows (some planned far ahead) are still scanned, while new rows go to
the new segments; see ``jobrunner.domain.segments``.

Failures. An ``Unavailable`` from the lease store stays confined to the segment it concerns: a
batched read that fails is retried one segment at a time, a segment that still cannot be read gets
its next minute dispatched anyway (the scan's lease makes that safe), a segment whose writes fail
keeps the scans already dispatched, and both are reported in ``TickReport.unavailable``. The next
tick catches up whatever this one could not decide.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from jobrunner.domain.errors import Unavailable
from jobrunner.domain.time import MINUTE, minute_bucket
from jobrunner.ports import ScanRequest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from jobrunner.ports import Invoker, LeaseStore, PartitionState, SegmentState

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class TickRules:
    segment_count: int
    max_catch_up: int = 5
    #: How far back a segment that has never been scanned starts (a fresh heartbeat table).
    initial_lookback: timedelta = timedelta(minutes=10)
    #: Attempts after which a partition that is still not done is parked.
    park_after: int = 5
    #: A parked partition is retried this long after its last lease expired, doubling with each attempt.
    parked_backoff: timedelta = MINUTE
    parked_backoff_cap: timedelta = timedelta(minutes=30)
    #: At most this many parked partitions a segment; beyond it the watermark waits for failing ones.
    max_parked: int = 100
    #: Minutes after the watermark that one tick considers (besides the running and the next minute).
    max_window: int = 60

    def retry_at(self, state: PartitionState) -> datetime | None:
        """When a parked partition is due again: its backoff after its last lease expired."""
        if state.lease_expires_at is None:
            return None
        doublings = min(max(0, state.attempts - self.park_after), 30)
        backoff: timedelta = min(self.parked_backoff_cap, self.parked_backoff * 2**doublings)
        return state.lease_expires_at + backoff


@dataclass
class TickReport:
    target: datetime
    dispatched: list[ScanRequest] = field(default_factory=list)
    watermarks: dict[int, datetime] = field(default_factory=dict)
    #: Per segment: seconds from the end of its watermark minute to the start of the running minute.
    lag_s: dict[int, float] = field(default_factory=dict)
    #: Segments covered: the larger of the configured count and the highest count on record.
    segment_count: int = 0
    #: Per segment: partitions parked after this tick (still failing, retried with backoff).
    parked: dict[int, int] = field(default_factory=dict)
    #: Segments whose heartbeat reads or writes failed this tick (the next tick catches them up).
    unavailable: list[int] = field(default_factory=list)

    @property
    def max_lag_s(self) -> float:
        return max(self.lag_s.values(), default=0.0)

    @property
    def parked_total(self) -> int:
        return sum(self.parked.values())


@dataclass(frozen=True)
class _Window:
    """One segment's minutes to consider: after its watermark (at most ``max_window``), and its parked ones."""

    segment: int
    watermark: datetime
    buckets: list[datetime]
    parked: frozenset[datetime]


@dataclass
class _Plan:
    dispatch: list[datetime]
    park: list[datetime]
    unpark: list[datetime]
    watermark: datetime | None
    parked: int


class TickService:
    def __init__(self, leases: LeaseStore, invoker: Invoker, rules: TickRules) -> None:
        self._leases = leases
        self._invoker = invoker
        self._rules = rules
        #: The highest segment count this instance has seen on record (used when the record cannot be read).
        self._known_segment_count = rules.segment_count

    def tick(self, event_time: datetime, now: datetime) -> TickReport:
        """Dispatch the scans due for the tick of ``event_time``; ``now`` only judges lease expiry."""
        target = minute_bucket(event_time) + MINUTE
        report = TickReport(target=target)
        segments = range(self._segment_count())
        report.segment_count = len(segments)
        failed: set[int] = set()
        states = {s.segment: s for s in self._read(self._leases.segments, {s: [s] for s in segments}, failed)}
        windows: dict[int, _Window] = {}
        for segment in segments:
            if segment not in failed:
                try:
                    windows[segment] = self._window(segment, states.get(segment), target)
                except Unavailable as exc:
                    log.warning("segment %s: cannot start its watermark: %s", segment, exc)
                    failed.add(segment)
        keys = {s: [(s, b) for b in sorted({*w.buckets, *w.parked})] for s, w in windows.items()}
        known = {(p.segment, p.bucket): p for p in self._read(self._leases.partitions, keys, failed)}
        for segment in segments:
            if segment in failed:
                self._dispatch(segment, [target], report)  # the next minute never waits
                continue
            window = windows[segment]
            plan = self._plan(window, known, target, now)
            self._dispatch(segment, plan.dispatch, report)
            watermark = window.watermark
            try:
                watermark = self._record(window, plan)
            except Unavailable as exc:
                log.warning("segment %s: heartbeat writes failed: %s", segment, exc)
                failed.add(segment)
            if watermark > window.watermark:
                report.watermarks[segment] = watermark
            # Healthy is a watermark at the minute before the running one (target - 1 min is running).
            report.lag_s[segment] = max(0.0, (target - 2 * MINUTE - watermark).total_seconds())
            report.parked[segment] = plan.parked
        report.unavailable = sorted(failed)
        return report

    def _segment_count(self) -> int:
        """Segments to cover: the configured count, or the highest on record when that is larger."""
        try:
            highest = self._leases.record_segment_count(self._rules.segment_count)
        except Unavailable as exc:
            log.warning("segment count on record unavailable, using %s: %s", self._known_segment_count, exc)
            return self._known_segment_count
        self._known_segment_count = max(self._known_segment_count, highest)
        return self._known_segment_count

    @staticmethod
    def _read(read: Callable[[list[K]], list[V]], keys: dict[int, list[K]], failed: set[int]) -> list[V]:
        """``read`` of every segment's keys in one call; when that fails, segment by segment, adding the
        segments that still fail to ``failed``."""
        wanted = {s: k for s, k in keys.items() if s not in failed}
        try:
            return read([k for ks in wanted.values() for k in ks])
        except Unavailable as exc:
            log.warning("heartbeat read failed, retrying segment by segment: %s", exc)
        out: list[V] = []
        for segment, segment_keys in wanted.items():
            try:
                out += read(segment_keys)
            except Unavailable as exc:
                log.warning("segment %s: heartbeat read failed: %s", segment, exc)
                failed.add(segment)
        return out

    def _window(self, segment: int, state: SegmentState | None, target: datetime) -> _Window:
        watermark = state.watermark if state and state.watermark else None
        if watermark is None:
            watermark = target - MINUTE - self._rules.initial_lookback
            self._leases.advance_watermark(segment, watermark)
        buckets: list[datetime] = []
        bucket = watermark + MINUTE
        while bucket <= target and len(buckets) < self._rules.max_window:
            buckets.append(bucket)
            bucket += MINUTE
        for urgent in (target - MINUTE, target):
            if urgent > watermark and urgent not in buckets:
                buckets.append(urgent)
        return _Window(segment, watermark, buckets, state.parked if state else frozenset())

    def _plan(
        self, window: _Window, known: dict[tuple[int, datetime], PartitionState], target: datetime, now: datetime
    ) -> _Plan:
        rules = self._rules
        running = target - MINUTE

        def state(bucket: datetime) -> PartitionState | None:
            return known.get((window.segment, bucket))

        def attempts(bucket: datetime) -> int:
            current = state(bucket)
            return current.attempts if current else 0

        room = max(0, rules.max_parked - len(window.parked))
        park = [b for b in window.buckets if b < running and b not in window.parked and self._failing(state(b), now)]
        park = park[:room]
        parked = window.parked | set(park)
        unpark = sorted(b for b in parked if (s := state(b)) is not None and s.done)
        waiting = parked - set(unpark)

        # The watermark moves over the leading run of minutes that are done or parked.
        watermark = None
        expected = window.watermark + MINUTE
        for bucket in window.buckets:
            current = state(bucket)
            if bucket != expected or not (bucket in parked or (current is not None and current.done)):
                break
            watermark = bucket
            expected += MINUTE

        backlog = sorted(
            (b for b in window.buckets if b not in parked and self._needs_scan(state(b), now)),
            key=lambda b: (attempts(b), b),
        )
        chosen = backlog[: rules.max_catch_up]
        spare = rules.max_catch_up - len([b for b in chosen if b < running])
        for urgent in (running, target):  # the running and the next minute never wait
            if urgent in backlog and urgent not in chosen:
                chosen.append(urgent)
        retries = sorted((b for b in waiting if self._retry_due(state(b), now)), key=lambda b: (attempts(b), b))
        dispatch = sorted(chosen) + retries[: max(1, spare)]  # chosen by attempts, started oldest first
        return _Plan(dispatch=dispatch, park=park, unpark=unpark, watermark=watermark, parked=len(waiting))

    def _record(self, window: _Window, plan: _Plan) -> datetime:
        """Write the plan: park before moving the watermark past the parked; returns the watermark."""
        if plan.park:
            self._leases.park(window.segment, plan.park)
        watermark = window.watermark
        if plan.watermark is not None:
            self._leases.advance_watermark(window.segment, plan.watermark)
            watermark = plan.watermark
        if plan.unpark:
            self._leases.unpark(window.segment, plan.unpark)
        return watermark

    def _dispatch(self, segment: int, buckets: Iterable[datetime], report: TickReport) -> None:
        for bucket in buckets:
            request = ScanRequest(segment=segment, bucket=bucket)
            self._invoker.invoke_scan(request)
            report.dispatched.append(request)

    @staticmethod
    def _live(state: PartitionState, now: datetime) -> bool:
        return state.lease_expires_at is not None and state.lease_expires_at > now

    @classmethod
    def _needs_scan(cls, state: PartitionState | None, now: datetime) -> bool:
        return state is None or (not state.done and not cls._live(state, now))

    def _failing(self, state: PartitionState | None, now: datetime) -> bool:
        return (state is not None and not state.done and state.attempts >= self._rules.park_after
                and not self._live(state, now))

    def _retry_due(self, state: PartitionState | None, now: datetime) -> bool:
        if state is None:  # its item expired (or it was parked by hand): scan it
            return True
        if state.done or self._live(state, now):
            return False
        retry_at = self._rules.retry_at(state)
        return retry_at is None or retry_at <= now
