"""The segment scan: publish every execution of one (minute, segment) partition at its due instant.

One scan owns one partition through a lease. It streams the PLANNED lane in due order, polls the
LATE lane about every second (rows written after the scan may have started), and for each group of
due rows: reads their jobs, drops rows that are stale (cancelled, paused or re-planned job), publishes
the rest, having first recorded each one as RUNNING (so that no worker result can arrive for an
execution the store does not know), then atomically plans the next run and removes the row.

Failure handling, in order of the steps:
- publish fails: the rows stay in the partition and are retried with backoff within the scan;
- the history/next-run write fails: retried without publishing again;
- anything left at the end of the scan's budget: the partition is not marked done, so its lease
  expires and the tick dispatches it again. Rows already published but not completed are then
  published again with the same ``execution_id`` (the one duplicate a crash can cause).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import (
    ExecutionRecord,
    ExecutionStatus,
    Job,
    JobState,
    Lane,
    ScheduledExecution,
    Trigger,
)
from jobrunner.domain.messages import execution_message
from jobrunner.domain.placement import SETTLE
from jobrunner.domain.time import MINUTE
from jobrunner.ports import Completion, OutboundMessage, PublishError
from jobrunner.services.jobs import plan_execution

if TYPE_CHECKING:
    from collections.abc import Iterator

    from jobrunner.ports import Clock, HeartbeatStore, JobStore, Publisher, ScanRequest
    from jobrunner.services.results import ResultsService

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScanRules:
    segment_count: int
    lease_ttl: timedelta = timedelta(seconds=30)
    renew_every: timedelta = timedelta(seconds=10)
    poll_every: timedelta = timedelta(seconds=1)
    settle: timedelta = SETTLE
    #: How long after its bucket ends a scan keeps retrying failures before leaving them to catch-up.
    overtime: timedelta = timedelta(minutes=3)
    group_size: int = 500
    retry_backoff: timedelta = timedelta(seconds=1)


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
    reported: int = 0  # published executions already added to the segment's heartbeat counters
    lateness_ms: list[float] = field(default_factory=list)


def _identity(row: ScheduledExecution) -> tuple[object, ...]:
    """A row's identity: its clustering key plus the version it was planned under. Two rows of one
    execution (one stale, one re-planned) are two rows; the scan decides which one is publishable."""
    return (row.lane, row.due_at, row.job_id, row.execution_id, row.job_version)


class _Due:
    """Rows waiting to be published, ordered by due instant (planned stream merged with late polls)."""

    def __init__(self, planned: Iterator[ScheduledExecution]) -> None:
        self._planned = planned
        self._heap: list[tuple[datetime, int, ScheduledExecution]] = []
        self._order = itertools.count()
        #: Late-lane rows already taken, by identity (each poll returns the rows it returned before).
        #: Planned rows are streamed once, in order, and need no memory: a scan's memory does not grow
        #: with its partition (docs/benchmarks.md, "Memory"), only with its late lane.
        self.seen: set[tuple[object, ...]] = set()
        self._head: ScheduledExecution | None = None
        self._advance_head()

    def _advance_head(self) -> None:
        self._head = next(self._planned, None)

    def add(self, row: ScheduledExecution, not_before: datetime | None = None) -> None:
        heapq.heappush(self._heap, (max(row.due_at, not_before or row.due_at), next(self._order), row))

    def next_at(self) -> datetime | None:
        candidates = [t for t in (self._head.due_at if self._head else None,
                                  self._heap[0][0] if self._heap else None) if t is not None]
        return min(candidates) if candidates else None

    def take(self, now: datetime, limit: int) -> list[ScheduledExecution]:
        out: list[ScheduledExecution] = []
        while len(out) < limit:
            if self._heap and self._heap[0][0] <= now and (
                self._head is None or self._heap[0][0] <= self._head.due_at
            ):
                out.append(heapq.heappop(self._heap)[2])
            elif self._head is not None and self._head.due_at <= now:
                out.append(self._head)
                self._advance_head()
            else:
                break
        return out

    def empty(self) -> bool:
        return self._head is None and not self._heap


class _LeaseLost(Exception):
    pass


class ScanService:
    def __init__(
        self, store: JobStore, publisher: Publisher, heartbeats: HeartbeatStore, clock: Clock,
        rules: ScanRules, owner_prefix: str = "scan", results: ResultsService | None = None,
    ) -> None:
        self._results = results
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
        if not self._heartbeats.acquire(segment, bucket, owner, now, self._rules.lease_ttl.total_seconds()):
            log.info("partition %s/%s is leased or done; skipping", segment, bucket)
            return report
        report.acquired = True
        try:
            self._run(segment, bucket, owner, report)
        except _LeaseLost:
            report.lost_lease = True
            log.warning("lost the lease of %s/%s; stopping", segment, bucket)
        return report

    def _run(self, segment: int, bucket: datetime, owner: str, report: ScanReport) -> None:
        rules = self._rules
        end = bucket + MINUTE + rules.settle
        deadline = end + rules.overtime
        due = _Due(self._store.scheduled(bucket, segment, Lane.PLANNED))
        unfinished: list[Completion] = []
        now = self._clock.now()
        next_poll = now
        next_renew = now + rules.renew_every
        final_poll_done = False
        while True:
            now = self._clock.now()
            if now >= next_renew:
                self._renew(segment, bucket, owner, now, report)
                next_renew = now + rules.renew_every
            if now >= next_poll:
                polled_at_end = now >= end
                if self._poll_late(segment, bucket, due):
                    final_poll_done = final_poll_done or polled_at_end
                next_poll = now + rules.poll_every
            if unfinished:
                unfinished = self._complete(unfinished, report)
            rows = due.take(now, rules.group_size)
            if rows:
                unfinished += self._publish(rows, now, due, report)
                continue
            if final_poll_done and due.empty() and not unfinished:
                break
            if now >= deadline:
                log.error("partition %s/%s left for catch-up with work outstanding", segment, bucket)
                return
            wake = min(t for t in (due.next_at(), next_poll, next_renew) if t is not None)
            self._clock.sleep_until(wake)
        now = self._clock.now()
        self._beat(segment, owner, now, report)
        report.finished = self._heartbeats.finish(segment, bucket, owner, now, report.published)
        if report.finished:
            states = self._heartbeats.segments([segment])
            if states and states[0].watermark is not None and states[0].watermark >= bucket - MINUTE:
                self._heartbeats.advance_watermark(segment, bucket)

    def _renew(self, segment: int, bucket: datetime, owner: str, now: datetime, report: ScanReport) -> None:
        if not self._heartbeats.renew(segment, bucket, owner, now, self._rules.lease_ttl.total_seconds()):
            raise _LeaseLost
        self._beat(segment, owner, now, report)

    def _beat(self, segment: int, owner: str, now: datetime, report: ScanReport) -> None:
        self._heartbeats.beat(segment, owner, now, report.published - report.reported)
        report.reported = report.published

    def _poll_late(self, segment: int, bucket: datetime, due: _Due) -> bool:
        try:
            for row in self._store.scheduled(bucket, segment, Lane.LATE):
                if _identity(row) not in due.seen:
                    due.seen.add(_identity(row))
                    due.add(row)
        except Unavailable as exc:
            log.warning("late lane poll of %s/%s failed: %s", segment, bucket, exc)
            return False
        return True

    def _publish(
        self, rows: list[ScheduledExecution], now: datetime, due: _Due, report: ScanReport
    ) -> list[Completion]:
        """Publish due rows; returns completions still to write (the rest are written or requeued)."""
        retry_at = now + self._rules.retry_backoff
        watchdogs = [r for r in rows if r.trigger is Trigger.TIMEOUT]
        if watchdogs:
            self._expire(watchdogs, retry_at, due, report)
            rows = [r for r in rows if r.trigger is not Trigger.TIMEOUT]
            if not rows:
                return []
        try:
            jobs = self._store.get_many(sorted({(r.user_id, r.job_id) for r in rows}))
        except Unavailable as exc:
            log.warning("job reads failed, retrying: %s", exc)
            report.errors += 1
            for row in rows:
                due.add(row, not_before=retry_at)
            return []
        live: list[tuple[ScheduledExecution, Job]] = []
        stale: list[ScheduledExecution] = []
        for row in rows:
            job = jobs.get((row.user_id, row.job_id))
            (live.append((row, job)) if job is not None and _publishable(row, job) else stale.append(row))
        if stale:
            try:
                self._store.drop(stale)
                report.dropped += len(stale)
            except Unavailable:
                report.errors += 1  # harmless: a later scan drops them again
        published_at = self._clock.now()
        records = [self._record(row, published_at) for row, _ in live]
        try:
            self._store.start(records)
        except Unavailable as exc:
            log.warning("history writes failed, retrying: %s", exc)
            report.errors += 1
            for row, _ in live:
                due.add(row, not_before=retry_at)
            return []
        messages = []
        for row, job in live:
            key, value, headers = execution_message(job, row)
            messages.append(OutboundMessage(topic=job.topic, key=key, value=value, headers=headers,
                                            parent_trace=job.trace_parent))
        failed: set[int] = set()
        if messages:
            try:
                self._publisher.publish(messages)
            except PublishError as exc:
                log.warning("publish failed for %d of %d, retrying: %s", len(exc.failed), len(messages), exc)
                report.errors += 1
                failed = set(exc.failed)
        acked_at = self._clock.now()
        completions = []
        for index, (row, job) in enumerate(live):
            if index in failed:
                due.add(row, not_before=retry_at)
                continue
            log.debug("published", extra={"job_id": row.job_id, "execution_id": row.execution_id,
                                           "attempt": row.attempt, "due_at": row.due_at.isoformat()})
            report.published += 1
            report.lateness_ms.append((acked_at - row.due_at).total_seconds() * 1000)
            completions.append(self._completion(row, job, acked_at))
        return self._complete(completions, report)

    @staticmethod
    def _record(row: ScheduledExecution, now: datetime) -> ExecutionRecord:
        return ExecutionRecord(
            job_id=row.job_id, scheduled_at=row.scheduled_at, attempt=row.attempt,
            execution_id=row.execution_id, user_id=row.user_id, status=ExecutionStatus.RUNNING,
            trigger=row.trigger, due_at=row.due_at, published_at=now,
        )

    def _expire(self, watchdogs: list[ScheduledExecution], retry_at: datetime, due: _Due, report: ScanReport) -> None:
        """Watchdog rows are not published: each fails its execution if that has not reported yet."""
        for row in watchdogs:
            try:
                if self._results is not None:
                    self._results.expire(row)
                self._store.drop([row])
                report.expired += 1
            except (Unavailable, PublishError) as exc:
                log.warning("watchdog failed, retrying: %s", exc,
                            extra={"job_id": row.job_id, "execution_id": row.execution_id})
                report.errors += 1
                due.add(row, not_before=retry_at)

    def _completion(self, row: ScheduledExecution, job: Job, now: datetime) -> Completion:
        following = None
        next_run_at = None
        if row.trigger is Trigger.SCHEDULE and job.schedule.recurring:
            # From the fire just published, not from now: a scan running late (after missed ticks
            # or a crash) replays every missed fire, one after another, instead of skipping them.
            next_run_at = job.schedule.next_fire_after(row.scheduled_at)
            if next_run_at is not None:
                following = plan_execution(
                    job, next_run_at, now, self._rules.segment_count, trigger=Trigger.SCHEDULE
                )
        watchdog = None
        if job.timeout_s is not None:
            watchdog = plan_execution(
                job, now + timedelta(seconds=job.timeout_s), now, self._rules.segment_count,
                trigger=Trigger.TIMEOUT, attempt=row.attempt, scheduled_at=row.scheduled_at,
            )
        return Completion(
            done=row, following=following, next_run_at=next_run_at,
            sets_next_run=row.trigger is Trigger.SCHEDULE, watchdog=watchdog,
        )

    def _complete(self, completions: list[Completion], report: ScanReport) -> list[Completion]:
        if not completions:
            return []
        try:
            self._store.complete(completions)
        except Unavailable as exc:
            log.warning("completion writes failed, retrying: %s", exc)
            report.errors += 1
            return completions
        return []


def _publishable(row: ScheduledExecution, job: Job) -> bool:
    if job.state is JobState.CANCELLED:
        return False
    if row.trigger is Trigger.MANUAL:
        return True
    if job.state is JobState.PAUSED:
        return False
    return row.trigger is Trigger.RETRY or row.job_version == job.version
