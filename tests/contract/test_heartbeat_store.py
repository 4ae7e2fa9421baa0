"""The HeartbeatStore contract (jobrunner.ports.HeartbeatStore), on memory and on DynamoDB (moto server)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobrunner.ports import HeartbeatStore

T0 = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
BUCKET = datetime(2026, 11, 22, 10, 1, tzinfo=UTC)


def test_one_owner_at_a_time_until_the_lease_expires(heartbeat_store: HeartbeatStore) -> None:
    assert heartbeat_store.acquire(3, BUCKET, "a", T0, 30)
    assert not heartbeat_store.acquire(3, BUCKET, "b", T0 + timedelta(seconds=29), 30)
    assert heartbeat_store.acquire(3, BUCKET, "a", T0 + timedelta(seconds=5), 30)  # re-entrant
    # Given the lease expired, another owner takes over and the first can no longer renew
    assert heartbeat_store.acquire(3, BUCKET, "b", T0 + timedelta(seconds=36), 30)
    assert not heartbeat_store.renew(3, BUCKET, "a", T0 + timedelta(seconds=37), 30)
    assert heartbeat_store.renew(3, BUCKET, "b", T0 + timedelta(seconds=37), 30)


def test_leases_are_per_partition(heartbeat_store: HeartbeatStore) -> None:
    assert heartbeat_store.acquire(1, BUCKET, "a", T0, 30)
    assert heartbeat_store.acquire(1, BUCKET + timedelta(minutes=1), "b", T0, 30)
    assert heartbeat_store.acquire(2, BUCKET, "c", T0, 30)


def test_a_finished_partition_is_never_leased_again(heartbeat_store: HeartbeatStore) -> None:
    assert heartbeat_store.acquire(4, BUCKET, "a", T0, 30)
    assert not heartbeat_store.finish(4, BUCKET, "b", T0, 9)  # only the owner finishes
    assert heartbeat_store.finish(4, BUCKET, "a", T0 + timedelta(seconds=1), 9)
    assert not heartbeat_store.acquire(4, BUCKET, "a", T0 + timedelta(hours=1), 30)
    assert not heartbeat_store.renew(4, BUCKET, "a", T0 + timedelta(seconds=2), 30)
    [state] = heartbeat_store.partitions([(4, BUCKET)])
    assert (state.done, state.owner, state.published) == (True, "a", 9)


def test_partitions_lists_only_known_ones(heartbeat_store: HeartbeatStore) -> None:
    heartbeat_store.acquire(5, BUCKET, "a", T0, 30)
    states = heartbeat_store.partitions([(5, BUCKET), (5, BUCKET + timedelta(minutes=1))])
    assert [(s.segment, s.bucket, s.owner, s.done) for s in states] == [(5, BUCKET, "a", False)]
    assert states[0].lease_expires_at == T0 + timedelta(seconds=30)


def test_watermark_only_moves_forward(heartbeat_store: HeartbeatStore) -> None:
    assert heartbeat_store.segments([6]) == []
    heartbeat_store.advance_watermark(6, BUCKET)
    heartbeat_store.advance_watermark(6, BUCKET - timedelta(minutes=5))
    [state] = heartbeat_store.segments([6])
    assert state.watermark == BUCKET
    heartbeat_store.advance_watermark(6, BUCKET + timedelta(minutes=1))
    assert heartbeat_store.segments([6])[0].watermark == BUCKET + timedelta(minutes=1)


def test_beat_records_the_heartbeat_and_adds_up_counters(heartbeat_store: HeartbeatStore) -> None:
    heartbeat_store.beat(7, "a", T0, 5)
    heartbeat_store.beat(7, "b", T0 + timedelta(seconds=10), 3)
    [state] = heartbeat_store.segments([7, 8])
    assert (state.last_heartbeat, state.last_owner, state.published_total) == (T0 + timedelta(seconds=10), "b", 8)
