"""Waking the scan of a partition a late row was written to: only where no scan holds it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import Lane, ScheduledExecution, Trigger
from jobrunner.ports import Invoker, PartitionState, ScanRequest
from jobrunner.services.wake import ScanWaker

BUCKET = datetime(2026, 11, 22, 10, 1, tzinfo=UTC)
NOW = BUCKET + timedelta(seconds=20)


class Requests(Invoker):
    def __init__(self) -> None:
        self.requests: list[ScanRequest] = []

    def invoke_scan(self, request: ScanRequest) -> None:
        self.requests.append(request)


class Unreadable(MemoryLeaseStore):
    def partitions(self, keys: object) -> list[PartitionState]:
        raise Unavailable("heartbeat table unreachable")


def row(segment: int, lane: Lane = Lane.LATE) -> ScheduledExecution:
    return ScheduledExecution(bucket=BUCKET, segment=segment, lane=lane, due_at=NOW, job_id=f"j{segment}",
                              execution_id=f"e{segment}", user_id="u", scheduled_at=NOW, attempt=1, job_version=1,
                              trigger=Trigger.MANUAL)


def test_only_partitions_no_scan_holds_are_woken() -> None:
    # Given partitions held by a scan (1), done (2), given up idle (3), whose scan died (4), never leased (5)
    leases, requests = MemoryLeaseStore(), Requests()
    for segment in (1, 2, 3, 4):
        assert leases.acquire(segment, BUCKET, f"scan-{segment}", NOW - timedelta(seconds=40), 30)
    assert leases.renew(1, BUCKET, "scan-1", NOW - timedelta(seconds=5), 30)
    assert leases.mark_done(2, BUCKET, "scan-2", NOW - timedelta(seconds=5), 0)
    assert leases.release(3, BUCKET, "scan-3", NOW - timedelta(seconds=5))
    # When late rows were written into each (and a planned row into a sixth)
    rows = [row(s) for s in (1, 2, 3, 4, 5)] + [row(6, Lane.PLANNED)]
    woken = ScanWaker(requests, leases, ManualClock(NOW)).wake(rows)
    # Then only the partitions no scan holds and that are not done get a scan, once each
    assert woken == 3
    assert requests.requests == [ScanRequest(segment=s, bucket=BUCKET) for s in (3, 4, 5)]


def test_a_released_lease_reads_as_free_whatever_the_writers_clock_says() -> None:
    # Given a scan that gave its lease up at 10:01:20 on its clock
    leases, requests = MemoryLeaseStore(), Requests()
    assert leases.acquire(3, BUCKET, "scan", NOW - timedelta(seconds=10), 30)
    assert leases.release(3, BUCKET, "scan", NOW)
    # When a writer whose clock is a second behind writes into it
    ScanWaker(requests, leases, ManualClock(NOW - timedelta(seconds=1))).wake([row(3)])
    # Then its scan is woken
    assert requests.requests == [ScanRequest(segment=3, bucket=BUCKET)]


def test_when_the_leases_cannot_be_read_every_partition_is_woken() -> None:
    requests = Requests()
    assert ScanWaker(requests, Unreadable(), ManualClock(NOW)).wake([row(1), row(1), row(2)]) == 2
    assert [r.segment for r in requests.requests] == [1, 2]
