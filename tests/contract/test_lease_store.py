"""The LeaseStore contract (jobrunner.ports.LeaseStore), on memory and on DynamoDB (moto server)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from jobrunner.ports import MAX_RECONCILER_STATE, RELEASED, ReconcilerStateStore

if TYPE_CHECKING:
    from jobrunner.ports import LeaseStore

T0 = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
BUCKET = datetime(2026, 11, 22, 10, 1, tzinfo=UTC)


def test_one_owner_at_a_time_until_the_lease_expires(lease_store: LeaseStore) -> None:
    assert lease_store.acquire(3, BUCKET, "a", T0, 30)
    assert not lease_store.acquire(3, BUCKET, "b", T0 + timedelta(seconds=29), 30)
    assert lease_store.acquire(3, BUCKET, "a", T0 + timedelta(seconds=5), 30)  # re-entrant
    # Given the lease expired, another owner takes over and the first can no longer renew
    assert lease_store.acquire(3, BUCKET, "b", T0 + timedelta(seconds=36), 30)
    assert not lease_store.renew(3, BUCKET, "a", T0 + timedelta(seconds=37), 30)
    assert lease_store.renew(3, BUCKET, "b", T0 + timedelta(seconds=37), 30)


def test_leases_are_per_partition(lease_store: LeaseStore) -> None:
    assert lease_store.acquire(1, BUCKET, "a", T0, 30)
    assert lease_store.acquire(1, BUCKET + timedelta(minutes=1), "b", T0, 30)
    assert lease_store.acquire(2, BUCKET, "c", T0, 30)


def test_a_finished_partition_is_never_leased_again(lease_store: LeaseStore) -> None:
    assert lease_store.acquire(4, BUCKET, "a", T0, 30)
    assert not lease_store.mark_done(4, BUCKET, "b", T0, 9)  # only the owner finishes
    assert lease_store.mark_done(4, BUCKET, "a", T0 + timedelta(seconds=1), 9)
    assert not lease_store.acquire(4, BUCKET, "a", T0 + timedelta(hours=1), 30)
    assert not lease_store.renew(4, BUCKET, "a", T0 + timedelta(seconds=2), 30)
    [state] = lease_store.partitions([(4, BUCKET)])
    assert (state.done, state.owner, state.published) == (True, "a", 9)


def test_partitions_lists_only_known_ones(lease_store: LeaseStore) -> None:
    lease_store.acquire(5, BUCKET, "a", T0, 30)
    states = lease_store.partitions([(5, BUCKET), (5, BUCKET + timedelta(minutes=1))])
    assert [(s.segment, s.bucket, s.owner, s.done) for s in states] == [(5, BUCKET, "a", False)]
    assert states[0].lease_expires_at == T0 + timedelta(seconds=30)


def test_watermark_only_moves_forward(lease_store: LeaseStore) -> None:
    assert lease_store.segments([6]) == []
    lease_store.advance_watermark(6, BUCKET)
    lease_store.advance_watermark(6, BUCKET - timedelta(minutes=5))
    [state] = lease_store.segments([6])
    assert state.watermark == BUCKET
    lease_store.advance_watermark(6, BUCKET + timedelta(minutes=1))
    assert lease_store.segments([6])[0].watermark == BUCKET + timedelta(minutes=1)


def test_beat_records_the_heartbeat_and_adds_up_counters(lease_store: LeaseStore) -> None:
    lease_store.beat(7, "a", T0, 5)
    lease_store.beat(7, "b", T0 + timedelta(seconds=10), 3)
    [state] = lease_store.segments([7, 8])
    assert (state.last_heartbeat, state.last_owner, state.published_total) == (T0 + timedelta(seconds=10), "b", 8)


def test_acquire_counts_every_attempt_and_only_successful_ones(lease_store: LeaseStore) -> None:
    # Given a partition leased twice in turn (its first scan died), and one refused acquire in between
    assert lease_store.acquire(9, BUCKET, "a", T0, 30)
    assert not lease_store.acquire(9, BUCKET, "b", T0 + timedelta(seconds=1), 30)
    assert lease_store.acquire(9, BUCKET, "b", T0 + timedelta(seconds=31), 30)
    # Then it counts two attempts, which renewing and finishing keep
    assert lease_store.renew(9, BUCKET, "b", T0 + timedelta(seconds=40), 30)
    assert [s.attempts for s in lease_store.partitions([(9, BUCKET)])] == [2]
    assert lease_store.mark_done(9, BUCKET, "b", T0 + timedelta(seconds=41), 1)
    assert [s.attempts for s in lease_store.partitions([(9, BUCKET)])] == [2]
    assert not lease_store.acquire(9, BUCKET, "c", T0 + timedelta(hours=1), 30)
    assert [s.attempts for s in lease_store.partitions([(9, BUCKET)])] == [2]


def test_renew_keeps_the_owners_progress_for_the_next_scan(lease_store: LeaseStore) -> None:
    # Given a scan that renewed its lease with its progress twice, then a renewal without one
    assert lease_store.acquire(4242, BUCKET, "a", T0, 30)
    assert [s.progress for s in lease_store.partitions([(4242, BUCKET)])] == [None]
    assert lease_store.renew(4242, BUCKET, "a", T0 + timedelta(seconds=10), 30, progress="first")
    assert lease_store.renew(4242, BUCKET, "a", T0 + timedelta(seconds=20), 30, progress="second")
    assert lease_store.renew(4242, BUCKET, "a", T0 + timedelta(seconds=25), 30)
    # When another scan tries to renew it, and then takes the partition over once the lease has lapsed
    assert not lease_store.renew(4242, BUCKET, "b", T0 + timedelta(seconds=26), 30, progress="stolen")
    assert lease_store.acquire(4242, BUCKET, "b", T0 + timedelta(seconds=60), 30)
    # Then the taker reads the last progress its owner kept
    [state] = lease_store.partitions([(4242, BUCKET)])
    assert (state.owner, state.attempts, state.progress) == ("b", 2, "second")


def test_release_gives_the_lease_up_at_once_without_counting_an_attempt(lease_store: LeaseStore) -> None:
    # Given a scan holding a partition with its progress kept
    assert lease_store.acquire(4243, BUCKET, "a", T0, 30)
    assert lease_store.renew(4243, BUCKET, "a", T0 + timedelta(seconds=5), 30, progress="p")
    # When another scan releases it, nothing changes; when its owner does, it is free at once
    assert not lease_store.release(4243, BUCKET, "b", T0 + timedelta(seconds=6))
    assert not lease_store.acquire(4243, BUCKET, "b", T0 + timedelta(seconds=7), 30)
    assert lease_store.release(4243, BUCKET, "a", T0 + timedelta(seconds=8), progress="q")
    [state] = lease_store.partitions([(4243, BUCKET)])
    assert (state.attempts, state.progress, state.done, state.lease_expires_at) == (0, "q", False, RELEASED)
    # Then the next scan takes it at once, as a first attempt, and a finished partition cannot be released
    assert lease_store.acquire(4243, BUCKET, "b", T0 + timedelta(seconds=9), 30)
    assert [s.attempts for s in lease_store.partitions([(4243, BUCKET)])] == [1]
    assert lease_store.mark_done(4243, BUCKET, "b", T0 + timedelta(seconds=10), 0)
    assert not lease_store.release(4243, BUCKET, "b", T0 + timedelta(seconds=11))


def test_parked_partitions_are_kept_with_their_segment_until_unparked(lease_store: LeaseStore) -> None:
    later = BUCKET + timedelta(minutes=1)
    # Given a segment with a watermark and counters
    lease_store.advance_watermark(10, BUCKET + timedelta(minutes=5))
    lease_store.beat(10, "a", T0, 4)
    # When two partitions are parked, one of them twice
    lease_store.park(10, [BUCKET, later])
    lease_store.park(10, [BUCKET])
    # Then the segment lists both, and keeps its watermark and counters
    [state] = lease_store.segments([10])
    assert state.parked == frozenset({BUCKET, later})
    assert (state.watermark, state.last_owner, state.published_total) == (BUCKET + timedelta(minutes=5), "a", 4)
    # When one is unparked (twice: harmless), the other stays
    lease_store.unpark(10, [BUCKET])
    lease_store.unpark(10, [BUCKET])
    assert lease_store.segments([10])[0].parked == frozenset({later})
    lease_store.unpark(10, [later])
    [state] = lease_store.segments([10])
    assert (state.parked, state.watermark) == (frozenset(), BUCKET + timedelta(minutes=5))
    # And the watermark and beats leave the parked set alone
    lease_store.park(10, [later])
    lease_store.advance_watermark(10, BUCKET + timedelta(minutes=9))
    lease_store.beat(10, "b", T0, 1)
    assert lease_store.segments([10])[0].parked == frozenset({later})


def test_parking_on_a_segment_never_seen_before(lease_store: LeaseStore) -> None:
    lease_store.park(11, [BUCKET])
    [state] = lease_store.segments([11])
    assert (state.segment, state.watermark, state.parked) == (11, None, frozenset({BUCKET}))
    lease_store.unpark(12, [BUCKET])  # nothing parked there: harmless
    assert lease_store.segments([12]) == []


def test_the_segment_count_on_record_only_moves_up(lease_store: LeaseStore) -> None:
    assert lease_store.record_segment_count(16) == 16
    assert lease_store.record_segment_count(32) == 32
    assert lease_store.record_segment_count(8) == 32  # lowered: the highest is still scanned
    assert lease_store.record_segment_count(32) == 32
    assert lease_store.record_segment_count(33) == 33
    assert lease_store.segments([0, 1]) == []  # the record is not a segment


def test_a_partition_asked_for_twice_is_listed_once(lease_store: LeaseStore) -> None:
    assert lease_store.acquire(13, BUCKET, "a", T0, 30)
    assert [s.bucket for s in lease_store.partitions([(13, BUCKET), (13, BUCKET)])] == [BUCKET]
    lease_store.advance_watermark(13, BUCKET)
    assert [s.segment for s in lease_store.segments([13, 13])] == [13]


def test_the_reconciler_state_is_what_was_last_saved(lease_store: LeaseStore) -> None:
    assert isinstance(lease_store, ReconcilerStateStore)
    # Given nothing saved, Then nothing loads; When saved twice, Then the last one loads, whole
    assert lease_store.load_reconciler_state() is None
    lease_store.save_reconciler_state('{"cursor": null}')
    lease_store.save_reconciler_state('{"cursor": "x", "watch": {"a|b": 1}}')
    assert lease_store.load_reconciler_state() == '{"cursor": "x", "watch": {"a|b": 1}}'
    # And it shares no item with the segments: the segments read back as they were
    assert lease_store.segments(range(4)) == []
    # And a state larger than a store keeps is refused, the saved one left as it was
    with pytest.raises(ValueError, match="at most"):
        lease_store.save_reconciler_state("x" * (MAX_RECONCILER_STATE + 1))
    assert lease_store.load_reconciler_state() == '{"cursor": "x", "watch": {"a|b": 1}}'
