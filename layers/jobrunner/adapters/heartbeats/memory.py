"""An in-memory HeartbeatStore with the same lease rules as the DynamoDB one."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from jobrunner.ports import HeartbeatStore, PartitionState, SegmentState

if TYPE_CHECKING:
    from collections.abc import Iterable


class MemoryHeartbeatStore(HeartbeatStore):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._segments: dict[int, SegmentState] = {}
        self._partitions: dict[tuple[int, datetime], PartitionState] = {}

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
                segment, bucket, owner, now + timedelta(seconds=ttl_s), False, 0
            )
            return True

    def renew(self, segment: int, bucket: datetime, owner: str, now: datetime, ttl_s: float) -> bool:
        with self._lock:
            current = self._partitions.get((segment, bucket))
            if current is None or current.owner != owner or current.done:
                return False
            self._partitions[(segment, bucket)] = PartitionState(
                segment, bucket, owner, now + timedelta(seconds=ttl_s), False, current.published
            )
            return True

    def finish(self, segment: int, bucket: datetime, owner: str, now: datetime, published: int) -> bool:
        with self._lock:
            current = self._partitions.get((segment, bucket))
            if current is None or current.owner != owner:
                return False
            self._partitions[(segment, bucket)] = PartitionState(
                segment, bucket, owner, current.lease_expires_at, True, published
            )
            return True

    def segments(self, segments: Iterable[int]) -> list[SegmentState]:
        with self._lock:
            return [self._segments[s] for s in segments if s in self._segments]

    def partitions(self, keys: Iterable[tuple[int, datetime]]) -> list[PartitionState]:
        with self._lock:
            return [self._partitions[k] for k in keys if k in self._partitions]

    def advance_watermark(self, segment: int, bucket: datetime) -> None:
        with self._lock:
            current = self._segments.get(segment) or SegmentState(segment, None)
            if current.watermark is None or current.watermark < bucket:
                self._segments[segment] = SegmentState(
                    segment, bucket, current.last_heartbeat, current.last_owner, current.published_total
                )

    def beat(self, segment: int, owner: str, now: datetime, published: int) -> None:
        with self._lock:
            current = self._segments.get(segment) or SegmentState(segment, None)
            self._segments[segment] = SegmentState(
                segment, current.watermark, now, owner, current.published_total + published
            )
