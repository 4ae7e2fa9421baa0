"""An in-memory LeaseStore with the same lease rules as the DynamoDB one."""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from jobrunner.ports import (
    MAX_RECONCILER_STATE,
    RELEASED,
    LeaseStore,
    PartitionState,
    ReconcilerStateStore,
    SegmentState,
)

if TYPE_CHECKING:
    from collections.abc import Iterable


class MemoryLeaseStore(LeaseStore, ReconcilerStateStore):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._segments: dict[int, SegmentState] = {}
        self._partitions: dict[tuple[int, datetime], PartitionState] = {}
        self._highest_segment_count = 0
        self.reconciler_state: str | None = None

    def acquire(self, segment: int, bucket: datetime, owner: str, now: datetime, ttl_s: float) -> bool:
        with self._lock:
            current = self._partitions.get((segment, bucket))
            if current is not None:
                if current.done:
                    return False
                live = current.lease_expires_at is not None and current.lease_expires_at > now
                if live and current.owner != owner:
                    return False
            self._partitions[(segment, bucket)] = PartitionState(
                segment, bucket, owner, now + timedelta(seconds=ttl_s), False, 0,
                attempts=(current.attempts if current else 0) + 1, progress=current.progress if current else None,
            )
            return True

    def renew(
        self, segment: int, bucket: datetime, owner: str, now: datetime, ttl_s: float, progress: str | None = None
    ) -> bool:
        return self._set_lease(segment, bucket, owner, now + timedelta(seconds=ttl_s), progress)

    def release(
        self, segment: int, bucket: datetime, owner: str, now: datetime, progress: str | None = None
    ) -> bool:
        return self._set_lease(segment, bucket, owner, RELEASED, progress, attempts=-1)

    def _set_lease(self, segment: int, bucket: datetime, owner: str, expires_at: datetime, progress: str | None,
                   attempts: int = 0) -> bool:
        """The owner's lease of a partition not done: expires at ``expires_at``, keeps ``progress`` if given,
        and counts ``attempts`` more (a release gives its attempt back)."""
        with self._lock:
            current = self._partitions.get((segment, bucket))
            if current is None or current.owner != owner or current.done:
                return False
            self._partitions[(segment, bucket)] = dataclasses.replace(
                current, lease_expires_at=expires_at, attempts=current.attempts + attempts,
                progress=current.progress if progress is None else progress,
            )
            return True

    def mark_done(self, segment: int, bucket: datetime, owner: str, now: datetime, published: int) -> bool:
        with self._lock:
            current = self._partitions.get((segment, bucket))
            if current is None or current.owner != owner:
                return False
            self._partitions[(segment, bucket)] = dataclasses.replace(current, done=True, published=published)
            return True

    def segments(self, segments: Iterable[int]) -> list[SegmentState]:
        with self._lock:
            return [self._segments[s] for s in sorted(set(segments)) if s in self._segments]

    def partitions(self, keys: Iterable[tuple[int, datetime]]) -> list[PartitionState]:
        with self._lock:
            return [self._partitions[k] for k in dict.fromkeys(keys) if k in self._partitions]

    def advance_watermark(self, segment: int, bucket: datetime) -> None:
        with self._lock:
            current = self._segments.get(segment) or SegmentState(segment, None)
            if current.watermark is None or current.watermark < bucket:
                self._segments[segment] = dataclasses.replace(current, watermark=bucket)

    def beat(self, segment: int, owner: str, now: datetime, published: int) -> None:
        with self._lock:
            current = self._segments.get(segment) or SegmentState(segment, None)
            self._segments[segment] = dataclasses.replace(
                current, last_heartbeat=now, last_owner=owner, published_total=current.published_total + published
            )

    def park(self, segment: int, buckets: Iterable[datetime]) -> None:
        with self._lock:
            current = self._segments.get(segment) or SegmentState(segment, None)
            self._segments[segment] = dataclasses.replace(current, parked=current.parked | frozenset(buckets))

    def unpark(self, segment: int, buckets: Iterable[datetime]) -> None:
        with self._lock:
            current = self._segments.get(segment)
            if current is not None:
                self._segments[segment] = dataclasses.replace(current, parked=current.parked - frozenset(buckets))

    def record_segment_count(self, count: int) -> int:
        with self._lock:
            self._highest_segment_count = max(self._highest_segment_count, count)
            return self._highest_segment_count

    def load_reconciler_state(self) -> str | None:
        with self._lock:
            return self.reconciler_state

    def save_reconciler_state(self, state: str) -> None:
        if len(state.encode()) > MAX_RECONCILER_STATE:
            raise ValueError(f"reconciler state of {len(state.encode())} bytes; at most {MAX_RECONCILER_STATE}")
        with self._lock:
            self.reconciler_state = state
