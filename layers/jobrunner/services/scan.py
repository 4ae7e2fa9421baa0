"""The segment scan: publish every execution of one (minute, segment) partition at its due instant.

One scan owns one partition through a lease. It streams the PLANNED lane in due order, polls the
LATE lane about every second (rows written by others after the scan may have started: each poll reads
the next window of due time, so each row once, ``domain.placement``), keeps in memory
the rows it writes into its own partition (the next fires of short-period jobs, watchdogs: written to
its PLANNED lane, which no poll reads, and read from there only by a scan taking over), and for each group of
due rows: reads their jobs, drops rows that are stale (cancelled job, or a fire re-planned under a
newer job version), publishes the rest, having first recorded each one as RUNNING (so that no worker
result can arrive for an execution the store does not know), then plans the next run. A done PLANNED
row is not deleted (it expires): the scan's progress through that lane (the position up to which every
row is settled) is kept in its lease item at each renewal, and a scan that takes the partition over
resumes from there.

Failure handling, in order of the steps:
- a read fails (the planned stream, a late poll, the jobs): retried with backoff within the scan; a
  broken planned stream resumes after the last row it yielded;
- publish fails: the rows stay in the partition and are retried with backoff within the scan; a row
  the broker refused ``max_publish_attempts`` times (a record too large for its topic, a permission
  lost), or whose topic is no longer allowed, is dead-lettered with its reason and recorded FAILED,
  so one bad row never holds its partition (and its segment's watermark) back. A row that only ever
  times out (a topic the broker does not know) is retried until the scan's budget ends; its
  partition is then parked by the tick, which raises the ParkedPartitions alarm;
- a row planned under a job version the job has not reached yet belongs to a change whose
  compare-and-set has not landed (a change writes its rows first): it waits up to ``change_grace``
  for it, and only then counts as the row of a change that lost its race (its writer removes it too);
- the history/next-run write fails: retried without publishing again, the next run placed anew at
  each attempt (a retried write must never land in a partition whose scan has finished);
- the lease: renewed before every publish so that it outlasts the publish's own bound; a scan that
  cannot renew stops publishing before its lease can lapse, so no second scan publishes beside it;
- anything left at the end of the scan's budget: the partition is not marked done, so its lease
  expires and the tick dispatches it again. Rows already published but not completed are then
  published again with the same ``execution_id`` (the one duplicate a crash can cause), except an
  execution whose result already came back, which is only completed: a scan of a partition leased
  before (its lease item counts the attempts) reads each row's history record before publishing it.
  It reads the PLANNED lane from the progress the last renewal kept, so the rows it sees again are
  those settled since then (about ``progress_every`` of them) and those never settled.

The history record written before the publish also carries what the job's run fields are derived from
(the schedule version and the next fire, ``domain.jobs.with_runs``): an execution writes nothing to the
job's row, so one tenant's jobs share no partition that every execution writes.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal, Protocol

from jobrunner.domain.calendars import exclusion_note
from jobrunner.domain.errors import Unavailable
from jobrunner.domain.fire_rules import (
    OVERLAP_HOPS,
    OVERLAP_LOOKBACK,
    Decision,
    Previous,
    PreviousState,
    catch_up,
    catch_up_note,
    decide,
    held_fires,
    overlap_note,
    previous_fire,
    recheck_after,
    running_after,
    started_since,
)
from jobrunner.domain.jobs import (
    ExecutionRecord,
    ExecutionStatus,
    Job,
    Lane,
    LanePosition,
    ScheduledExecution,
    Trigger,
    due_of,
    execution_id_for,
    origin_of,
)
from jobrunner.domain.messages import cancel_message, execution_message
from jobrunner.domain.placement import LATE_REACH, SETTLE, placed_anew, placed_in_time, plan_execution
from jobrunner.domain.policies import Overlap, SkipReason, skip_note
from jobrunner.domain.publication import (
    ENDED,
    next_fire,
    planned_ahead,
    publishable,
    row_identity,
    started_record,
)
from jobrunner.domain.receipts import result_token
from jobrunner.domain.time import MINUTE, utc
from jobrunner.ports import (
    Completion,
    HistoryStore,
    JobStore,
    OutboundMessage,
    Outcome,
    PublishError,
    ScheduledRowStore,
)
from jobrunner.services.outcomes import dead_letter
from jobrunner.services.wake import wake

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from jobrunner.domain.calendars import Calendar
    from jobrunner.domain.topics import TopicGrants
    from jobrunner.ports import CalendarStore, Clock, HeartbeatStore, Publisher, ScanRequest
    from jobrunner.services.outcomes import Outcomes
    from jobrunner.services.retire import Retirer
    from jobrunner.services.wake import ScanWaker

log = logging.getLogger(__name__)

_MS = timedelta(milliseconds=1)


@dataclass(frozen=True)
class ScanRules:
    segment_count: int
    lease_ttl: timedelta = timedelta(seconds=30)
    renew_every: timedelta = timedelta(seconds=10)
    #: How often a scan that has moved on keeps its progress (a renewal that carries it): a scan taking
    #: the partition over after a crash publishes again what was settled since (same ``execution_id``).
    progress_every: timedelta = timedelta(seconds=2)
    poll_every: timedelta = timedelta(seconds=1)
    settle: timedelta = SETTLE
    #: How long after its bucket ends a scan keeps retrying failures before leaving them to catch-up.
    overtime: timedelta = timedelta(minutes=3)
    group_size: int = 500
    #: The first group after the scan has caught up is this small, and each next one twice the last, up to
    #: ``group_size``: the first rows of a burst go out after a few round trips, not after a whole group
    #: has been read and recorded (about 5 s for 500 rows in each of 16 scans sharing two cores).
    first_group: int = 50
    #: Rows already due that a scan holds to share out between tenants (``_Due``): one tenant's burst
    #: delays another's rows by at most one round of the tenants present, as long as the burst's backlog
    #: in the partition fits in this many rows (the memory it costs: about 1 KB a row).
    fair_window: int = 5_000
    retry_backoff: timedelta = timedelta(seconds=1)
    #: The longest one publish may take (the publisher's bound); the lease must outlast it.
    publish_timeout: timedelta = timedelta(seconds=10)
    #: Spare lease time kept beyond a publish's bound (clock skew, the renewal's own round trip).
    lease_margin: timedelta = timedelta(seconds=5)
    #: Publishes of one row the broker refuses for good before it is dead-lettered instead.
    max_publish_attempts: int = 5
    #: How long a row planned under a version the job has not reached yet waits for the change that
    #: planned it to land (its compare-and-set follows its rows) before it counts as a lost change's; and
    #: how long a row whose job cannot be read waits for the job's own write (a create writes the first run
    #: first) before it counts as the row of a create that failed.
    change_grace: timedelta = timedelta(seconds=30)
    #: Topics a row's tenant may still publish to (None: any); a row for another is dead-lettered at once
    #: (the topic left the deployment's allowed list, or the tenant's grant was taken back).
    topics: TopicGrants | None = None
    dead_letter_topic: str = "job-dlq"
    #: The key that signs each message's result token (``domain.receipts``); the results function checks it.
    result_key: bytes = b""
    #: A scan with nothing to do for this long (its planned lane read, nothing due, nothing pending, no
    #: late row in its polls) gives its lease up and ends, unless its minute closes sooner anyway. Only
    #: where the writers of LATE rows wake the partition's scan (``services.wake``); None: never.
    idle_end: timedelta | None = None
    #: How long a scan uses a calendar it has read before reading it again: a change of a calendar applies
    #: to the fires published this long after it lands.
    calendar_refresh: timedelta = timedelta(seconds=10)


@dataclass
class ScanReport:
    segment: int
    bucket: datetime
    acquired: bool = False
    finished: bool = False
    lost_lease: bool = False
    published: int = 0
    dropped: int = 0
    errors: int = 0
    expired: int = 0  # watchdog rows handled
    dead_lettered: int = 0  # rows that could not be published, sent to the dead-letter topic instead
    replays_skipped: int = 0  # replayed rows whose execution had already ended: completed, not republished
    skipped: int = 0  # fires a policy did not run (a calendar's exclusion, ...): recorded SKIPPED, completed
    held: int = 0  # fires an overlap policy held (written again for later)
    cancels: int = 0  # cancel messages sent for a previous execution (overlap policy cancel_other)
    idle: bool = False  # ended early with nothing to do, the lease given up (``ScanRules.idle_end``)
    #: Late rows that landed behind a window of the late lane already read (a writer's clock more than
    #: ``domain.placement.CLOCK_SKEW`` off, or a write slower than it said): published late by the last look at
    #: the whole lane. 0 in a healthy system (the ``LateRowsBehindWindow`` alarm).
    behind_window: int = 0
    reported: int = 0  # published executions already added to the segment's heartbeat counters
    lateness_ms: list[float] = field(default_factory=list)


class _Due:
    """Rows waiting to be published (the planned stream merged with late polls and the rows the scan
    writes into its own partition), handed out fairly between tenants.

    **Fairness.** Rows that are due are moved, in order of due instant, into a window of at most
    ``window`` rows, one queue per tenant; ``take`` hands them out round-robin between the tenants in
    the window, each tenant's rows in order of due instant. So at the top of a minute one tenant's
    thousands of fires delay another tenant's few by at most one round (one row of each tenant present),
    not by the whole burst, which they did when rows came out in the partition's order (by job id
    within a second). Only a backlog larger than the window (per partition) makes a later tenant wait
    for the window to drain below it.

    The planned stream is read lazily, from ``start`` (the position a scan before this one settled the
    lane up to) on; when a read of it fails, it is reopened after the last row it yielded, once
    ``retry_at`` has come. Every planned row taken from the stream, and every row the scan writes into
    its own planned lane (``add_own``), is tracked until it is settled (``settle``); ``progress()`` is
    the position up to which every planned row is settled and none is still unread: the point a later
    scan resumes from."""

    def __init__(
        self, open_planned: Callable[[LanePosition | None], Iterator[ScheduledExecution]],
        start: LanePosition | None = None, window: int = 5_000,
    ) -> None:
        self._open = open_planned
        #: Due rows not taken yet, a queue per tenant, in the order the tenants take turns.
        self._window: OrderedDict[str, deque[ScheduledExecution]] = OrderedDict()
        self._window_rows = 0
        self._window_cap = max(1, window)
        self._planned: Iterator[ScheduledExecution] | None = None
        self._last_read: LanePosition | None = start
        #: Planned rows taken or written and not yet settled (a heap, with stale entries skipped lazily),
        #: and the settled positions not yet passed by the progress.
        self._unsettled: dict[tuple[object, ...], LanePosition] = {}
        self._unsettled_heap: list[tuple[LanePosition, tuple[object, ...]]] = []
        self._settled: list[LanePosition] = []
        self._progress: LanePosition | None = start
        #: Rows this scan wrote into its own planned lane: already in the heap, skipped if the stream yields them.
        self._own: set[tuple[object, ...]] = set()
        self._heap: list[tuple[datetime, int, ScheduledExecution]] = []
        self._order = itertools.count()
        #: Late-lane rows already taken, by identity (each poll returns the rows it returned before).
        #: Planned rows are streamed once, in order: a scan's memory does not grow with its partition
        #: (docs/benchmarks.md, "Memory"), only with its late lane and the rows it writes into its own.
        self.seen: set[tuple[object, ...]] = set()
        self._head: ScheduledExecution | None = None
        #: When the broken planned stream is to be reopened (None: not broken).
        self.retry_at: datetime | None = None

    def open(self, now: datetime, backoff: timedelta) -> None:
        self._planned = self._open(self._last_read)
        self.retry_at = None
        self._advance_head(now, backoff)

    def _advance_head(self, now: datetime, backoff: timedelta) -> None:
        assert self._planned is not None
        while True:
            try:
                self._head = next(self._planned, None)
            except Unavailable as exc:
                log.warning("planned lane read failed, resuming in %s: %s", backoff, exc)
                self._head, self.retry_at = None, now + backoff
                return
            if self._head is None:
                return
            self._last_read = LanePosition.of(self._head)
            if row_identity(self._head) not in self._own:  # a row of our own is in the heap already
                return

    def add(self, row: ScheduledExecution, not_before: datetime | None = None) -> None:
        heapq.heappush(self._heap, (max(row.due_at, not_before or row.due_at), next(self._order), row))

    def add_own(self, row: ScheduledExecution) -> None:
        """A row this scan wrote into its own PLANNED lane: published from memory, tracked until settled."""
        identity = row_identity(row)
        if identity in self._own:
            return
        self._own.add(identity)
        self._track(row)
        self.add(row)

    def _track(self, row: ScheduledExecution) -> None:
        identity, position = row_identity(row), LanePosition.of(row)
        if identity not in self._unsettled:
            self._unsettled[identity] = position
            heapq.heappush(self._unsettled_heap, (position, identity))

    def next_at(self) -> datetime | None:
        candidates = [t for t in (self._head.due_at if self._head else None,
                                  self._heap[0][0] if self._heap else None, self.retry_at) if t is not None]
        if self._window:
            candidates.append(min(queue[0].due_at for queue in self._window.values()))
        return min(candidates) if candidates else None

    def take(self, now: datetime, limit: int, backoff: timedelta) -> list[ScheduledExecution]:
        """Up to ``limit`` due rows, round-robin between tenants (see the class's docstring)."""
        out: list[ScheduledExecution] = []
        while len(out) < limit:
            self._fill(now, backoff)
            if not self._window:
                break
            tenant, queue = next(iter(self._window.items()))
            out.append(queue.popleft())
            self._window_rows -= 1
            if queue:
                self._window.move_to_end(tenant)
            else:
                del self._window[tenant]
        return out

    def _fill(self, now: datetime, backoff: timedelta) -> None:
        """Move due rows into the window, earliest first, until it is full or nothing else is due."""
        while self._window_rows < self._window_cap:
            if self._heap and self._heap[0][0] <= now and (
                self._head is None or self._heap[0][0] <= self._head.due_at
            ):
                row = heapq.heappop(self._heap)[2]
            elif self._head is not None and self._head.due_at <= now:
                row = self._head
                self._track(row)
                self._advance_head(now, backoff)
            else:
                return
            queue = self._window.get(row.user_id)
            if queue is None:
                queue = self._window[row.user_id] = deque()
            queue.append(row)
            self._window_rows += 1

    def empty(self) -> bool:
        return self._head is None and not self._heap and not self._window and self.retry_at is None

    def settle(self, rows: Iterable[ScheduledExecution]) -> None:
        """Rows dealt with for good (completed, or dropped as stale)."""
        for row in rows:
            position = self._unsettled.pop(row_identity(row), None) if row.lane is Lane.PLANNED else None
            if position is not None:
                heapq.heappush(self._settled, position)

    def progress(self) -> LanePosition | None:
        """The position up to which every planned row is settled: past no unsettled row, and past no row
        the stream has not yielded yet (the head, or everything after the last row read while it is broken)."""
        while self._unsettled_heap and self._unsettled.get(self._unsettled_heap[0][1]) != self._unsettled_heap[0][0]:
            heapq.heappop(self._unsettled_heap)  # settled since it was pushed
        while self._settled:
            top = self._settled[0]
            if self._unsettled_heap and top >= self._unsettled_heap[0][0]:
                break
            if self._head is not None and top >= LanePosition.of(self._head):
                break
            if self.retry_at is not None and self._last_read is not None and top > self._last_read:
                break
            heapq.heappop(self._settled)
            self._progress = top if self._progress is None else max(self._progress, top)
        return self._progress


class _LeaseLost(Exception):
    pass


class _Unset:
    """No value given (where None is one)."""


_UNSET = _Unset()


@dataclass
class _Partition:
    """One scan's working state."""

    segment: int
    bucket: datetime
    owner: str
    report: ScanReport
    due: _Due
    #: When the lease is known to hold until (the last acquire or renewal plus its time to live).
    lease_until: datetime
    #: Published rows whose completion is still to be written, with the job they were published for.
    pending: list[tuple[ScheduledExecution, Job]] = field(default_factory=list)
    #: Per row identity: failed publishes, and how many of them the broker refused (the dead-letter threshold).
    failures: dict[tuple[object, ...], tuple[int, int]] = field(default_factory=dict)
    #: Rows planned under a job version the job has not reached yet, and when each was first seen.
    ahead: dict[tuple[object, ...], datetime] = field(default_factory=dict)
    #: Pending rows whose execution had already ended (a replay): completed without a watchdog.
    ended: set[tuple[object, ...]] = field(default_factory=set)
    #: Topics whose records the broker refused for good in this scan (their next rows: one refusal is enough).
    refusing_topics: set[str] = field(default_factory=set)
    #: Rows refused in a shared publish: published one at a time until the refusal is pinned on one.
    suspects: set[tuple[object, ...]] = field(default_factory=set)
    #: Set when this scan wrote a row into its own partition: another late poll is needed before done.
    wrote_here: bool = False
    #: The partition was leased before (a crash, a lost lease, a budget run out): its rows may be replays.
    replaying: bool = False
    #: The progress the last renewal kept in the lease item.
    kept: LanePosition | None = None
    #: The calendars read by this scan (``ScanService._calendar``), by (tenant, name), with when each was read.
    calendars: dict[tuple[str, str], tuple[Calendar | None, datetime]] = field(default_factory=dict)
    #: The fire to plan after a pending row, where a policy decided it (a catch-up window's resume, None for a
    #: fire held before, whose next fire was planned then); by row identity, until its completion is written.
    next_fires: dict[tuple[object, ...], datetime | None] = field(default_factory=dict)
    #: Where the next poll of the late lane starts (the due instant up to which it has been read).
    late_from: datetime | None = None
    #: How many rows the next group may take (``ScanRules.first_group``, doubling up to ``group_size``).
    group_limit: int = 0
    #: The executions this scan has published, with the job version of the row published: a second row of one
    #: of them (a copy re-asserted by a writer under the same execution_id, keyed elsewhere in the partition) is
    #: dropped, not published again; one of another version (a change that landed late planned the same fire
    #: again) is only completed, so that its next fire is planned under that version.
    published_ids: dict[str, int] = field(default_factory=dict)


class ScanStores(JobStore, ScheduledRowStore, HistoryStore, Protocol):
    """The store ports a scan uses: its partition's scheduled rows (read, settled, written), the jobs (read)
    and the executions' history (written before each publish, read for replays and overlap policies)."""


@dataclass
class _Loop:
    """The timers of a scan's loop (``ScanService._run``)."""

    next_poll: datetime
    next_renew: datetime
    next_progress: datetime
    #: A late poll that read the lane to its end has returned since the last write into this partition.
    final_poll_done: bool = False
    #: Since when the scan has had nothing to do (``ScanRules.idle_end``).
    idle_since: datetime | None = None


class ScanService:
    def __init__(
        self, store: ScanStores, publisher: Publisher, heartbeats: HeartbeatStore, clock: Clock,
        rules: ScanRules, owner_prefix: str = "scan", outcomes: Outcomes | None = None,
        waker: ScanWaker | None = None, calendars: CalendarStore | None = None, retirer: Retirer | None = None,
    ) -> None:
        #: Deletes a job that asked for it once its last fire is skipped and nothing else runs (``services.retire``).
        self._retirer = retirer
        #: Ends a timed-out execution when its watchdog row comes due (None: watchdog rows are only settled).
        self._outcomes = outcomes
        #: The tenants' calendars, read for the jobs that name one (``_fires_to_run``); None: none applied.
        self._calendars = calendars
        #: Wakes the scan of another partition this scan wrote a LATE row to (``services.wake``).
        self._waker = waker
        self._store = store
        self._publisher = publisher
        self._heartbeats = heartbeats
        self._clock = clock
        self._rules = rules
        self._owner_prefix = owner_prefix

    def scan(self, request: ScanRequest) -> ScanReport:
        segment, bucket = request.segment, request.bucket
        report = ScanReport(segment=segment, bucket=bucket)
        owner = f"{self._owner_prefix}:{uuid.uuid4()}"
        now = self._clock.now()
        try:
            acquired = self._heartbeats.acquire(segment, bucket, owner, now, self._rules.lease_ttl.total_seconds())
        except Unavailable as exc:  # nothing done yet: the tick dispatches the partition again
            log.warning("could not acquire %s/%s: %s", segment, bucket, exc)
            report.errors += 1
            return report
        if not acquired:
            log.info("partition %s/%s is leased or done; skipping", segment, bucket)
            return report
        report.acquired = True
        start: LanePosition | None = None
        try:
            states = self._heartbeats.partitions([(segment, bucket)])
            replaying = not states or states[0].attempts != 1
            if states and states[0].progress is not None:  # a scan before this one settled the lane up to there
                start = LanePosition.decode(states[0].progress)
        except Unavailable:
            replaying = True  # unknown: read the lane whole and check each row's record, as after a crash
        due = _Due(lambda after: self._store.lane_rows(bucket, segment, Lane.PLANNED, after=after), start,
                   window=self._rules.fair_window)
        part = _Partition(segment, bucket, owner, report, due, lease_until=now + self._rules.lease_ttl,
                          replaying=replaying, kept=start)
        try:
            self._run(part)
        except _LeaseLost:
            report.lost_lease = True
            log.warning("lost the lease of %s/%s; stopping", segment, bucket)
        return report

    def _run(self, part: _Partition) -> None:
        end = part.bucket + MINUTE + self._rules.settle
        deadline = end + self._rules.overtime
        now = self._clock.now()
        part.due.open(now, self._rules.retry_backoff)
        loop = _Loop(next_poll=now, next_renew=now + self._rules.renew_every,
                     next_progress=now + self._rules.progress_every)
        while True:
            now = self._clock.now()
            self._upkeep(part, loop, now, end)
            after = self._publish_next_group(part, now, deadline)
            if after is None:
                continue
            now = after
            if part.wrote_here:  # our own write into this partition needs one more look at the late lane
                loop.final_poll_done = False
            if loop.final_poll_done and part.due.empty() and not part.pending:
                break
            if self._idle_ended(part, loop, now, end):
                return
            if now >= deadline:
                log.error("partition %s/%s left for catch-up with work outstanding", part.segment, part.bucket)
                with contextlib.suppress(_LeaseLost):  # keeps the progress since the last renewal for the next scan
                    self._renew(part, now)
                return
            wake_at = min(t for t in (part.due.next_at(), loop.next_poll, loop.next_renew) if t is not None)
            self._clock.sleep_until(wake_at)
        self._finish(part, deadline)

    def _upkeep(self, part: _Partition, loop: _Loop, now: datetime, end: datetime) -> None:
        """What each turn of the scan's loop does before taking rows: renew the lease (keeping the progress),
        reopen a broken planned stream, poll the late lane, and write the completions still pending."""
        rules = self._rules
        if now >= loop.next_renew or (now >= loop.next_progress and part.due.progress() != part.kept):
            self._renew(part, now)
            loop.next_renew = now + rules.renew_every
        if now >= loop.next_progress:
            loop.next_progress = now + rules.progress_every
        if part.due.retry_at is not None and now >= part.due.retry_at:
            part.due.open(now, rules.retry_backoff)
        if now >= loop.next_poll:
            polled_at_end = now >= end
            part.wrote_here = False
            if self._poll_late(part, now, to_end=polled_at_end):
                loop.final_poll_done = loop.final_poll_done or polled_at_end
            loop.next_poll = now + rules.poll_every
        if part.pending:
            self._complete(part)

    def _publish_next_group(self, part: _Partition, now: datetime, deadline: datetime) -> datetime | None:
        """Publish the next group of due rows, if any. None: the loop goes on at once (the group got something
        through, or the deadline has not passed); else the instant the loop's checks go on with."""
        rules = self._rules
        limit = part.group_limit or min(rules.first_group, rules.group_size)
        rows = part.due.take(now, limit, rules.retry_backoff)
        # Caught up (fewer rows than allowed): the next burst starts small again; else the groups grow.
        part.group_limit = min(rules.group_size, limit * 2) if len(rows) == limit else 0
        if not rows:
            return now
        progress = _progress(part.report)
        self._publish(part, rows, now)
        # A group that got nothing through ends the scan once the deadline has passed: its rows
        # may be due again at once (a publish that times out lasts as long as the retry backoff),
        # so the checks after it would never be reached, and the lease, renewed before each publish,
        # would never lapse for another scan to take the partition over.
        now = self._clock.now()
        if now < deadline or _progress(part.report) > progress:
            return None
        return now

    def _idle_ended(self, part: _Partition, loop: _Loop, now: datetime, end: datetime) -> bool:
        """Whether the scan, with nothing to do for ``ScanRules.idle_end``, gave its lease up and may end."""
        idle_end = self._rules.idle_end
        if idle_end is None or not part.due.empty() or part.pending or part.wrote_here:
            loop.idle_since = None
        elif loop.idle_since is None:
            loop.idle_since = now
        elif now - loop.idle_since >= idle_end and now < end - idle_end:
            if self._end_idle(part):
                return True
            loop.idle_since = None
        return False

    def _end_idle(self, part: _Partition) -> bool:
        """Give the lease up with nothing left to do; True when the scan may end. A writer whose wake came
        while this scan still held the lease was refused, so the late lane gets one more look after the
        release, to its end (a row due later than the polls have reached counts too): if it holds
        something, the scan takes the lease back and goes on (or leaves the rows to the scan that took it
        first)."""
        now = self._clock.now()
        progress = part.due.progress()
        try:
            self._beat(part, now)
            released = self._heartbeats.release(part.segment, part.bucket, part.owner, now,
                                                progress=progress.encode() if progress is not None else None)
        except Unavailable as exc:
            log.warning("could not give up the lease of %s/%s: %s", part.segment, part.bucket, exc)
            return False
        if not released:
            raise _LeaseLost
        if self._poll_late(part, self._clock.now(), to_end=True) and part.due.empty():
            part.report.idle = True
            log.info("partition %s/%s idle: lease given up", part.segment, part.bucket)
            return True
        try:  # something arrived (or the poll failed): take the partition back, unless a woken scan has
            taken = self._heartbeats.acquire(part.segment, part.bucket, part.owner, self._clock.now(),
                                             self._rules.lease_ttl.total_seconds())
        except Unavailable:
            taken = False
        if not taken:  # another scan holds it now (or nobody, and the tick dispatches it again): stop here
            part.report.idle = True
            return True
        part.lease_until = self._clock.now() + self._rules.lease_ttl
        return False

    def _finish(self, part: _Partition, deadline: datetime) -> None:
        """Mark the partition done (retrying a failing heartbeat store until the deadline) and move the
        segment's watermark when this was the next bucket after it."""
        while True:
            now = self._clock.now()
            try:
                self._beat(part, now)
                part.report.finished = self._heartbeats.mark_done(
                    part.segment, part.bucket, part.owner, now, part.report.published
                )
                if part.report.finished:
                    states = self._heartbeats.segments([part.segment])
                    if states and states[0].watermark is not None and states[0].watermark >= part.bucket - MINUTE:
                        self._heartbeats.advance_watermark(part.segment, part.bucket)
                return
            except Unavailable as exc:
                part.report.errors += 1
                if now >= deadline:  # not marked done: the lease expires and the tick redispatches
                    log.error("could not mark %s/%s done: %s", part.segment, part.bucket, exc)
                    return
                self._clock.sleep_until(now + self._rules.retry_backoff)

    def _renew(self, part: _Partition, now: datetime) -> None:
        """Extend the lease. Raises ``_LeaseLost`` when another scan owns it, or when the heartbeat store
        cannot be reached and the lease is about to lapse (so this scan stops before another starts)."""
        progress = part.due.progress()
        try:
            renewed = self._heartbeats.renew(
                part.segment, part.bucket, part.owner, now, self._rules.lease_ttl.total_seconds(),
                progress=progress.encode() if progress is not None else None,
            )
        except Unavailable as exc:
            part.report.errors += 1
            log.warning("lease renewal of %s/%s failed: %s", part.segment, part.bucket, exc)
            if now + self._rules.lease_margin >= part.lease_until:
                raise _LeaseLost from exc
            return
        if not renewed:
            raise _LeaseLost
        part.lease_until = now + self._rules.lease_ttl
        part.kept = progress
        try:
            self._beat(part, now)
        except Unavailable:
            part.report.errors += 1  # counters only: added to the next beat

    def _lease_covers_publish(self, part: _Partition) -> bool:
        """Renew if needed so that the lease outlasts a publish started now; False when it cannot."""
        needed = self._rules.publish_timeout + self._rules.lease_margin
        now = self._clock.now()
        if part.lease_until - now < needed:
            self._renew(part, now)
        return part.lease_until - self._clock.now() >= needed

    def _beat(self, part: _Partition, now: datetime) -> None:
        report = part.report
        self._heartbeats.beat(part.segment, part.owner, now, report.published - report.reported)
        report.reported = report.published

    def _poll_late(self, part: _Partition, now: datetime, to_end: bool) -> bool:
        """Read the late lane's next window: the rows due from where the last poll stopped (the whole lane's
        start for the first) up to ``LATE_REACH`` after ``now``, or, once the minute has ended (``to_end``), the
        whole lane to its end. No row lands behind a window once read (``domain.placement``), so each row is read
        once, and no poll but the last reads again the rows (and the tombstones of the done rows) of the windows
        before it. The last one does, to find a row that landed behind them all the same (a writer's clock off by
        more than the bound): it is published late, counted (``ScanReport.behind_window``) and logged, not lost."""
        reach = now + LATE_REACH
        since = None if to_end else part.late_from
        try:
            for row in self._store.lane_rows(part.bucket, part.segment, Lane.LATE, since=since,
                                             until=None if to_end else reach):
                if row_identity(row) not in part.due.seen:
                    part.due.seen.add(row_identity(row))
                    part.due.add(row)
                    self._behind(part, row)
        except Unavailable as exc:
            log.warning("late lane poll of %s/%s failed: %s", part.segment, part.bucket, exc)
            return False
        part.late_from = reach if part.late_from is None else max(part.late_from, reach)
        return True

    @staticmethod
    def _behind(part: _Partition, row: ScheduledExecution) -> None:
        """Count and log a late row found behind the windows already read (see ``_poll_late``)."""
        if part.late_from is not None and row.due_at < part.late_from:
            part.report.behind_window += 1
            log.error("a late row landed behind the late lane's windows already read (clock skew between its "
                      "writer and this scan beyond the bound?): published late", extra={
                          "job_id": row.job_id, "execution_id": row.execution_id, "due_at": row.due_at.isoformat(),
                          "read_up_to": part.late_from.isoformat()})

    def _publish(self, part: _Partition, rows: list[ScheduledExecution], now: datetime) -> None:
        """Publish due rows; their completions are written, or left pending for the next attempt."""
        report, due = part.report, part.due
        retry_at = now + self._rules.retry_backoff
        watchdogs = [r for r in rows if r.trigger is Trigger.TIMEOUT]
        if watchdogs:
            self._expire(part, watchdogs, retry_at)
            rows = [r for r in rows if r.trigger is not Trigger.TIMEOUT]
            if not rows:
                return
        try:
            jobs = self._store.get_jobs(sorted({(r.user_id, r.job_id) for r in rows}))
        except Unavailable as exc:
            log.warning("job reads failed, retrying: %s", exc)
            report.errors += 1
            for row in rows:
                due.add(row, not_before=retry_at)
            return
        live, stale = self._triage(part, rows, jobs, now, retry_at)
        if stale:
            self._drop_stale(part, stale)
        if live:
            live = self._fires_to_run(part, live, retry_at)
        if live:
            self._publish_live(part, live, retry_at)
        self._complete(part)

    def _triage(
        self, part: _Partition, rows: list[ScheduledExecution], jobs: dict[tuple[str, str], Job], now: datetime,
        retry_at: datetime,
    ) -> tuple[list[tuple[ScheduledExecution, Job]], list[ScheduledExecution]]:
        """Sort due rows (their jobs read) into those to publish, with their jobs, and the stale ones; a row
        whose job or version has not landed yet waits (then is settled by reading), a replay whose result is in
        is only completed, and a row whose topic is no longer allowed is dead-lettered."""
        live: list[tuple[ScheduledExecution, Job]] = []
        stale: list[ScheduledExecution] = []
        for row in rows:
            job = jobs.get((row.user_id, row.job_id))
            if job is None or planned_ahead(row, job):
                landed = self._landed_by_now(part, row, now, retry_at)
                if landed is None:
                    continue  # it waits (or waits for the store again)
                if landed is False:
                    stale.append(row)
                    continue
                job = landed
            published_as = part.published_ids.get(row.execution_id)
            if not publishable(row, job) or published_as == row.job_version:
                stale.append(row)
            elif published_as is not None:
                # Published by this scan under another version: a change that landed late planned the same fire
                # again (#31, found by the model). The execution went out; its completion plans the fires after
                # it under the row's version (dropping it as a copy left the job with no next fire).
                part.ended.add(row_identity(row))
                part.pending.append((row, job))
            elif (part.replaying or row.trigger is Trigger.BACKFILL) and self._already_ended(row):
                # a replay, or a backfill's row written again by a repeated request that read no record yet and
                # landed late (#31): the result is in, only the completion is left
                part.report.replays_skipped += 1
                part.ended.add(row_identity(row))
                part.pending.append((row, job))
            elif self._rules.topics is not None and not self._rules.topics.permits(job.user_id, job.topic):
                self._dead_letter(part, row, job, f"topic {job.topic!r} is no longer allowed for its tenant", retry_at)
            else:
                live.append((row, job))
        return live, stale

    def _landed_by_now(
        self, part: _Partition, row: ScheduledExecution, now: datetime, retry_at: datetime,
    ) -> Job | Literal[False] | None:
        """A row planned by a change whose compare-and-set on the job has not shown yet (a change writes its rows
        first), or the first run of a job whose own write has not shown yet (a create writes the first run
        first: ``JobStore.create_job``). It waits ``change_grace`` for them (None: it waits); then the doubt is
        settled by reading (``JobStore.get_job_settled``: a compare-and-set that timed out has landed by then, or
        never will): the job as it now stands if the row's version has landed, False if it never will (the
        row is stale), None while it waits, and if the read failed (it waits for the store, as any row does)."""
        identity = row_identity(row)
        first_seen = part.ahead.setdefault(identity, now)
        if now - first_seen < self._rules.change_grace:
            part.due.add(row, not_before=retry_at)
            return None
        try:
            settled = self._store.get_job_settled(row.user_id, row.job_id)
        except Unavailable as exc:
            log.warning("settling read failed, retrying: %s", exc, extra={"job_id": row.job_id})
            part.report.errors += 1
            part.due.add(row, not_before=retry_at)
            return None
        part.ahead.pop(identity, None)
        return False if settled is None or planned_ahead(row, settled) else settled

    def _drop_stale(self, part: _Partition, stale: list[ScheduledExecution]) -> None:
        """Drop rows no job wants any more. A stale PLANNED row is left to expire with the rest of its lane; a
        LATE one is removed so that the late lane's polls stop returning it."""
        try:
            self._store.delete_scheduled([r for r in stale if r.lane is Lane.LATE])
        except Unavailable:
            part.report.errors += 1  # harmless: the row is never published, and a later scan drops it again
        part.report.dropped += len(stale)
        part.due.settle(stale)

    def _fires_to_run(
        self, part: _Partition, live: list[tuple[ScheduledExecution, Job]], retry_at: datetime,
    ) -> list[tuple[ScheduledExecution, Job]]:
        """Of the rows about to be published, those their jobs' calendars and policies let run. A fire of the
        schedule that its job's calendar excludes, that its catch-up window drops, or that its overlap policy
        skips is recorded SKIPPED (the record says why) and completed instead of published; one its overlap
        policy holds is written again for later (``_hold``). A job with none of these costs nothing more; a
        calendar costs a read of it per scan (again after ``ScanRules.calendar_refresh``), an overlap policy
        a read of the job's records before the fire (``_previous``)."""
        if all(job.calendar is None and job.overlap is Overlap.ALLOW_ALL and job.catch_up.replays_all and not row.held
               for row, job in live):
            return live
        run: list[tuple[ScheduledExecution, Job]] = []
        for row, job in live:
            if row.trigger is not Trigger.SCHEDULE:
                run.append((row, job))
                continue
            try:
                decided = self._fire_rules(part, row, job, retry_at)
            except Unavailable as exc:
                log.warning("reads for a fire's policies failed, retrying: %s", exc, extra={"job_id": row.job_id})
                part.report.errors += 1
                part.due.add(row, not_before=retry_at)
                continue
            if decided:
                run.append((row, job))
        return run

    def _fire_rules(self, part: _Partition, row: ScheduledExecution, job: Job, retry_at: datetime) -> bool:
        """Apply the job's calendar, catch-up window and overlap policy to one fire; True when it is to be
        published (after a cancel message for the execution before it, under ``cancel_other``)."""
        now = self._clock.now()
        previous: Previous | None = None
        own: ExecutionRecord | None = None
        holding = 0
        if job.overlap is not Overlap.ALLOW_ALL:
            previous, own, holding = self._previous(job, row)
        elif part.replaying:  # a replay: was this fire dealt with already? (as ``_already_ended`` asks)
            own = self._store.get_record(row.job_id, row.scheduled_at, row.attempt, row.execution_id)
        if own is not None and own.published_at is not None:
            return True  # published before (a replay, a second copy of its row): again, as it was, same id
        if own is not None and own.status is ExecutionStatus.SKIPPED:  # not run before, for a reason: so it stays
            part.report.replays_skipped += 1
            part.ended.add(row_identity(row))
            part.pending.append((row, job))
            return False
        # Held before (the row says so; older held rows only by their record): its next fire was planned then,
        # never again, whatever releases it (its policy, or a change to allow_all), skips it or holds it again.
        held = row.held or (own is not None and own.status is ExecutionStatus.SCHEDULED)
        if held and (row.held or self._next_fire_dealt_with(row, job)):
            part.next_fires[row_identity(row)] = None
        if self._excluded_by_calendar(part, row, job, retry_at):
            return False
        if not held and self._dropped_by_catch_up(part, row, job, now, retry_at, own):  # (a held one is not missed)
            return False
        if previous is None:
            return True
        return self._overlap_allows(part, row, job, previous, holding, held=held, retry_at=retry_at)

    def _next_fire_dealt_with(self, row: ScheduledExecution, job: Job) -> bool:
        """Whether the fire after ``row``'s has a record: asked of a row not held whose own record says held, which a
        scan wrote first when it held the fire, then its held copy, then the completion that plans the next fire.
        A scan that died in between left the row to replay and the next fire maybe unplanned (#31, found by the
        model's search): it is planned again unless it has been dealt with (a copy already written is the same
        execution). One read, on this path only (a replay, or a held row written before the ``held`` column)."""
        following = next_fire(row, job)
        if following is None:
            return True
        execution_id = execution_id_for(row.job_id, following, 1, Trigger.SCHEDULE)
        return self._store.get_record(row.job_id, following, 1, execution_id) is not None

    def _excluded_by_calendar(self, part: _Partition, row: ScheduledExecution, job: Job, retry_at: datetime) -> bool:
        """Whether the job's calendar excludes the fire (then recorded SKIPPED, ``_skip``)."""
        if job.calendar is None or self._calendars is None:
            return False
        calendar = self._calendar(part, job.user_id, job.calendar)
        if calendar is None:  # deleted while a job named it (a race the API cannot rule out): not applied
            log.warning("job %s names calendar %s, which does not exist: not applied", job.job_id, job.calendar)
            return False
        exclusion = calendar.excluding(row.scheduled_at)
        if exclusion is None:
            return False
        self._skip(part, row, job, skip_note(SkipReason.CALENDAR, exclusion_note(calendar, exclusion)), retry_at)
        return True

    def _dropped_by_catch_up(
        self, part: _Partition, row: ScheduledExecution, job: Job, now: datetime, retry_at: datetime,
        own: ExecutionRecord | None,
    ) -> bool:
        """Whether the job's catch-up window drops the fire (then it and the fires after it up to the resume are
        recorded as one SKIPPED record, ``_skip``). A fire with a record of its own is not dropped: its
        execution was recorded going out (a write-ahead whose answer was lost, then retried late), and may have
        gone out; a SKIPPED record written over it would keep its publication (#31, found by the model's long
        search). It goes out again, under its id. One point read, on the drop's path only."""
        if job.catch_up.replays_all:
            return False
        # Missed from the latest instant its jitter window may put it at (a row written late, e.g. by a resume, is
        # keyed later): a fire's row is planned when the fire before it goes out, which that fire's own offset in
        # its window may put after this one's due instant (a window wider than the period), with no outage at all.
        latest = row.scheduled_at + timedelta(seconds=job.jitter_s or 0)
        dropped = catch_up(job.catch_up, job.schedule, row.scheduled_at, latest, now)
        if dropped is None:
            return False
        if own is None:
            own = self._store.get_record(row.job_id, row.scheduled_at, row.attempt, row.execution_id)
        if own is not None and own.status is not ExecutionStatus.SKIPPED:
            return False
        part.next_fires[row_identity(row)] = dropped.resume
        self._skip(part, row, job, catch_up_note(job.catch_up, row.scheduled_at, dropped.resume), retry_at,
                   next_fire=dropped.resume)
        return True

    def _overlap_allows(
        self, part: _Partition, row: ScheduledExecution, job: Job, previous: Previous, holding: int, *, held: bool,
        retry_at: datetime,
    ) -> bool:
        """Whether the job's overlap policy lets the fire run now, given the execution before it: a skip is
        recorded, a hold written again for later, a cancel sent before this fire is published."""
        decision = decide(job.overlap, previous, holding)
        if decision is Decision.SKIP:
            self._skip(part, row, job, overlap_note(job.overlap, previous), retry_at)
            return False
        if decision is Decision.HOLD:
            self._hold(part, row, job, first=not held, retry_at=retry_at)
            return False
        if decision is Decision.CANCEL_AND_RUN:
            return self._cancel_previous(part, row, job, previous, retry_at)
        return True

    def _previous(self, job: Job, row: ScheduledExecution) -> tuple[Previous, ExecutionRecord | None, int]:
        """The fire of the schedule before ``row``'s and its state (``domain.fire_rules.previous_fire``), the
        record of ``row``'s own fire if it has one, and (under buffer_all) how many fires before it are held. An
        execution of a later fire still running counts too (a schedule changed to fire earlier), and so does one
        published after the fire before was (a change of schedule that landed late: ``started_since``). One read
        of the job's newest records (which usually reach down to the fire); another from the fire when some are newer
        (a run now); another when a skip in between names a fire further back, or the page runs out (at most
        ``OVERLAP_HOPS`` more); under buffer_all, one more while fires are held."""
        fire = row.scheduled_at
        records = self._store.history_page(job.job_id, OVERLAP_LOOKBACK)  # the newest: usually down to the fire
        later = running_after(records, fire, job.schedule_version)
        if any(r.scheduled_at > fire for r in records):  # newer records (a run now, an earlier fire): read from it
            records = self._store.history_page(job.job_id, OVERLAP_LOOKBACK, before=(fire + _MS, 0, None))
        own = next((r for r in records if r.scheduled_at == fire and r.trigger is Trigger.SCHEDULE and r.attempt == 1),
                   None)
        found = previous_fire(records, fire, job.schedule_version, more=len(records) == OVERLAP_LOOKBACK)
        for _ in range(OVERLAP_HOPS):  # a skip named a fire further back, or the page ran out: walk on from there
            if not isinstance(found, datetime):
                break
            back = found + _MS
            page = self._store.history_page(job.job_id, OVERLAP_LOOKBACK, before=(back, 0, None))
            found = previous_fire(page, back, job.schedule_version, more=len(page) == OVERLAP_LOOKBACK)
        previous = later or (found if isinstance(found, Previous) else Previous(PreviousState.NONE))
        if previous.state not in (PreviousState.RUNNING, PreviousState.HELD):  # one published out of turn still runs?
            previous = started_since(records, fire, previous, job.schedule_version) or previous
        holding = 0
        if job.overlap is Overlap.BUFFER_ALL and previous.state is PreviousState.HELD and previous.at is not None:
            # how long the queue is: the fires held up to the newest (one more read, while fires are held)
            back = previous.at + _MS
            queue = self._store.history_page(job.job_id, OVERLAP_LOOKBACK, before=(back, 0, None))
            holding = held_fires(queue, back, job.schedule_version)
        return previous, own, holding

    def _hold(self, part: _Partition, row: ScheduledExecution, job: Job, *, first: bool, retry_at: datetime) -> None:
        """Hold a fire until the execution before it reports: write it again, due after ``recheck_after``, under
        the same execution id. The first time, its record says it is held (status SCHEDULED) and the schedule's
        next fire is planned as usual; after that only the row moves on."""
        now = self._clock.now()
        again_at = utc(now + recheck_after(row.scheduled_at, now))
        again = replace(plan_execution(job, again_at, now, self._rules.segment_count, trigger=Trigger.SCHEDULE,
                                       scheduled_at=row.scheduled_at), job_version=row.job_version, held=True)
        again = _own(part, again, again_at, now)
        record = replace(started_record(row, job, now), status=ExecutionStatus.SCHEDULED, published_at=None)
        try:
            if first:
                self._store.write_outcomes([Outcome(record, None)])
            self._store.write_scheduled([again])
        except Unavailable as exc:
            log.warning("holding a fire failed, retrying: %s", exc, extra={"job_id": row.job_id})
            part.report.errors += 1
            part.due.add(row, not_before=retry_at)
            return
        part.report.held += 1
        part.ended.add(row_identity(row))
        part.pending.append((row, job))
        returned_at = self._clock.now()
        lease_held = returned_at < part.lease_until - self._rules.lease_margin
        if _in(part, again) and again.lane is Lane.PLANNED and lease_held:
            part.due.add_own(again)
        elif _in(part, again) and again.lane is Lane.PLANNED:
            self._replace_late(part, [again])
        else:
            part.wrote_here = part.wrote_here or _in(part, again)
            wake(self._waker, [] if _in(part, again) else [again])
            if not placed_in_time([again], now, returned_at):
                self._replace_late(part, [again])

    def _cancel_previous(self, part: _Partition, row: ScheduledExecution, job: Job, previous: Previous,
                         retry_at: datetime) -> bool:
        """Under ``cancel_other``: ask the workers (on the job's topic) to cancel the execution before this fire;
        True once the broker has it (this fire is then published); if it cannot be sent, the row is retried."""
        assert previous.execution_id is not None and previous.at is not None
        key, value, headers = cancel_message(job, previous.execution_id, previous.at, previous.attempt,
                                             row.scheduled_at)
        try:
            self._publisher.publish([OutboundMessage(topic=job.topic, key=key, value=value, headers=headers)],
                                    timeout_s=self._rules.publish_timeout.total_seconds())
        except PublishError as exc:
            log.warning("cancel message failed, retrying: %s", exc, extra={"job_id": row.job_id})
            part.report.errors += 1
            part.due.add(row, not_before=retry_at)
            return False
        part.report.cancels += 1
        return True

    def _calendar(self, part: _Partition, user_id: str, name: str) -> Calendar | None:
        """The tenant's calendar ``name``, read once per scan and again once ``calendar_refresh`` has passed."""
        assert self._calendars is not None
        now = self._clock.now()
        cached = part.calendars.get((user_id, name))
        if cached is not None and now - cached[1] < self._rules.calendar_refresh:
            return cached[0]
        calendar = self._calendars.get(user_id, name)
        part.calendars[(user_id, name)] = (calendar, now)
        return calendar

    def _skip(self, part: _Partition, row: ScheduledExecution, job: Job, note: str, retry_at: datetime,
              next_fire: datetime | _Unset | None = _UNSET) -> None:
        """Record a fire a policy does not run as SKIPPED (``note`` says why), then complete it as a published
        one is (its next fire planned, or ``next_fire``; no watchdog). If the record cannot be written, the row
        is retried."""
        now = self._clock.now()
        record = replace(started_record(row, job, now), status=ExecutionStatus.SKIPPED, published_at=None,
                         finished_at=now, error=note)
        if not isinstance(next_fire, _Unset):
            record = replace(record, next_fire_at=next_fire)
        try:
            self._store.write_outcomes([Outcome(record, None)])
        except Unavailable as exc:
            log.warning("skip record failed, retrying: %s", exc, extra={"job_id": row.job_id})
            part.report.errors += 1
            part.due.add(row, not_before=retry_at)
            return
        part.report.skipped += 1
        part.ended.add(row_identity(row))
        part.pending.append((row, job))
        if self._retirer is not None and record.next_fire_at is None:  # its last fire: the job may be done
            self._retirer.consider(job)

    def _publish_live(self, part: _Partition, live: list[tuple[ScheduledExecution, Job]], retry_at: datetime) -> None:
        """Record the rows as RUNNING, then publish them: together, except rows the broker refused in a
        shared publish, which go one per publish until it is known whether the refusal is theirs."""
        report, due = part.report, part.due
        published_at = self._clock.now()
        try:
            self._store.write_started([started_record(row, job, published_at) for row, job in live])
        except Unavailable as exc:
            log.warning("history writes failed, retrying: %s", exc)
            report.errors += 1
            for row, _ in live:
                due.add(row, not_before=retry_at)
            return
        together = [item for item in live if row_identity(item[0]) not in part.suspects]
        alone = [[item] for item in live if row_identity(item[0]) in part.suspects]
        for group in ([together] if together else []) + alone:
            self._send(part, group, retry_at)

    def _send(self, part: _Partition, group: list[tuple[ScheduledExecution, Job]], retry_at: datetime) -> None:
        report, due = part.report, part.due
        if not self._lease_covers_publish(part):
            for row, _ in group:
                due.add(row, not_before=retry_at)
            return
        messages = []
        for row, job in group:
            key, value, headers = execution_message(job, row, result_token(self._rules.result_key, row.execution_id))
            messages.append(OutboundMessage(topic=job.topic, key=key, value=value, headers=headers,
                                            parent_trace=job.trace_parent))
        failed: dict[int, str] = {}
        refused: set[int] = set()
        try:
            self._publisher.publish(messages, timeout_s=self._rules.publish_timeout.total_seconds())
        except PublishError as exc:
            log.warning("publish failed for %d of %d, retrying: %s", len(exc.failed), len(messages), exc)
            report.errors += 1
            failed = dict.fromkeys(exc.failed, str(exc))
            refused = set(exc.rejected)
        acked_at = self._clock.now()
        for index, (row, job) in enumerate(group):
            identity = row_identity(row)
            if index in failed:
                # Only a refusal of the row published alone counts towards its dead letter: a timeout or
                # an unsent message says nothing against it, and a refusal in a shared publish may be
                # another row's (Kafka's idempotent producer fails the whole call after one refusal).
                tries, refusals = part.failures.get(identity, (0, 0))
                tries += 1
                if index in refused and len(group) > 1:
                    part.suspects.add(identity)
                elif index in refused:
                    refusals += 1
                part.failures[identity] = (tries, refusals)
                # A topic that already refused a row for good in this scan is not given five chances again.
                enough = 1 if job.topic in part.refusing_topics else self._rules.max_publish_attempts
                if refusals >= enough:
                    part.refusing_topics.add(job.topic)
                    self._dead_letter(part, row, job, f"refused {refusals} times: {failed[index]}", retry_at)
                else:
                    due.add(row, not_before=retry_at + self._rules.retry_backoff * min(tries - 1, 9))
                continue
            part.failures.pop(identity, None)
            part.suspects.discard(identity)
            log.debug("published", extra={"job_id": row.job_id, "execution_id": row.execution_id,
                                           "attempt": row.attempt, "due_at": row.due_at.isoformat()})
            report.published += 1
            part.published_ids[row.execution_id] = row.job_version
            report.lateness_ms.append((acked_at - row.due_at).total_seconds() * 1000)
            part.pending.append((row, job))

    def _dead_letter(self, part: _Partition, row: ScheduledExecution, job: Job, reason: str,
                     retry_at: datetime) -> None:
        """Send a row that cannot be published to the dead-letter topic, record its execution FAILED with
        the reason, and complete it (a recurring job's next fire is planned as usual). If the dead-letter
        topic cannot be written either (the broker itself is away), the row is retried like any other."""
        now = self._clock.now()
        record = replace(started_record(row, job, now), status=ExecutionStatus.FAILED, finished_at=now, error=reason)
        try:
            self._publisher.publish([dead_letter(job, record, self._rules.dead_letter_topic)],
                                    timeout_s=self._rules.publish_timeout.total_seconds())
            self._store.write_outcomes([Outcome(record, None)])
        except (PublishError, Unavailable) as exc:
            log.warning("dead-lettering failed, retrying: %s", exc, extra={"job_id": row.job_id})
            part.report.errors += 1
            part.due.add(row, not_before=retry_at)
            return
        log.error("execution dead-lettered: %s", reason,
                  extra={"job_id": row.job_id, "execution_id": row.execution_id, "attempt": row.attempt})
        part.failures.pop(row_identity(row), None)
        part.suspects.discard(row_identity(row))
        part.report.dead_lettered += 1
        part.pending.append((row, job))

    def _expire(self, part: _Partition, watchdogs: list[ScheduledExecution], retry_at: datetime) -> None:
        """Watchdog rows are not published: each fails its execution if that has not reported yet."""
        for row in watchdogs:
            try:
                if self._outcomes is not None:
                    self._outcomes.expire(row)
                if row.lane is Lane.LATE:  # a PLANNED one expires with its lane
                    self._store.delete_scheduled([row])
                part.report.expired += 1
                part.due.settle([row])
            except (Unavailable, PublishError) as exc:
                log.warning("watchdog failed, retrying: %s", exc,
                            extra={"job_id": row.job_id, "execution_id": row.execution_id})
                part.report.errors += 1
                part.due.add(row, not_before=retry_at)

    def _already_ended(self, row: ScheduledExecution) -> bool:
        """A replay (or a backfill's row: one point read, backfills are rare) whose result is already in, as the
        execution's own history record says; a record that cannot be read counts as not ended (publish again)."""
        try:
            record = self._store.get_record(row.job_id, row.scheduled_at, row.attempt, row.execution_id)
        except Unavailable:
            return False
        return record is not None and record.status in ENDED

    def _completion(
        self, part: _Partition, row: ScheduledExecution, job: Job, now: datetime, ended: set[tuple[object, ...]]
    ) -> Completion:
        """What follows ``row``, with every new row placed as seen at ``now`` (the moment of the write)."""
        following = None
        next_run_at = part.next_fires.get(row_identity(row), next_fire(row, job))
        if next_run_at is not None:
            following = plan_execution(job, next_run_at, now, self._rules.segment_count, trigger=Trigger.SCHEDULE)
            following = _own(part, following, due_of(job, next_run_at), now)
        watchdog = None
        if job.timeout_s is not None and row_identity(row) not in ended:
            expires_at = now + timedelta(seconds=job.timeout_s)
            watchdog = plan_execution(
                job, expires_at, now, self._rules.segment_count,
                trigger=Trigger.TIMEOUT, attempt=row.attempt, scheduled_at=row.scheduled_at, origin=origin_of(row),
            )
            watchdog = _own(part, watchdog, expires_at, now)
        return Completion(done=row, following=following, watchdog=watchdog)

    def _complete(self, part: _Partition) -> None:
        """Write the pending completions, placed as of this attempt; on failure they stay pending. Verify, then
        commit: a done LATE row is removed only once the rows that follow it are known to be where their scans
        will read them (written again, placed anew, when their write returned too late), since it is what a scan
        taking the partition over would replay them from."""
        if not part.pending:
            return
        now = self._clock.now()
        completions = [self._completion(part, row, job, now, part.ended) for row, job in part.pending]
        try:
            self._store.settle_published(completions)
        except Unavailable as exc:
            log.warning("completion writes failed, retrying: %s", exc)
            part.report.errors += 1
            return
        part.pending = []
        part.ended.clear()
        for done in completions:
            part.next_fires.pop(row_identity(done.done), None)
        written = [r for c in completions for r in (c.following, c.watchdog) if r is not None]
        # Rows of our own partition are published from memory, as long as the lease held while they were
        # written: a scan that may have lost it writes them again where the partition's owner polls.
        returned_at = self._clock.now()
        held = returned_at < part.lease_until - self._rules.lease_margin
        wake(self._waker, [row for row in written if not _in(part, row)])
        late = []
        for row in written:
            if _in(part, row) and row.lane is Lane.PLANNED and held:
                part.due.add_own(row)
            elif _in(part, row) and row.lane is Lane.PLANNED:
                late.append(row)
            else:
                part.wrote_here = part.wrote_here or _in(part, row)
                if not placed_in_time([row], now, returned_at):
                    late.append(row)
        if late:
            self._replace_late(part, late)
        self._remove_done(part, [c.done for c in completions])

    def _remove_done(self, part: _Partition, done: list[ScheduledExecution]) -> None:
        """Settle completed rows: a LATE one is removed (a scan taking the partition over reads that lane from its
        start); a PLANNED one stays (it expires) and the progress moves past it. A removal that fails is
        harmless: a scan taking over publishes the row again under its execution_id."""
        try:
            self._store.delete_scheduled([row for row in done if row.lane is Lane.LATE])
        except Unavailable as exc:
            log.warning("removing done late rows failed: %s", exc)
            part.report.errors += 1
        part.due.settle(done)

    def _replace_late(self, part: _Partition, late: list[ScheduledExecution]) -> None:
        """Rows whose write returned after their bucket's scan may have finished: place and write them
        again from now (same executions; a copy left behind is never read, or is a same-id duplicate)."""
        while late:
            now = self._clock.now()
            again = [placed_anew(row, now) for row in late]
            try:
                self._store.write_scheduled(again)
            except Unavailable as exc:
                part.report.errors += 1
                log.warning("re-placing late rows failed, retrying: %s", exc)
                self._clock.sleep_until(now + self._rules.retry_backoff)
                if part.lease_until - self._clock.now() < self._rules.lease_ttl / 2:
                    self._renew(part, self._clock.now())  # keeps the partition ours, or stops the scan
                continue
            if any(_in(part, r) for r in again):
                part.wrote_here = True
            wake(self._waker, [r for r in again if not _in(part, r)])
            returned_at = self._clock.now()
            late = [r for r in again if not placed_in_time([r], now, returned_at)]


def _in(part: _Partition, row: ScheduledExecution) -> bool:
    return row.bucket == part.bucket and row.segment == part.segment


def _own(part: _Partition, row: ScheduledExecution, due_at: datetime, now: datetime) -> ScheduledExecution:
    """A row for the scan's own partition goes to its PLANNED lane, which only this scan reads while it holds
    the lease: it publishes the row from memory (no poll reads it, so it needs no late lane's lead), and a
    scan taking over reads it from the kept progress. Its key is its due instant ``due_at``, but no earlier
    than just after ``now`` and after the progress (the one this scan started from included, which another
    host's clock may have put ahead of ``now``), so it sorts after every row settled so far and no progress
    kept can have passed it."""
    if not _in(part, row):
        return row
    floor = part.due.progress()
    due_at = max(due_at, now + _MS, floor.due_at + _MS if floor is not None else due_at)
    return replace(row, lane=Lane.PLANNED, due_at=due_at)


def _progress(report: ScanReport) -> int:
    """Rows a scan has dealt with for good so far (published, dropped, dead-lettered, expired or replayed)."""
    return (report.published + report.dropped + report.dead_lettered + report.expired + report.replays_skipped
            + report.skipped + report.held)

