"""The scan's loop (``ScanService``): one scan of one partition, from its lease to its end (the story:
``services.scan``'s package docstring)."""

from __future__ import annotations

import contextlib
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import Lane, LanePosition
from jobrunner.domain.time import MINUTE
from jobrunner.services.scan.completions import Completer
from jobrunner.services.scan.due import DueRows
from jobrunner.services.scan.fire_gate import FireGate
from jobrunner.services.scan.late import LateLane
from jobrunner.services.scan.lease import Lease, LeaseLost
from jobrunner.services.scan.publishing import Publishing
from jobrunner.services.scan.rules import ScanReport
from jobrunner.services.scan.state import Partition

if TYPE_CHECKING:
    from datetime import datetime

    from jobrunner.ports import CalendarStore, Clock, LeaseStore, Publisher, ScanRequest
    from jobrunner.services.outcomes import Expiry
    from jobrunner.services.retire import Retirement
    from jobrunner.services.scan.rules import ScanRules, ScanStores
    from jobrunner.services.wake import Waker

log = logging.getLogger(__name__)


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
    #: How many rows the next group may take (``ScanRules.first_group``, doubling up to ``group_size``).
    group_limit: int = 0


class ScanService:
    def __init__(
        self, store: ScanStores, publisher: Publisher, leases: LeaseStore, clock: Clock,
        rules: ScanRules, owner_prefix: str = "scan", *, outcomes: Expiry, waker: Waker, calendars: CalendarStore,
        retirer: Retirement,
    ) -> None:
        self._store = store
        self._leases = leases
        self._clock = clock
        self._rules = rules
        self._owner_prefix = owner_prefix
        completer = Completer(store, clock, rules, waker)
        gate = FireGate(store, publisher, clock, rules, completer, calendars=calendars, retirer=retirer)
        self._publishing = Publishing(store, publisher, clock, rules, gate, completer, outcomes=outcomes)
        self._completer = completer

    def scan(self, request: ScanRequest) -> ScanReport:
        segment, bucket = request.segment, request.bucket
        report = ScanReport(segment=segment, bucket=bucket)
        owner = f"{self._owner_prefix}:{uuid.uuid4()}"
        now = self._clock.now()
        try:
            acquired = self._leases.acquire(segment, bucket, owner, now, self._rules.lease_ttl.total_seconds())
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
            states = self._leases.partitions([(segment, bucket)])
            replaying = not states or states[0].attempts != 1
            if states and states[0].progress is not None:  # a scan before this one settled the lane up to there
                start = LanePosition.decode(states[0].progress)
        except Unavailable:
            replaying = True  # unknown: read the lane whole and check each row's record, as after a crash
        due = DueRows(lambda after: self._store.lane_rows(bucket, segment, Lane.PLANNED, after=after), start,
                      window=self._rules.fair_window)
        lease = Lease(self._leases, self._clock, self._rules, report, owner, due.progress,
                      until=now + self._rules.lease_ttl, kept=start)
        part = Partition(report, due, lease, LateLane(self._store, report, due), replaying=replaying)
        try:
            self._run(part)
        except LeaseLost:
            report.lost_lease = True
            log.warning("lost the lease of %s/%s; stopping", segment, bucket)
        return report

    def _run(self, part: Partition) -> None:
        end = part.bucket + MINUTE + self._rules.settle
        deadline = end + self._rules.overtime
        now = self._clock.now()
        part.due.open(now, self._rules.retry_backoff)
        loop = _Loop(next_poll=now, next_renew=now + self._rules.renew_every,
                     next_progress=now + self._rules.progress_every)
        while True:
            now = self._clock.now()
            self._upkeep(part, loop, now, end)
            after = self._publish_next_group(part, loop, now, deadline)
            if after is None:
                continue
            now = after
            if part.wrote_here:  # our own write into this partition needs one more look at the late lane
                loop.final_poll_done = False
            if loop.final_poll_done and part.due.empty() and not part.completions.rows:
                break
            if self._idle_ended(part, loop, now, end):
                return
            if now >= deadline:
                log.error("partition %s/%s left for catch-up with work outstanding", part.segment, part.bucket)
                with contextlib.suppress(LeaseLost):  # keeps the progress since the last renewal for the next scan
                    part.lease.renew(now)
                return
            wake_at = min(t for t in (part.due.next_at(), loop.next_poll, loop.next_renew) if t is not None)
            self._clock.sleep_until(wake_at)
        part.lease.mark_done(deadline)

    def _upkeep(self, part: Partition, loop: _Loop, now: datetime, end: datetime) -> None:
        """What each turn of the scan's loop does before taking rows: renew the lease (keeping the progress),
        reopen a broken planned stream, poll the late lane, and write the completions still pending."""
        rules = self._rules
        if now >= loop.next_renew or (now >= loop.next_progress and part.due.progress() != part.lease.kept):
            part.lease.renew(now)
            loop.next_renew = now + rules.renew_every
        if now >= loop.next_progress:
            loop.next_progress = now + rules.progress_every
        if part.due.retry_at is not None and now >= part.due.retry_at:
            part.due.open(now, rules.retry_backoff)
        if now >= loop.next_poll:
            polled_at_end = now >= end
            part.wrote_here = False
            if part.late.poll(now, to_end=polled_at_end):
                loop.final_poll_done = loop.final_poll_done or polled_at_end
            loop.next_poll = now + rules.poll_every
        if part.completions.rows:
            self._completer.complete(part)

    def _publish_next_group(self, part: Partition, loop: _Loop, now: datetime, deadline: datetime) -> datetime | None:
        """Publish the next group of due rows, if any. None: the loop goes on at once (the group got something
        through, or the deadline has not passed); else the instant the loop's checks go on with."""
        rules = self._rules
        limit = loop.group_limit or min(rules.first_group, rules.group_size)
        rows = part.due.take(now, limit, rules.retry_backoff)
        # Caught up (fewer rows than allowed): the next burst starts small again; else the groups grow.
        loop.group_limit = min(rules.group_size, limit * 2) if len(rows) == limit else 0
        if not rows:
            return now
        progress = part.report.dealt_with()
        self._publishing.publish(part, rows, now)
        # A group that got nothing through ends the scan once the deadline has passed: its rows
        # may be due again at once (a publish that times out lasts as long as the retry backoff),
        # so the checks after it would never be reached, and the lease, renewed before each publish,
        # would never lapse for another scan to take the partition over.
        now = self._clock.now()
        if now < deadline or part.report.dealt_with() > progress:
            return None
        return now

    def _idle_ended(self, part: Partition, loop: _Loop, now: datetime, end: datetime) -> bool:
        """Whether the scan, with nothing to do for ``ScanRules.idle_end``, gave its lease up and may end."""
        idle_end = self._rules.idle_end
        if idle_end is None or not part.due.empty() or part.completions.rows or part.wrote_here:
            loop.idle_since = None
        elif loop.idle_since is None:
            loop.idle_since = now
        elif now - loop.idle_since >= idle_end and now < end - idle_end:
            if self._end_idle(part):
                return True
            loop.idle_since = None
        return False

    def _end_idle(self, part: Partition) -> bool:
        """Give the lease up with nothing left to do; True when the scan may end. A writer whose wake came
        while this scan still held the lease was refused, so the late lane gets one more look after the
        release, to its end (a row due later than the polls have reached counts too): if it holds
        something, the scan takes the lease back and goes on (or leaves the rows to the scan that took it
        first)."""
        try:
            released = part.lease.release(self._clock.now())
        except Unavailable as exc:
            log.warning("could not give up the lease of %s/%s: %s", part.segment, part.bucket, exc)
            return False
        if not released:
            raise LeaseLost
        if part.late.poll(self._clock.now(), to_end=True) and part.due.empty():
            part.report.idle = True
            log.info("partition %s/%s idle: lease given up", part.segment, part.bucket)
            return True
        # Something arrived (or the poll failed): take the partition back, unless a woken scan has; if another
        # scan holds it now (or nobody, and the tick dispatches it again), stop here.
        if not part.lease.take_back():
            part.report.idle = True
            return True
        return False
