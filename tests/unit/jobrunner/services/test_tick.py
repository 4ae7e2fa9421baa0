"""TickService: which (minute, segment) partitions each tick dispatches."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.invokers.memory import RecordingInvoker
from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.domain.errors import Unavailable
from jobrunner.domain.schedules import At
from jobrunner.domain.spec import JobSpec
from jobrunner.domain.time import minute_bucket
from jobrunner.ports import PublishError, ScanRequest
from jobrunner.services.scan import ScanRules
from tests.support.memory import memory_container
from tests.support.waiting import waiting

if TYPE_CHECKING:
    from collections.abc import Container, Iterable, Mapping, Sequence

    from jobrunner.ports import OutboundMessage, PartitionState, SegmentState
    from jobrunner.services.scan import ScanService
    from jobrunner.services.tick import TickService

MINUTE = timedelta(minutes=1)
EVENT = datetime(2026, 11, 22, 10, 0, 42, tzinfo=UTC)  # EventBridge fired 42 s into 10:00
TARGET = datetime(2026, 11, 22, 10, 1, tzinfo=UTC)


@pytest.fixture
def leases() -> MemoryLeaseStore:
    return MemoryLeaseStore()


@pytest.fixture
def invoker() -> RecordingInvoker:
    return RecordingInvoker()


def tick_service(leases: MemoryLeaseStore, invoker: RecordingInvoker, segments: int = 1,
                 env: Mapping[str, str] | None = None, **rules: Any) -> TickService:
    """The tick function's service on ``leases`` and ``invoker``, at ``segments`` and the other settings ``env``,
    with the rules no setting names (``TickRules``' fields) that ``rules`` gives."""
    settings = {"JOBRUNNER_SEGMENTS": str(segments), **(env or {})}
    return memory_container(settings, clock=ManualClock(EVENT), leases=leases, invoker=invoker,
                            tick_rules=lambda defaults: replace(defaults, **rules)).ticks


def ticker(leases: MemoryLeaseStore, invoker: RecordingInvoker, segments: int = 1) -> TickService:
    """A tick that catches up at most 3 missed minutes."""
    return tick_service(leases, invoker, segments, max_catch_up=3)


def scans(store: MemoryJobStore, publisher: MemoryPublisher, leases: MemoryLeaseStore, clock: ManualClock,
          segments: int = 1) -> ScanService:
    """The scan function's service at ``segments``, on the tick's heartbeat table."""
    return memory_container({"JOBRUNNER_SEGMENTS": str(segments)}, clock=clock, store=store, leases=leases,
                            publisher=publisher).scans


def buckets(requests: list[ScanRequest], segment: int = 0) -> list[datetime]:
    return [r.bucket for r in requests if r.segment == segment]


def done(leases: MemoryLeaseStore, bucket: datetime, segment: int = 0) -> None:
    assert leases.acquire(segment, bucket, "scan:x", EVENT, 30)
    assert leases.mark_done(segment, bucket, "scan:x", EVENT, 0)


@pytest.mark.parametrize("now", [EVENT, EVENT + timedelta(minutes=3), EVENT - timedelta(seconds=50)])
def test_target_is_the_minute_after_the_event_whatever_now_is(
    leases: MemoryLeaseStore, invoker: RecordingInvoker, now: datetime
) -> None:
    leases.advance_watermark(0, TARGET - MINUTE)
    report = ticker(leases, invoker).tick(EVENT, now)
    assert report.target == TARGET
    assert invoker.requests == [ScanRequest(0, TARGET)]


def test_every_segment_gets_the_target(leases: MemoryLeaseStore, invoker: RecordingInvoker) -> None:
    for segment in range(4):
        leases.advance_watermark(segment, TARGET - MINUTE)
    ticker(leases, invoker, segments=4).tick(EVENT, EVENT)
    assert invoker.requests == [ScanRequest(s, TARGET) for s in range(4)]


def test_duplicate_tick_dispatches_the_same_requests(
    leases: MemoryLeaseStore, invoker: RecordingInvoker
) -> None:
    # Given a tick that already ran (its scans not started yet)
    service = ticker(leases, invoker, segments=2)
    first = service.tick(EVENT, EVENT).dispatched
    # When EventBridge delivers the same event again, a little later
    second = service.tick(EVENT, EVENT + timedelta(seconds=5)).dispatched
    # Then the same partitions are requested (the scans' leases make the duplicates harmless)
    assert first and second == first


def test_catch_up_is_oldest_first_and_bounded_but_always_includes_running_and_target(
    leases: MemoryLeaseStore, invoker: RecordingInvoker
) -> None:
    # Given a segment whose watermark is 10 minutes behind (9 missed minutes, then running and target)
    watermark = TARGET - 11 * MINUTE
    leases.advance_watermark(0, watermark)
    # When a tick runs with max_catch_up = 3
    ticker(leases, invoker).tick(EVENT, EVENT)
    # Then it dispatches the 3 oldest missed minutes, plus the running minute and the target
    assert buckets(invoker.requests) == [
        watermark + MINUTE, watermark + 2 * MINUTE, watermark + 3 * MINUTE, TARGET - MINUTE, TARGET
    ]


def test_fresh_segment_starts_at_the_initial_lookback(
    leases: MemoryLeaseStore, invoker: RecordingInvoker
) -> None:
    service = tick_service(leases, invoker, env={"JOBRUNNER_INITIAL_LOOKBACK_MINUTES": "2"})
    service.tick(EVENT, EVENT)
    assert buckets(invoker.requests) == [TARGET - 2 * MINUTE, TARGET - MINUTE, TARGET]
    assert leases.segments([0])[0].watermark == TARGET - 3 * MINUTE


def test_done_partitions_are_skipped_and_the_watermark_moves_over_the_leading_done_run(
    leases: MemoryLeaseStore, invoker: RecordingInvoker
) -> None:
    # Given watermark W and partitions W+1, W+2 and W+4 done, W+3 not
    watermark = TARGET - 5 * MINUTE
    leases.advance_watermark(0, watermark)
    for k in (1, 2, 4):
        done(leases, watermark + k * MINUTE)
    # When a tick runs
    report = ticker(leases, invoker).tick(EVENT, EVENT)
    # Then only the gap and the target are dispatched, and the watermark moves to W+2 (not past the gap)
    assert buckets(invoker.requests) == [watermark + 3 * MINUTE, TARGET]
    assert report.watermarks == {0: watermark + 2 * MINUTE}
    assert leases.segments([0])[0].watermark == watermark + 2 * MINUTE


def test_partition_with_a_live_lease_waits_and_an_expired_one_is_dispatched(
    leases: MemoryLeaseStore, invoker: RecordingInvoker
) -> None:
    # Given the running minute's scan holds a lease until EVENT + 30 s
    running = TARGET - MINUTE
    leases.advance_watermark(0, running - MINUTE)
    assert leases.acquire(0, running, "scan:a", EVENT, 30)
    service = ticker(leases, invoker)
    # When a tick judges it while the lease is live, it is left alone
    assert buckets(service.tick(EVENT, EVENT + timedelta(seconds=29)).dispatched) == [TARGET]
    # When a tick judges it once the lease has expired (the scan died), it is dispatched again
    assert buckets(service.tick(EVENT, EVENT + timedelta(seconds=30)).dispatched) == [running, TARGET]


def test_lag_is_zero_when_every_finished_minute_is_done_and_grows_with_a_stalled_segment() -> None:
    # Given segment 0 done through the minute before the running one, and segment 1 stalled 5 minutes back
    leases = MemoryLeaseStore()
    tick_time = datetime(2026, 11, 22, 10, 30, 5, tzinfo=UTC)
    running = datetime(2026, 11, 22, 10, 30, tzinfo=UTC)
    leases.advance_watermark(0, running - timedelta(minutes=1))
    leases.advance_watermark(1, running - timedelta(minutes=6))
    service = tick_service(leases, RecordingInvoker(), segments=2)
    # When the tick runs
    report = service.tick(tick_time, tick_time)
    # Then the lag says how far each segment's watermark trails
    assert report.lag_s == {0: 0.0, 1: 300.0}
    assert report.max_lag_s == 300.0


# -- partitions that keep failing (issue #12, finding 3) ------------------------------------------------------


def attempted(leases: MemoryLeaseStore, bucket: datetime, times: int, last: datetime, segment: int = 0) -> None:
    """``bucket`` leased ``times`` times by scans that died, the last one at ``last`` (its lease expired since)."""
    for attempt in range(times):
        at = last - (times - 1 - attempt) * MINUTE
        assert leases.acquire(segment, bucket, f"scan:{attempt}", at, 30)


def test_partitions_that_keep_failing_never_starve_minutes_never_tried(
    leases: MemoryLeaseStore, invoker: RecordingInvoker
) -> None:
    # Given a segment 10 minutes behind whose 3 oldest missed minutes have each failed twice
    watermark = TARGET - 11 * MINUTE
    leases.advance_watermark(0, watermark)
    for k in (1, 2, 3):
        attempted(leases, watermark + k * MINUTE, 2, last=EVENT - 2 * MINUTE)
    # When a tick runs with max_catch_up = 3
    ticker(leases, invoker).tick(EVENT, EVENT)
    # Then the catch-up budget goes to the oldest minutes never tried, not to the failing ones
    assert buckets(invoker.requests) == [
        watermark + 4 * MINUTE, watermark + 5 * MINUTE, watermark + 6 * MINUTE, TARGET - MINUTE, TARGET
    ]


def test_a_partition_that_failed_k_times_is_parked_and_the_watermark_moves_past_it(
    leases: MemoryLeaseStore, invoker: RecordingInvoker
) -> None:
    # Given the minute after the watermark failed 5 times (its last lease expired 90 s ago), the next ones done
    watermark = TARGET - 4 * MINUTE
    stuck = watermark + MINUTE
    leases.advance_watermark(0, watermark)
    attempted(leases, stuck, 5, last=EVENT - 2 * MINUTE)
    done(leases, watermark + 2 * MINUTE)
    done(leases, TARGET - MINUTE)
    # When a tick runs
    report = ticker(leases, invoker).tick(EVENT, EVENT)
    # Then the stuck partition is parked, counted, and retried; the watermark no longer waits for it
    [state] = leases.segments([0])
    assert state.parked == frozenset({stuck})
    assert state.watermark == TARGET - MINUTE == report.watermarks[0]
    assert (report.parked, report.parked_total, report.lag_s) == ({0: 1}, 1, {0: 0.0})
    assert buckets(invoker.requests) == [TARGET, stuck]


def test_a_partition_is_not_parked_while_a_scan_holds_it(
    leases: MemoryLeaseStore, invoker: RecordingInvoker
) -> None:
    watermark = TARGET - 3 * MINUTE
    leases.advance_watermark(0, watermark)
    attempted(leases, watermark + MINUTE, 5, last=EVENT - timedelta(seconds=10))  # leased until EVENT + 20 s
    report = ticker(leases, invoker).tick(EVENT, EVENT)
    assert (leases.segments([0])[0].parked, report.parked_total) == (frozenset(), 0)
    assert leases.segments([0])[0].watermark == watermark
    assert buckets(invoker.requests) == [TARGET - MINUTE, TARGET]


def test_a_parked_partition_waits_for_its_backoff_and_is_counted_meanwhile(
    leases: MemoryLeaseStore, invoker: RecordingInvoker
) -> None:
    # Given a partition parked after 7 attempts, the last lease having expired 2 minutes ago
    leases.advance_watermark(0, TARGET - MINUTE)
    stuck = TARGET - 30 * MINUTE
    attempted(leases, stuck, 7, last=EVENT - timedelta(seconds=150))
    leases.park(0, [stuck])
    service = ticker(leases, invoker)
    # When ticks run before its backoff (1 min x 2^(7-5) = 4 min after the lease expired) has passed
    report = service.tick(EVENT, EVENT)
    # Then it is not dispatched, but still counted
    assert (buckets(report.dispatched), report.parked) == ([TARGET], {0: 1})
    # And once the backoff has passed, it is
    later = service.tick(EVENT + 2 * MINUTE, EVENT + 2 * MINUTE)
    assert stuck in buckets(later.dispatched)


def test_a_parked_partition_is_unparked_once_done(
    leases: MemoryLeaseStore, invoker: RecordingInvoker
) -> None:
    leases.advance_watermark(0, TARGET - MINUTE)
    stuck = TARGET - 30 * MINUTE
    attempted(leases, stuck, 6, last=EVENT - 20 * MINUTE)
    leases.park(0, [stuck])
    assert leases.mark_done(0, stuck, "scan:5", EVENT - 19 * MINUTE, 1)  # a retry got through
    report = ticker(leases, invoker).tick(EVENT, EVENT)
    assert (report.parked, leases.segments([0])[0].parked) == ({0: 0}, frozenset())
    assert buckets(invoker.requests) == [TARGET]


def test_parked_partitions_get_one_scan_per_tick_and_whatever_catch_up_leaves(
    leases: MemoryLeaseStore, invoker: RecordingInvoker
) -> None:
    # Given three parked partitions due for a retry
    parked = [TARGET - k * MINUTE for k in (40, 50, 60)]
    for bucket in parked:
        attempted(leases, bucket, 5, last=EVENT - 10 * MINUTE)
    leases.park(0, parked)
    service = ticker(leases, invoker)
    # When the segment has no other backlog, they share the whole catch-up budget (3)
    leases.advance_watermark(0, TARGET - 2 * MINUTE)
    assert sorted(b for b in buckets(service.tick(EVENT, EVENT).dispatched) if b in parked) == sorted(parked)
    # When it has 3 minutes never tried, those come first and the parked ones get one scan
    other = RecordingInvoker()
    fresh = MemoryLeaseStore()
    for bucket in parked:
        attempted(fresh, bucket, 5, last=EVENT - 10 * MINUTE)
    fresh.park(0, parked)
    fresh.advance_watermark(0, TARGET - 6 * MINUTE)
    dispatched = buckets(ticker(fresh, other).tick(EVENT, EVENT).dispatched)
    assert dispatched[:5] == [TARGET - k * MINUTE for k in (5, 4, 3, 1, 0)]
    assert len([b for b in dispatched if b in parked]) == 1


class CountingLeases(MemoryLeaseStore):
    """Counts the partition states each tick reads."""

    def __init__(self) -> None:
        super().__init__()
        self.partitions_read = 0

    def partitions(self, keys: Iterable[tuple[int, datetime]]) -> list[PartitionState]:
        keys = list(keys)
        self.partitions_read += len(keys)
        return super().partitions(keys)


def run_scans(leases: MemoryLeaseStore, requests: Iterable[ScanRequest], now: datetime,
              failing: Container[datetime] = ()) -> None:
    """What the dispatched scans do: each leases its partition and finishes it, unless it is ``failing``."""
    for number, request in enumerate(requests):
        owner = f"scan:{now.isoformat()}:{number}"
        if leases.acquire(request.segment, request.bucket, owner, now, 30) and request.bucket not in failing:
            assert leases.mark_done(request.segment, request.bucket, owner, now, 0)


def test_the_ticks_work_stays_bounded_however_long_a_partition_stays_stuck_and_it_is_not_lost() -> None:
    # Given a healthy segment, and a minute whose scan fails every time (an unpublishable row)
    leases = CountingLeases()
    service = ticker(leases, RecordingInvoker())
    start = EVENT
    leases.advance_watermark(0, TARGET - 2 * MINUTE)
    stuck = TARGET
    retried_at: list[int] = []
    reads: list[int] = []
    # When it stays stuck for 3 hours (a tick a minute, each tick's scans run at once)
    for minute in range(180):
        now = start + minute * MINUTE
        leases.partitions_read = 0
        report = service.tick(now, now)
        reads.append(leases.partitions_read)
        if stuck in buckets(report.dispatched):
            retried_at.append(minute)
        run_scans(leases, report.dispatched, now, failing={stuck})
    # Then each tick reads a bounded number of partitions, the watermark keeps up, and the stuck one is counted
    assert max(reads[30:]) <= 5
    assert (report.parked, report.lag_s) == ({0: 1}, {0: 0.0})
    # And it is still retried, ever less often (exponential backoff, capped)
    gaps = [b - a for a, b in itertools.pairwise(retried_at)]
    assert gaps[:4] == [1, 1, 1, 1]  # its first 5 attempts: an ordinary crashed scan
    assert gaps[4:8] == sorted(gaps[4:8]) and gaps[4] < gaps[7]
    assert max(gaps) <= 32 and gaps[-1] >= 30
    # When it is fixed, its next retry finishes it, and it is no longer counted
    for minute in range(180, 215):
        now = start + minute * MINUTE
        report = service.tick(now, now)
        run_scans(leases, report.dispatched, now)
    assert report.parked == {0: 0} and leases.segments([0])[0].parked == frozenset()
    # And every minute of those 3.5 hours was scanned to the end
    every = [TARGET + k * MINUTE for k in range(214)]
    assert all(p.done for p in leases.partitions((0, b) for b in every))
    assert len(leases.partitions((0, b) for b in every)) == len(every)


class WedgedPublisher(MemoryPublisher):
    """A producer wedged for good (as kafka-python 3.0.12's idempotent producer is once it has expired a
    batch it had already sent, e.g. across a broker restart): every publish waits out its whole bound,
    then fails with nothing acknowledged."""

    def __init__(self, clock: ManualClock, give_up_at: datetime) -> None:
        super().__init__()
        self.clock = clock
        self.give_up_at = give_up_at
        self.calls = 0

    def publish(self, messages: Sequence[OutboundMessage], timeout_s: float | None = None) -> None:
        if self.clock.now() > self.give_up_at:  # fail the test instead of looping for ever
            pytest.fail(f"the scan was still publishing at {self.clock.now():%H:%M:%S}, long after its deadline")
        self.calls += 1
        self.clock.advance(timedelta(seconds=timeout_s or 10))
        raise PublishError(range(len(messages)), "KafkaTimeoutError: Timeout waiting for future")


def test_a_scan_whose_publishes_all_time_out_leaves_by_its_deadline_and_the_tick_dispatches_it_again() -> None:
    # Given a row due at 10:01:17, and a scan of 10:01 whose every publish takes its whole bound and fails
    # (the crash suite's lost partition: its publishes, each as long as the retry backoff, kept the row
    # due at once, so the scan never reached its deadline and renewed its lease for ever)
    clock = ManualClock(EVENT - timedelta(minutes=30))
    store = MemoryJobStore()
    job = memory_container({"JOBRUNNER_SEGMENTS": "1"}, clock=clock, store=store).jobs.submit(
        "alice", JobSpec(At(TARGET + timedelta(seconds=17)), {}))[0]
    leases = MemoryLeaseStore()
    leases.advance_watermark(0, TARGET - MINUTE)
    invoker = RecordingInvoker()
    service = tick_service(leases, invoker)
    rules = ScanRules(segment_count=1)  # its deadline and its publish's bound: no setting names them
    deadline = TARGET + MINUTE + rules.settle + rules.overtime
    clock.set(EVENT)
    service.tick(EVENT, EVENT)
    assert invoker.requests == [ScanRequest(0, TARGET)]
    wedged = WedgedPublisher(clock, give_up_at=TARGET + 30 * MINUTE)
    # When it runs
    report = scans(store, wedged, leases, clock).scan(ScanRequest(0, TARGET))
    # Then it leaves the partition not done within one publish of its deadline (well inside the
    # function's 6-minute timeout), having retried all along
    assert (report.acquired, report.finished, report.published) == (True, False, 0)
    assert wedged.calls > 10
    assert clock.now() <= deadline + rules.publish_timeout
    # And once its lease has lapsed (the later minutes' scans having finished meanwhile) the next tick
    # dispatches the partition again, and a scan whose publisher works publishes the row: nothing is lost
    later = minute_bucket(clock.now()) + MINUTE + timedelta(seconds=42)
    for k in range(1, 6):
        done(leases, TARGET + k * MINUTE)
    clock.set(later)
    invoker.requests.clear()
    service.tick(later, later)
    assert ScanRequest(0, TARGET) in invoker.requests
    publisher = MemoryPublisher()
    again = scans(store, publisher, leases, clock).scan(ScanRequest(0, TARGET))
    assert (again.finished, again.published) == (True, 1)
    assert [m.key for m in publisher.sent] == [job.job_id]
    assert waiting(store, leases) == []


def test_a_segment_hours_behind_reads_a_bounded_window_and_still_catches_up_oldest_first() -> None:
    leases = CountingLeases()
    watermark = TARGET - 180 * MINUTE
    leases.advance_watermark(0, watermark)
    report = ticker(leases, RecordingInvoker()).tick(EVENT, EVENT)
    assert leases.partitions_read == 60 + 2  # max_window, then the running and the next minute
    assert buckets(report.dispatched) == [watermark + k * MINUTE for k in (1, 2, 3)] + [TARGET - MINUTE, TARGET]


def test_beyond_max_parked_the_watermark_waits_for_failing_partitions_again(
    leases: MemoryLeaseStore, invoker: RecordingInvoker
) -> None:
    # Given two failing partitions after the watermark, and room for one parked partition
    watermark = TARGET - 4 * MINUTE
    leases.advance_watermark(0, watermark)
    for k in (1, 2):
        attempted(leases, watermark + k * MINUTE, 5, last=EVENT - 2 * MINUTE)
    service = tick_service(leases, invoker, max_catch_up=3, max_parked=1)
    # When a tick runs
    report = service.tick(EVENT, EVENT)
    # Then the oldest is parked, and the watermark stops at the other (as before parking): nothing is skipped
    assert leases.segments([0])[0].parked == frozenset({watermark + MINUTE})
    assert (report.watermarks, report.parked) == ({0: watermark + MINUTE}, {0: 1})


class DistinctKeysOnly(MemoryLeaseStore):
    """Refuses a read that names a partition twice, as DynamoDB's BatchGetItem does."""

    def partitions(self, keys: Iterable[tuple[int, datetime]]) -> list[PartitionState]:
        keys = list(keys)
        if len(set(keys)) != len(keys):
            raise Unavailable("ValidationException: Provided list of item keys contains duplicates")
        return super().partitions(keys)


def test_a_parked_partition_the_watermark_has_not_passed_yet_is_read_once() -> None:
    # Given the minute after the watermark failing twice (not parked), and the next one parked
    leases = DistinctKeysOnly()
    watermark = TARGET - 4 * MINUTE
    leases.advance_watermark(0, watermark)
    attempted(leases, watermark + MINUTE, 2, last=EVENT - 2 * MINUTE)
    attempted(leases, watermark + 2 * MINUTE, 5, last=EVENT - 2 * MINUTE)
    leases.park(0, [watermark + 2 * MINUTE])
    # When a tick runs, Then it reads each partition once and decides as usual
    report = ticker(leases, RecordingInvoker()).tick(EVENT, EVENT)
    assert (report.unavailable, report.parked) == ([], {0: 1})
    assert buckets(report.dispatched) == [watermark + MINUTE, TARGET - MINUTE, TARGET, watermark + 2 * MINUTE]


# -- changing the segment count (issue #12, finding 4) -----------------------------------------------------


def test_lowering_the_segment_count_keeps_scanning_the_retired_segments(
    leases: MemoryLeaseStore, invoker: RecordingInvoker
) -> None:
    # Given ticks ran with 4 segments
    ticker(leases, RecordingInvoker(), segments=4).tick(EVENT, EVENT)
    # When the count is lowered to 2
    report = ticker(leases, invoker, segments=2).tick(EVENT + MINUTE, EVENT + MINUTE)
    # Then segments 2 and 3 are still scanned (their rows drain), and so they are after a raise and a cut
    assert {r.segment for r in report.dispatched} == {0, 1, 2, 3}
    assert report.segment_count == 4
    ticker(leases, RecordingInvoker(), segments=6).tick(EVENT, EVENT)
    report = ticker(leases, RecordingInvoker(), segments=3).tick(EVENT + 2 * MINUTE, EVENT + 2 * MINUTE)
    assert {r.segment for r in report.dispatched} == set(range(6))


def test_rows_written_before_the_count_was_lowered_are_still_published() -> None:
    # Given a job planned next year (an `at` job) in segment 2 or 3 of 4, and a tick that ran with 4 segments
    clock = ManualClock(EVENT)
    due = TARGET + timedelta(days=365, seconds=7)
    for _ in range(100):
        store = MemoryJobStore()
        jobs = memory_container({"JOBRUNNER_SEGMENTS": "4"}, clock=clock, store=store).jobs
        job = jobs.submit("alice", JobSpec(At(due), {}))[0]
        [row] = store.rows.values()
        if row.segment >= 2:
            break
    leases = MemoryLeaseStore()
    tick_service(leases, RecordingInvoker(), segments=4).tick(EVENT, EVENT)
    # When every function now runs with 2 segments, and the year has passed (the segments kept up)
    tick_time = due - MINUTE
    clock.set(tick_time)
    for segment in range(4):
        leases.advance_watermark(segment, minute_bucket(due) - 2 * MINUTE)
    invoker = RecordingInvoker()
    tick_service(leases, invoker, segments=2).tick(tick_time, tick_time)
    publisher = MemoryPublisher()
    at_two = scans(store, publisher, leases, clock, segments=2)
    for request in invoker.requests:
        at_two.scan(request)
    # Then the row is published from its retired segment
    assert ScanRequest(row.segment, minute_bucket(due)) in invoker.requests
    assert [m.key for m in publisher.sent] == [job.job_id]
    assert waiting(store, leases) == []


# -- lease store failures (issue #12, finding 9) --------------------------------------------------------


class BrokenSegments(MemoryLeaseStore):
    """Raises Unavailable on every read (or only every write) that touches one of the ``broken`` segments."""

    def __init__(self, broken: set[int], reads: bool = True) -> None:
        super().__init__()
        self.broken = broken
        self.reads = reads
        self.count_readable = True

    def _check(self, segments: Iterable[int], read: bool = False) -> None:
        if (self.reads or not read) and self.broken & set(segments):
            raise Unavailable("heartbeat table: throttled")

    def segments(self, segments: Iterable[int]) -> list[SegmentState]:
        segments = list(segments)
        self._check(segments, read=True)
        return super().segments(segments)

    def partitions(self, keys: Iterable[tuple[int, datetime]]) -> list[PartitionState]:
        keys = list(keys)
        self._check((s for s, _ in keys), read=True)
        return super().partitions(keys)

    def advance_watermark(self, segment: int, bucket: datetime) -> None:
        self._check([segment])
        super().advance_watermark(segment, bucket)

    def park(self, segment: int, buckets: Iterable[datetime]) -> None:
        self._check([segment])
        super().park(segment, buckets)

    def unpark(self, segment: int, buckets: Iterable[datetime]) -> None:
        self._check([segment])
        super().unpark(segment, buckets)

    def record_segment_count(self, count: int) -> int:
        if not self.count_readable:
            raise Unavailable("heartbeat table: timed out")
        return super().record_segment_count(count)


def behind(leases: MemoryLeaseStore, segments: Iterable[int]) -> datetime:
    """Each segment 4 minutes behind, its first missed minute done (memory writes bypass the breakage)."""
    watermark = TARGET - 4 * MINUTE
    for segment in segments:
        MemoryLeaseStore.advance_watermark(leases, segment, watermark)
        assert leases.acquire(segment, watermark + MINUTE, "scan:x", EVENT, 30)
        assert leases.mark_done(segment, watermark + MINUTE, "scan:x", EVENT, 0)
    return watermark


def test_a_segment_whose_heartbeats_cannot_be_read_does_not_stop_the_others() -> None:
    # Given 3 segments behind, and the heartbeat reads of segment 1 failing
    leases = BrokenSegments({1})
    watermark = behind(leases, range(3))
    invoker = RecordingInvoker()
    # When a tick runs
    report = ticker(leases, invoker, segments=3).tick(EVENT, EVENT)
    # Then segments 0 and 2 are caught up as usual, segment 1 still gets its next minute, and it is reported
    for segment in (0, 2):
        assert buckets(invoker.requests, segment) == [watermark + 2 * MINUTE, TARGET - MINUTE, TARGET]
        assert report.watermarks[segment] == watermark + MINUTE
    assert buckets(invoker.requests, 1) == [TARGET]
    assert report.unavailable == [1]


def test_a_segment_whose_heartbeats_cannot_be_written_does_not_stop_the_others() -> None:
    leases = BrokenSegments({1}, reads=False)
    watermark = behind(leases, range(3))
    invoker = RecordingInvoker()
    report = ticker(leases, invoker, segments=3).tick(EVENT, EVENT)
    for segment in range(3):  # the scans are dispatched before any write
        assert buckets(invoker.requests, segment) == [watermark + 2 * MINUTE, TARGET - MINUTE, TARGET]
    assert [s.watermark for s in leases.segments([0, 2])] == [watermark + MINUTE] * 2
    assert report.unavailable == [1]


def test_a_tick_that_cannot_read_the_segment_count_on_record_uses_the_last_it_knew() -> None:
    leases = BrokenSegments(set())
    service = ticker(leases, RecordingInvoker(), segments=2)
    leases.record_segment_count(4)
    service.tick(EVENT, EVENT)
    leases.count_readable = False
    report = service.tick(EVENT + MINUTE, EVENT + MINUTE)
    assert {r.segment for r in report.dispatched} == {0, 1, 2, 3}
    assert tick_service(leases, RecordingInvoker(), segments=2).tick(EVENT, EVENT).segment_count == 2


# -- run_tick: the tick function's entry point --------------------------------------------------------------


def test_run_tick_reports_parked_partitions_and_unavailable_segments_as_metrics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jobrunner import wiring
    from jobrunner.config import Settings
    from jobrunner.entrypoints import run_tick
    from jobrunner.observability import metrics

    # Given segment 0 with a parked partition and segment 1 whose heartbeats cannot be read
    leases = BrokenSegments({1})
    leases.advance_watermark(0, TARGET - MINUTE)
    leases.park(0, [TARGET - 30 * MINUTE])
    attempted(leases, TARGET - 30 * MINUTE, 9, last=EVENT - timedelta(seconds=40))
    monkeypatch.setattr(wiring, "_container", None)  # the process-wide container is restored afterwards
    wiring.install(wiring.Container(
        Settings.from_env({"JOBRUNNER_SEGMENTS": "2"}), leases=leases, invoker=RecordingInvoker(),
        clock=ManualClock(EVENT),
    ))
    metrics.clear_metrics()
    try:
        # When the tick function runs
        result = run_tick({"time": "2026-11-22T10:00:42Z"})
        # Then it says so, in its result and in its metrics
        assert result == {"target": TARGET.isoformat(), "dispatched": 2, "segments": 2, "parked": 1,
                          "unavailable": [1]}
        values = {name: metric["Value"] for name, metric in metrics.metric_set.items()}
        assert values["ParkedPartitions"] == [1.0]
        assert values["HeartbeatUnavailableSegments"] == [1.0]
    finally:
        metrics.clear_metrics()
