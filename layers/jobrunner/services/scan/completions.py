"""The completion writes of a scan (``Completer``): a dealt-with row settled, with the rows that follow it (its
next fire, its watchdog) written where their scans will read them, written again when a write returned too late."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import Lane, Trigger, due_of, origin_of
from jobrunner.domain.placement import placed_anew, placed_in_time, plan_execution
from jobrunner.ports import Completion

if TYPE_CHECKING:
    from datetime import datetime

    from jobrunner.domain.jobs import Job, ScheduledExecution
    from jobrunner.ports import Clock
    from jobrunner.services.scan.rules import ScanRules, ScanStores
    from jobrunner.services.scan.state import Partition
    from jobrunner.services.wake import Waker

log = logging.getLogger(__name__)


class Completer:
    """Writes the pending completions of a scan (``PendingCompletions``) and places the rows it writes."""

    def __init__(self, store: ScanStores, clock: Clock, rules: ScanRules, waker: Waker) -> None:
        self._store = store
        self._clock = clock
        self._rules = rules
        #: Wakes the scan of another partition this scan wrote a LATE row to (``services.wake``).
        self._waker = waker

    def complete(self, part: Partition) -> None:
        """Write the pending completions, placed as of this attempt; on failure they stay pending. Verify, then
        commit: a done LATE row is removed only once the rows that follow it are known to be where their scans
        will read them (written again, placed anew, when their write returned too late), since it is what a scan
        taking the partition over would replay them from."""
        pending = part.completions
        if not pending.rows:
            return
        now = self._clock.now()
        completions = [self._completion(part, row, job, now) for row, job in pending.rows]
        try:
            self._store.settle_published(completions)
        except Unavailable as exc:
            log.warning("completion writes failed, retrying: %s", exc)
            part.report.errors += 1
            return
        pending.written(c.done for c in completions)
        written = [r for c in completions for r in (c.following, c.watchdog) if r is not None]
        self.place_written(part, written, now)
        self._remove_done(part, [c.done for c in completions])

    def place_written(self, part: Partition, written: list[ScheduledExecution], now: datetime) -> None:
        """Rows just written (placed as seen at ``now``): those of the scan's own partition are published from
        memory, as long as the lease held while they were written (a scan that may have lost it writes them
        again where the partition's owner polls); the others' scans are woken; a row whose write returned too
        late for its placement is written again."""
        returned_at = self._clock.now()
        held = part.lease.holds_at(returned_at)
        self._waker.wake([row for row in written if not part.owns(row)])
        late = []
        for row in written:
            if part.owns(row) and row.lane is Lane.PLANNED and held:
                part.due.add_own(row)
            elif part.owns(row) and row.lane is Lane.PLANNED:
                late.append(row)
            else:
                part.wrote_here = part.wrote_here or part.owns(row)
                if not placed_in_time([row], now, returned_at):
                    late.append(row)
        if late:
            self.replace_late(part, late)

    def _completion(self, part: Partition, row: ScheduledExecution, job: Job, now: datetime) -> Completion:
        """What follows ``row``, with every new row placed as seen at ``now`` (the moment of the write)."""
        following = None
        next_run_at = part.completions.next_fire_of(row, job)
        if next_run_at is not None:
            following = plan_execution(job, next_run_at, now, self._rules.segment_count, trigger=Trigger.SCHEDULE)
            following = part.own(following, due_of(job, next_run_at), now)
        watchdog = None
        if job.spec.timeout_s is not None and part.completions.watched(row):
            expires_at = now + timedelta(seconds=job.spec.timeout_s)
            watchdog = plan_execution(
                job, expires_at, now, self._rules.segment_count,
                trigger=Trigger.TIMEOUT, attempt=row.attempt, scheduled_at=row.scheduled_at, origin=origin_of(row),
            )
            watchdog = part.own(watchdog, expires_at, now)
        return Completion(done=row, following=following, watchdog=watchdog)

    def _remove_done(self, part: Partition, done: list[ScheduledExecution]) -> None:
        """Settle completed rows: a LATE one is removed (a scan taking the partition over reads that lane from its
        start); a PLANNED one stays (it expires) and the progress moves past it. A removal that fails is
        harmless: a scan taking over publishes the row again under its execution_id."""
        try:
            self._store.delete_scheduled([row for row in done if row.lane is Lane.LATE])
        except Unavailable as exc:
            log.warning("removing done late rows failed: %s", exc)
            part.report.errors += 1
        part.due.settle(done)

    def replace_late(self, part: Partition, late: list[ScheduledExecution]) -> None:
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
                part.lease.renew_if_half_gone()  # keeps the partition ours, or stops the scan
                continue
            if any(part.owns(r) for r in again):
                part.wrote_here = True
            self._waker.wake([r for r in again if not part.owns(r)])
            returned_at = self._clock.now()
            late = [r for r in again if not placed_in_time([r], now, returned_at)]
