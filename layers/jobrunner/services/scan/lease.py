"""A scan's lease on its partition (``Lease``): renewed in time to outlast each publish, keeping the scan's progress."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from jobrunner.domain.errors import Unavailable
from jobrunner.domain.time import MINUTE

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from jobrunner.domain.jobs import LanePosition
    from jobrunner.ports import Clock, LeaseStore
    from jobrunner.services.scan.rules import ScanReport, ScanRules

log = logging.getLogger(__name__)


class LeaseLost(Exception):
    """Another scan owns the partition, or this one's lease may lapse before it can be renewed: stop publishing."""


class Lease:
    """The lease one scan holds on its (segment, bucket) partition as ``owner``.

    It knows until when it holds (``until``: the last acquire or renewal plus its time to live) and renews
    itself before a publish that could outlast it; each renewal keeps the scan's progress (``progress``: the
    position up to which the planned lane is settled) for a scan taking the partition over, and adds the
    published executions to the segment's heartbeat counters. Raises ``LeaseLost`` where publishing must stop.
    """

    def __init__(
        self, leases: LeaseStore, clock: Clock, rules: ScanRules, report: ScanReport, owner: str,
        progress: Callable[[], LanePosition | None], until: datetime, kept: LanePosition | None,
    ) -> None:
        self._leases = leases
        self._clock = clock
        self._rules = rules
        self._report = report
        self._progress = progress
        self.segment, self.bucket, self.owner = report.segment, report.bucket, owner
        #: When the lease is known to hold until (the last acquire or renewal plus its time to live).
        self.until = until
        #: The progress the last renewal kept in the lease item.
        self.kept = kept

    def holds_at(self, at: datetime) -> bool:
        """Whether the lease surely still holds at ``at``, with the margin kept for skew and round trips."""
        return at < self.until - self._rules.lease_margin

    def renew(self, now: datetime) -> None:
        """Extend the lease. Raises ``LeaseLost`` when another scan owns it, or when the lease store
        cannot be reached and the lease is about to lapse (so this scan stops before another starts)."""
        progress = self._progress()
        try:
            renewed = self._leases.renew(
                self.segment, self.bucket, self.owner, now, self._rules.lease_ttl.total_seconds(),
                progress=progress.encode() if progress is not None else None,
            )
        except Unavailable as exc:
            self._report.errors += 1
            log.warning("lease renewal of %s/%s failed: %s", self.segment, self.bucket, exc)
            if now + self._rules.lease_margin >= self.until:
                raise LeaseLost from exc
            return
        if not renewed:
            raise LeaseLost
        self.until = now + self._rules.lease_ttl
        self.kept = progress
        try:
            self.beat(now)
        except Unavailable:
            self._report.errors += 1  # counters only: added to the next beat

    def renew_if_half_gone(self) -> None:
        """Renew when less than half the lease is left (a scan retrying a write keeps its partition, or stops)."""
        if self.until - self._clock.now() < self._rules.lease_ttl / 2:
            self.renew(self._clock.now())

    def covers_publish(self) -> bool:
        """Renew if needed so that the lease outlasts a publish started now; False when it cannot."""
        needed = self._rules.publish_timeout + self._rules.lease_margin
        now = self._clock.now()
        if self.until - now < needed:
            self.renew(now)
        return self.until - self._clock.now() >= needed

    def beat(self, now: datetime) -> None:
        """Add the executions published since the last beat to the segment's counters."""
        report = self._report
        self._leases.beat(self.segment, self.owner, now, report.published - report.reported)
        report.reported = report.published

    def release(self, now: datetime) -> bool:
        """Give the lease up, keeping the progress; False when another scan holds it. Raises ``Unavailable``."""
        progress = self._progress()
        self.beat(now)
        return self._leases.release(self.segment, self.bucket, self.owner, now,
                                        progress=progress.encode() if progress is not None else None)

    def take_back(self) -> bool:
        """Acquire the lease again after ``release``; False when it cannot (another scan holds it, or the store
        is away)."""
        try:
            taken = self._leases.acquire(self.segment, self.bucket, self.owner, self._clock.now(),
                                             self._rules.lease_ttl.total_seconds())
        except Unavailable:
            taken = False
        if taken:
            self.until = self._clock.now() + self._rules.lease_ttl
        return taken

    def mark_done(self, deadline: datetime) -> None:
        """Mark the partition done (retrying a failing lease store until the deadline) and move the
        segment's watermark when this was the next bucket after it."""
        report = self._report
        while True:
            now = self._clock.now()
            try:
                self.beat(now)
                report.finished = self._leases.mark_done(self.segment, self.bucket, self.owner, now,
                                                             report.published)
                if report.finished:
                    states = self._leases.segments([self.segment])
                    if states and states[0].watermark is not None and states[0].watermark >= self.bucket - MINUTE:
                        self._leases.advance_watermark(self.segment, self.bucket)
                return
            except Unavailable as exc:
                report.errors += 1
                if now >= deadline:  # not marked done: the lease expires and the tick redispatches
                    log.error("could not mark %s/%s done: %s", self.segment, self.bucket, exc)
                    return
                self._clock.sleep_until(now + self._rules.retry_backoff)
