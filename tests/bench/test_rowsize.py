"""A row's billed size by Amazon Keyspaces' rules (bench/rowsize.py), checked against the page's own example."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.rowsize import (
    CLIENT_TIMESTAMPS_BYTES,
    ROW_METADATA_BYTES,
    TTL_BYTES,
    column_id_bytes,
    row_bytes,
    value_bytes,
)
from cql.schema import load_tables, parse_table

#: The example of "Estimate row size in Amazon Keyspaces": five int columns, values 1 to 5.
EXAMPLE = parse_table(
    "CREATE TABLE mykeyspace.mytable(pk_col1 int, pk_col2 int, ck_col1 int, ck_col2 int, reg_col1 int,"
    " primary key((pk_col1, pk_col2),ck_col1, ck_col2))")
EXAMPLE_ROW = {"pk_col1": 1, "pk_col2": 2, "ck_col1": 3, "ck_col2": 4, "reg_col1": 5}
HISTORY = {t.name: t for t in load_tables()}["task_history_v2"]


def test_the_pages_example_is_131_bytes_stored() -> None:
    # The page: 16 bytes of partition key (2 x 2 + 1 + 3 each), 12 of clustering (2 x 2 + 1 + 1 each),
    # 3 for the regular column (2 + 1), + 100 of row metadata
    assert row_bytes(EXAMPLE, EXAMPLE_ROW) == 131
    assert row_bytes(EXAMPLE, EXAMPLE_ROW, storage=False) == 31


def test_the_column_id_grows_a_byte_per_62_columns() -> None:
    assert [column_id_bytes(n) for n in (1, 62, 63, 124, 125, 186, 187)] == [1, 1, 2, 2, 3, 3, 4]


@pytest.mark.parametrize(("cql_type", "value", "size"), [
    ("int", 5, 2),                     # one significant digit: 1 + 1
    ("int", 1000, 2),                  # trailing zeros trimmed
    ("bigint", 123456, 4),             # six digits: 3 + 1
    ("bigint", -1234567, 5),           # the sign is not a digit
    ("int", 0, 2),
    ("text", "abc", 3),
    ("text", "é", 2),                  # UTF-8 bytes, not characters
    ("blob", b"\x00\x01", 2),
    ("boolean", False, 1),
    ("timestamp", datetime(2026, 11, 29, tzinfo=UTC), 8),  # not on the page: the protocol's 8 bytes
])
def test_a_values_size_follows_its_type(cql_type: str, value: object, size: int) -> None:
    assert value_bytes(cql_type, value) == size


def test_a_type_it_does_not_price_is_refused() -> None:
    with pytest.raises(ValueError, match="decimal"):
        value_bytes("decimal", 1)


def test_a_null_counts_only_where_the_write_set_it() -> None:
    # Given a history row read back whose status and error are null
    row = {"job_id": "j", "execution_time": datetime(2026, 11, 29, tzinfo=UTC), "attempt": 1,
           "execution_id": "e", "user_id": "u", "status": None, "error": None}
    unset = row_bytes(HISTORY, row)
    # When the write had set status to null (a cell), then that cell counts: 1 byte and its column id
    assert row_bytes(HISTORY, row, written={"status"}) == unset + 2
    # And the key alone: job_id 2 x 1 + 1 + 3; execution_time 2 x 8 + 2 + 1; attempt 2 x 2 + 1 + 1; execution_id
    # 2 x 1 + 1 + 1; then user_id 1 + 1; + 100
    assert unset == 6 + 19 + 6 + 4 + 2 + ROW_METADATA_BYTES


def test_time_to_live_and_client_timestamps_add_their_metadata() -> None:
    plain = row_bytes(EXAMPLE, EXAMPLE_ROW)
    # TTL: 8 bytes for the row and 8 for each of its five columns, the key's included
    assert row_bytes(EXAMPLE, EXAMPLE_ROW, ttl=True) == plain + 6 * TTL_BYTES
    assert row_bytes(EXAMPLE, EXAMPLE_ROW, client_timestamps=True) == plain + CLIENT_TIMESTAMPS_BYTES


def test_a_missing_key_column_is_an_error() -> None:
    with pytest.raises(KeyError):
        row_bytes(EXAMPLE, {"pk_col1": 1})
