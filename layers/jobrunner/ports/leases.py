"""The lease port: the scans' leases, heartbeats and watermarks."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable


@dataclass(frozen=True)
class SegmentState:
    segment: int
    watermark: datetime | None
    last_heartbeat: datetime | None = None
    last_owner: str | None = None
    published_total: int = 0
    #: Partitions set aside after failing again and again (``LeaseStore.park``), until done.
    parked: frozenset[datetime] = frozenset()


@dataclass(frozen=True)
class PartitionState:
    segment: int
    bucket: datetime
    owner: str | None
    lease_expires_at: datetime | None
    done: bool
    published: int = 0
    #: How many times a scan has leased this partition (each successful ``acquire``).
    attempts: int = 0
    #: The scan's progress through the PLANNED lane, as kept by its last renewal (opaque to the store).
    progress: str | None = None


#: The expiry of a lease given up (``LeaseStore.release``).
RELEASED = datetime(1970, 1, 1, tzinfo=UTC)


class LeaseStore(ABC):
    """Leases, heartbeats and watermarks of the scans (DynamoDB in production).

    Contract:
    - A lease is per (segment, bucket). ``acquire`` succeeds for at most one owner at a time: when
      there is no lease, the lease has expired, or the caller already owns it; never once the
      partition is done. Each success adds one to the partition's ``attempts`` (a refusal does not).
    - ``renew`` extends the caller's lease and returns False when the caller no longer owns it
      (the scan must then stop publishing). With ``progress``, it also keeps that string on the
      partition (``PartitionState.progress``) in the same conditional write, so only the lease owner
      ever moves it; ``acquire`` leaves it as it is.
    - ``mark_done`` marks the partition done, only for the lease owner (returns False otherwise).
    - ``release`` gives the caller's lease up without finishing (a scan with nothing to do ending
      early): the lease expires at ``RELEASED`` (the epoch, past for every clock), so the partition can
      be acquired again at once, the progress is kept as ``renew`` keeps
      it, and the lease no longer counts as an attempt (so ``attempts`` says how many scans held the
      partition and did not leave it cleanly). Returns False when the caller does not own it.
    - ``advance_watermark`` only ever moves a segment's watermark forward.
    - ``beat`` records a heartbeat and adds to the segment's counters.
    - ``park`` adds partitions to the segment's ``parked`` set and ``unpark`` removes them; both are
      idempotent and leave the rest of the segment's state alone (``unpark`` of a segment never seen
      creates nothing). The tick parks a partition that keeps failing before moving the watermark past
      it, and unparks it only once it is done, so a partition behind the watermark is done or parked.
    - ``record_segment_count`` records a segment count in use and returns the highest ever recorded:
      the record only moves up, so the segments of a larger, earlier count are still scanned.
    - Conditional refusals are answers (False), never errors. Backend failures (throttling, timeouts,
      an unreachable endpoint, any other service error) raise ``jobrunner.domain.errors.Unavailable``,
      from every method, so the caller may retry; a write that raised may or may not have happened.
    """

    @abstractmethod
    def acquire(self, segment: int, bucket: datetime, owner: str, now: datetime, ttl_s: float) -> bool: ...

    @abstractmethod
    def renew(
        self, segment: int, bucket: datetime, owner: str, now: datetime, ttl_s: float, progress: str | None = None
    ) -> bool: ...

    @abstractmethod
    def mark_done(self, segment: int, bucket: datetime, owner: str, now: datetime, published: int) -> bool: ...

    @abstractmethod
    def release(
        self, segment: int, bucket: datetime, owner: str, now: datetime, progress: str | None = None
    ) -> bool: ...

    @abstractmethod
    def segments(self, segments: Iterable[int]) -> list[SegmentState]:
        """States of the given segments, in segment order; ones never written are absent."""

    @abstractmethod
    def partitions(self, keys: Iterable[tuple[int, datetime]]) -> list[PartitionState]:
        """States of the given (segment, bucket) partitions; ones never leased are absent."""

    @abstractmethod
    def advance_watermark(self, segment: int, bucket: datetime) -> None: ...

    @abstractmethod
    def beat(self, segment: int, owner: str, now: datetime, published: int) -> None: ...

    @abstractmethod
    def park(self, segment: int, buckets: Iterable[datetime]) -> None: ...

    @abstractmethod
    def unpark(self, segment: int, buckets: Iterable[datetime]) -> None: ...

    @abstractmethod
    def record_segment_count(self, count: int) -> int: ...
