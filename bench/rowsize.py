"""A row's size as Amazon Keyspaces bills its storage, from the row as the driver reads it back and its table.

The rules are Keyspaces' developer guide, "Estimate row size in Amazon Keyspaces" (``PAGE``):

* a partition key column: its value stored twice, 1 column id and 3 bytes of metadata;
* a clustering column: its value stored twice, 1 byte of metadata per 5 bytes of value (rounded up: the page's
  example gives 1 byte to a value of 2) and a column id;
* a regular column: its value and a column id; the id is 1 byte up to 62 columns in the table, 1 more per 62 more;
* values: text as its UTF-8 bytes; ``int``, ``bigint``, ``smallint``, ``tinyint`` and ``varint`` about 1 byte per
  two significant digits (leading and trailing zeros trimmed) + 1; a blob its length; a boolean or a null 1 byte;
* time to live turned on for the table: about 8 bytes a row and 8 a column (a scalar value);
* client-side timestamps turned on: about 20 to 40 bytes (``CLIENT_TIMESTAMPS_BYTES`` takes the upper end);
* storage (``BillableTableSizeInBytes``): the columns + 100 bytes of row metadata; a read or write unit counts the
  columns alone.

Readings the page leaves open, taken here and named so they can be changed in one place: a type it does not list
(``timestamp``, ``uuid``, ``double``...) counts its CQL binary protocol size (``FIXED_BYTES``); a regular column
that reads back null counts only if the write set it (a null written is a cell: the page's 1-byte null), since a
column a write left unset has no cell at all; the time to live's 8 bytes a column count for every column with a
cell, the key columns and written nulls included (the page: "stored for every column of each row"); the client-side
timestamps' range is the row's, not a column's. Collections are not priced (``value_bytes`` raises): the schema
has none.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from cql.schema import TableSpec

PAGE = "https://docs.aws.amazon.com/keyspaces/latest/devguide/calculating-row-size.html"

ROW_METADATA_BYTES = 100
PARTITION_KEY_METADATA_BYTES = 3
#: A clustering column's metadata: 1 byte per this many bytes of its value (20 %).
CLUSTERING_BYTES_PER_METADATA_BYTE = 5
NULL_BYTES = 1
#: With time to live turned on for the table: per row, and per column with a value.
TTL_BYTES = 8
#: With client-side timestamps turned on: the page's "approximately 20-40 bytes", its upper end.
CLIENT_TIMESTAMPS_BYTES = 40
#: Types the page does not list, at their size in the CQL binary protocol.
FIXED_BYTES = {"timestamp": 8, "uuid": 16, "timeuuid": 16, "double": 8, "float": 4, "date": 4, "time": 8}
STRINGS = frozenset({"text", "varchar", "ascii"})
INTEGERS = frozenset({"int", "bigint", "smallint", "tinyint", "varint"})


def column_id_bytes(columns: int) -> int:
    """The column identifier's size in a table of ``columns`` columns: 1 byte for 1-62, 2 for 63-124, ..."""
    return 1 + (max(columns, 1) - 1) // 62


def value_bytes(cql_type: str, value: Any) -> int:
    """The encoded size of one non-null ``value`` of ``cql_type`` (the page's "data values based on data type").

    Raises ``ValueError`` for a type this module does not price (collections, ``decimal``, ``inet``...)."""
    if cql_type in STRINGS:
        return len(str(value).encode())
    if cql_type in INTEGERS:
        digits = str(abs(int(value))).strip("0")
        return math.ceil(max(len(digits), 1) / 2) + 1
    if cql_type == "blob":
        return len(value)
    if cql_type == "boolean":
        return 1
    if cql_type in FIXED_BYTES:
        return FIXED_BYTES[cql_type]
    raise ValueError(f"no Keyspaces size for a {cql_type!r} value")


def row_bytes(table: TableSpec, row: Mapping[str, Any], *, written: Collection[str] = (), ttl: bool = False,
              client_timestamps: bool = False, storage: bool = True) -> int:
    """The encoded size of ``row`` (column name -> value, as read back) of ``table``, by ``PAGE``'s rules.

    ``written``: the regular columns the row's writes set, so that their nulls count (1 byte each); ``ttl`` and
    ``client_timestamps``: whether the table has those features turned on; ``storage``: with the row metadata
    (the stored size), else the size read and write units count. Raises ``KeyError`` when a key column is missing.
    """
    column_id = column_id_bytes(len(table.columns))
    size = cells = 0
    for column in table.partition_key:
        size += 2 * value_bytes(column.type, row[column.name]) + column_id + PARTITION_KEY_METADATA_BYTES
        cells += 1
    for column, _ in table.clustering:
        encoded = value_bytes(column.type, row[column.name])
        size += 2 * encoded + math.ceil(encoded / CLUSTERING_BYTES_PER_METADATA_BYTE) + column_id
        cells += 1
    for column in table.regular:
        value = row.get(column.name)
        if value is None and column.name not in written:
            continue  # no cell
        size += (NULL_BYTES if value is None else value_bytes(column.type, value)) + column_id
        cells += 1
    size += TTL_BYTES * (1 + cells) if ttl else 0
    size += CLIENT_TIMESTAMPS_BYTES if client_timestamps else 0
    return size + (ROW_METADATA_BYTES if storage else 0)
