"""The Cassandra store's request packing, without a server (the store's behaviour is in tests/contract)."""

from __future__ import annotations

import pytest

from jobrunner.adapters.stores.cassandra import KEYSPACES_MAX_BATCH, KEYSPACES_MAX_IN, CassandraJobStore, packed


def test_packed_keeps_each_partitions_items_together_and_in_order() -> None:
    items = [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", 2), ("a", 3)]
    chunks = packed(items, 3, partition=lambda item: item[0])
    assert chunks == [[("a", 1), ("a", 2), ("a", 3)], [("b", 1), ("b", 2), ("c", 1)]]


def test_packed_splits_a_partition_larger_than_a_chunk_and_loses_nothing() -> None:
    items = [("a", n) for n in range(7)] + [("b", 0)]
    chunks = packed(items, 3, partition=lambda item: item[0])
    assert [len(chunk) for chunk in chunks] == [3, 3, 2]
    assert [item for chunk in chunks for item in chunk] == items


def test_packed_of_nothing_is_no_chunk() -> None:
    assert packed([], 10, partition=lambda item: item) == []


@pytest.mark.parametrize("option", [{"batch_rows": 0}, {"batch_rows": KEYSPACES_MAX_BATCH + 1},
                                    {"in_keys": 0}, {"in_keys": KEYSPACES_MAX_IN + 1}])
def test_batches_and_in_lists_stay_within_what_keyspaces_takes(option: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="must be 1 to"):
        CassandraJobStore(session=None, **option)  # type: ignore[arg-type]
