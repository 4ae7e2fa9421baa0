"""SegmentService: the per-segment health that GET /segments and the dashboard show."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.domain.errors import Unavailable
from jobrunner.services.segments import SegmentService

NOW = datetime(2026, 11, 22, 10, 0, 30, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def test_every_segment_gets_its_lag_and_health() -> None:
    leases = MemoryLeaseStore()
    leases.advance_watermark(0, datetime(2026, 11, 22, 9, 59, tzinfo=UTC))
    leases.advance_watermark(1, datetime(2026, 11, 22, 9, 50, tzinfo=UTC))
    health = SegmentService(leases, ManualClock(NOW), 3).health()
    assert [(h.segment, h.lag_s, h.healthy, h.retired, h.parked) for h in health] == [
        (0, 0.0, True, False, 0), (1, 540.0, False, False, 0), (2, None, False, False, 0),
    ]


def test_segments_retired_by_a_lower_count_are_still_listed() -> None:
    # Given the system ran with 4 segments, and now runs with 2
    leases = MemoryLeaseStore()
    leases.record_segment_count(4)
    for segment in range(4):
        leases.advance_watermark(segment, datetime(2026, 11, 22, 9, 59, tzinfo=UTC))
    # When its health is read
    health = SegmentService(leases, ManualClock(NOW), 2).health()
    # Then segments 2 and 3 are listed (they are still scanned, so their rows drain), marked retired
    assert [(h.segment, h.retired, h.healthy) for h in health] == [
        (0, False, True), (1, False, True), (2, True, True), (3, True, True),
    ]


def test_a_segment_with_parked_partitions_is_unhealthy_whatever_its_lag() -> None:
    leases = MemoryLeaseStore()
    leases.advance_watermark(0, datetime(2026, 11, 22, 9, 59, tzinfo=UTC))
    leases.park(0, [datetime(2026, 11, 22, 9, 40, tzinfo=UTC), datetime(2026, 11, 22, 9, 41, tzinfo=UTC)])
    [health] = SegmentService(leases, ManualClock(NOW), 1).health()
    assert (health.lag_s, health.parked, health.healthy) == (0.0, 2, False)


class ReadOnlyRole(MemoryLeaseStore):
    """The API's role may only read the heartbeat table: raising the record is refused."""

    def record_segment_count(self, count: int) -> int:
        highest = super().record_segment_count(0)
        if count > highest:
            raise Unavailable("heartbeat table: AccessDeniedException")
        return highest


def test_health_lists_the_configured_count_when_the_record_cannot_be_raised() -> None:
    leases = ReadOnlyRole()
    MemoryLeaseStore.record_segment_count(leases, 2)
    assert len(SegmentService(leases, ManualClock(NOW), 3).health()) == 3
    assert len(SegmentService(leases, ManualClock(NOW), 1).health()) == 2
