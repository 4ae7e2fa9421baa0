"""TickService: which (minute, segment) partitions each tick dispatches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobrunner.adapters.heartbeats.memory import MemoryHeartbeatStore
from jobrunner.adapters.invokers.memory import RecordingInvoker
from jobrunner.ports import ScanRequest
from jobrunner.services.tick import TickRules, TickService

MINUTE = timedelta(minutes=1)
EVENT = datetime(2026, 11, 22, 10, 0, 42, tzinfo=UTC)  # EventBridge fired 42 s into 10:00
TARGET = datetime(2026, 11, 22, 10, 1, tzinfo=UTC)


@pytest.fixture
def heartbeats() -> MemoryHeartbeatStore:
    return MemoryHeartbeatStore()


@pytest.fixture
def invoker() -> RecordingInvoker:
    return RecordingInvoker()


def ticker(heartbeats: MemoryHeartbeatStore, invoker: RecordingInvoker, segments: int = 1) -> TickService:
    return TickService(heartbeats, invoker, TickRules(segment_count=segments, max_catch_up=3))


def buckets(requests: list[ScanRequest], segment: int = 0) -> list[datetime]:
    return [r.bucket for r in requests if r.segment == segment]


def done(heartbeats: MemoryHeartbeatStore, bucket: datetime, segment: int = 0) -> None:
    assert heartbeats.acquire(segment, bucket, "scan:x", EVENT, 30)
    assert heartbeats.finish(segment, bucket, "scan:x", EVENT, 0)


@pytest.mark.parametrize("now", [EVENT, EVENT + timedelta(minutes=3), EVENT - timedelta(seconds=50)])
def test_target_is_the_minute_after_the_event_whatever_now_is(
    heartbeats: MemoryHeartbeatStore, invoker: RecordingInvoker, now: datetime
) -> None:
    heartbeats.advance_watermark(0, TARGET - MINUTE)
    report = ticker(heartbeats, invoker).tick(EVENT, now)
    assert report.target == TARGET
    assert invoker.requests == [ScanRequest(0, TARGET)]


def test_every_segment_gets_the_target(heartbeats: MemoryHeartbeatStore, invoker: RecordingInvoker) -> None:
    for segment in range(4):
        heartbeats.advance_watermark(segment, TARGET - MINUTE)
    ticker(heartbeats, invoker, segments=4).tick(EVENT, EVENT)
    assert invoker.requests == [ScanRequest(s, TARGET) for s in range(4)]


def test_duplicate_tick_dispatches_the_same_requests(
    heartbeats: MemoryHeartbeatStore, invoker: RecordingInvoker
) -> None:
    # Given a tick that already ran (its scans not started yet)
    service = ticker(heartbeats, invoker, segments=2)
    first = service.tick(EVENT, EVENT).dispatched
    # When EventBridge delivers the same event again, a little later
    second = service.tick(EVENT, EVENT + timedelta(seconds=5)).dispatched
    # Then the same partitions are requested (the scans' leases make the duplicates harmless)
    assert first and second == first


def test_catch_up_is_oldest_first_and_bounded_but_always_includes_running_and_target(
    heartbeats: MemoryHeartbeatStore, invoker: RecordingInvoker
) -> None:
    # Given a segment whose watermark is 10 minutes behind (9 missed minutes, then running and target)
    watermark = TARGET - 11 * MINUTE
    heartbeats.advance_watermark(0, watermark)
    # When a tick runs with max_catch_up = 3
    ticker(heartbeats, invoker).tick(EVENT, EVENT)
    # Then it dispatches the 3 oldest missed minutes, plus the running minute and the target
    assert buckets(invoker.requests) == [
        watermark + MINUTE, watermark + 2 * MINUTE, watermark + 3 * MINUTE, TARGET - MINUTE, TARGET
    ]


def test_fresh_segment_starts_at_the_initial_lookback(
    heartbeats: MemoryHeartbeatStore, invoker: RecordingInvoker
) -> None:
    service = TickService(heartbeats, invoker, TickRules(segment_count=1, initial_lookback=2 * MINUTE))
    service.tick(EVENT, EVENT)
    assert buckets(invoker.requests) == [TARGET - 2 * MINUTE, TARGET - MINUTE, TARGET]
    assert heartbeats.segments([0])[0].watermark == TARGET - 3 * MINUTE


def test_done_partitions_are_skipped_and_the_watermark_moves_over_the_leading_done_run(
    heartbeats: MemoryHeartbeatStore, invoker: RecordingInvoker
) -> None:
    # Given watermark W and partitions W+1, W+2 and W+4 done, W+3 not
    watermark = TARGET - 5 * MINUTE
    heartbeats.advance_watermark(0, watermark)
    for k in (1, 2, 4):
        done(heartbeats, watermark + k * MINUTE)
    # When a tick runs
    report = ticker(heartbeats, invoker).tick(EVENT, EVENT)
    # Then only the gap and the target are dispatched, and the watermark moves to W+2 (not past the gap)
    assert buckets(invoker.requests) == [watermark + 3 * MINUTE, TARGET]
    assert report.watermarks == {0: watermark + 2 * MINUTE}
    assert heartbeats.segments([0])[0].watermark == watermark + 2 * MINUTE


def test_partition_with_a_live_lease_waits_and_an_expired_one_is_dispatched(
    heartbeats: MemoryHeartbeatStore, invoker: RecordingInvoker
) -> None:
    # Given the running minute's scan holds a lease until EVENT + 30 s
    running = TARGET - MINUTE
    heartbeats.advance_watermark(0, running - MINUTE)
    assert heartbeats.acquire(0, running, "scan:a", EVENT, 30)
    service = ticker(heartbeats, invoker)
    # When a tick judges it while the lease is live, it is left alone
    assert buckets(service.tick(EVENT, EVENT + timedelta(seconds=29)).dispatched) == [TARGET]
    # When a tick judges it once the lease has expired (the scan died), it is dispatched again
    assert buckets(service.tick(EVENT, EVENT + timedelta(seconds=30)).dispatched) == [running, TARGET]


def test_lag_is_zero_when_every_finished_minute_is_done_and_grows_with_a_stalled_segment() -> None:
    # Given segment 0 done through the minute before the running one, and segment 1 stalled 5 minutes back
    heartbeats = MemoryHeartbeatStore()
    tick_time = datetime(2026, 11, 22, 10, 30, 5, tzinfo=UTC)
    running = datetime(2026, 11, 22, 10, 30, tzinfo=UTC)
    heartbeats.advance_watermark(0, running - timedelta(minutes=1))
    heartbeats.advance_watermark(1, running - timedelta(minutes=6))
    service = TickService(heartbeats, RecordingInvoker(), TickRules(segment_count=2))
    # When the tick runs
    report = service.tick(tick_time, tick_time)
    # Then the lag says how far each segment's watermark trails
    assert report.lag_s == {0: 0.0, 1: 300.0}
    assert report.max_lag_s == 300.0
