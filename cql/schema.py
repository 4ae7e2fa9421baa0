"""``cql/*.cql`` parsed into table specs, so the Keyspaces tables are derived from the one schema.

The parser understands what the schema uses and refuses the rest loudly, rather than deploying a
table that differs from ``cql/``: ``CREATE TABLE [IF NOT EXISTS] name (columns, PRIMARY KEY (...))``
with ``WITH CLUSTERING ORDER BY (...)`` and ``default_time_to_live``. Anything else (another
statement, another table option, a static column) raises ``SchemaError``.

``keyspaces_violations`` lists what a CQL statement uses that Amazon Keyspaces does not support
(checked against ``cql/`` and the statements the store issues).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

CQL_DIR = Path(__file__).resolve().parent

#: Column types Amazon Keyspaces accepts (its "Cassandra data type support" table). ``duration`` is
#: left out on purpose: the schema does not need it and its support on Keyspaces is not confirmed.
KEYSPACES_TYPES = frozenset({
    "ascii", "bigint", "blob", "boolean", "counter", "date", "decimal", "double", "float", "inet", "int",
    "smallint", "text", "time", "timestamp", "timeuuid", "tinyint", "uuid", "varchar", "varint",
})
COLLECTIONS = frozenset({"list", "set", "map", "tuple", "frozen"})


class SchemaError(ValueError):
    """The schema uses something the parser (and therefore the deployed tables) would not reproduce."""


@dataclass(frozen=True)
class Column:
    name: str
    type: str


@dataclass(frozen=True)
class TableSpec:
    name: str
    partition_key: tuple[Column, ...]
    #: Clustering columns in key order, each with "ASC" or "DESC".
    clustering: tuple[tuple[Column, str], ...]
    #: Every other column, in the order the schema declares them.
    regular: tuple[Column, ...]
    default_time_to_live: int | None = None
    #: Rows are written with ``USING TTL`` (``with_row_ttls``): Keyspaces must have TTL turned on.
    rows_expire: bool = False

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.partition_key + tuple(c for c, _ in self.clustering) + self.regular


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    return re.sub(r"(--|//)[^\n]*", "", text)


def statements(text: str) -> list[str]:
    """The statements of a CQL script, comments removed, whitespace collapsed."""
    return [" ".join(s.split()) for s in strip_comments(text).split(";") if s.strip()]


def split_top_level(text: str, separator: str = ",") -> list[str]:
    """Split on ``separator`` outside parentheses and angle brackets (``map<text, int>`` stays whole)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char in "(<":
            depth += 1
        elif char in ")>":
            depth -= 1
        if char == separator and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def _unwrap(text: str) -> str:
    text = text.strip()
    if not (text.startswith("(") and text.endswith(")")):
        raise SchemaError(f"expected a parenthesised list, got {text!r}")
    return text[1:-1]


def _names(text: str) -> list[str]:
    return [n.strip().lower() for n in split_top_level(text)]


def _check_type(table: str, column: str, cql_type: str) -> str:
    normalized = re.sub(r"\s+", "", cql_type.lower())
    for word in re.findall(r"[a-z_][a-z0-9_]*", normalized):
        if word not in KEYSPACES_TYPES and word not in COLLECTIONS:
            raise SchemaError(f"{table}.{column}: type {cql_type!r} ({word}) is not supported here")
    return re.sub(r",", ", ", normalized)


_CREATE = re.compile(r"^CREATE TABLE (?:IF NOT EXISTS )?(?:\w+\.)?(\w+) ?\(", re.IGNORECASE)


def _closing(text: str, start: int) -> int:
    """Index of the parenthesis closing the one at ``start``."""
    depth = 0
    for index in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return index
    raise SchemaError(f"unbalanced parentheses in {text[:80]!r}")


def parse_table(statement: str) -> TableSpec:
    match = _CREATE.match(statement)
    if match is None:
        raise SchemaError(f"only CREATE TABLE statements are supported, got: {statement[:80]!r}")
    name = match.group(1)
    close = _closing(statement, match.end() - 1)
    body = statement[match.end():close]
    tail = statement[close + 1:].strip()
    if tail and not re.match(r"^WITH\s", tail, re.IGNORECASE):
        raise SchemaError(f"{name}: unexpected text after the column list: {tail!r}")
    name = name.lower()
    columns, primary = _columns(name, body)
    partition_names, clustering_names = _key(primary)
    orders, ttl = _table_options(name, tail[4:].strip() if tail else None, clustering_names)
    key_names = partition_names + clustering_names
    missing = [k for k in key_names if k not in columns]
    if missing:
        raise SchemaError(f"{name}: key columns {missing} are not declared")
    return TableSpec(
        name=name,
        partition_key=tuple(Column(k, columns[k]) for k in partition_names),
        clustering=tuple((Column(k, columns[k]), orders[k]) for k in clustering_names),
        regular=tuple(Column(c, t) for c, t in columns.items() if c not in key_names),
        default_time_to_live=ttl,
    )


def _columns(name: str, body: str) -> tuple[dict[str, str], str]:
    """The column list of table ``name``: column -> its normalized type, and the PRIMARY KEY's parenthesised list."""
    columns: dict[str, str] = {}
    primary: str | None = None
    for item in split_top_level(body):
        if re.match(r"^PRIMARY KEY\b", item, re.IGNORECASE):
            primary = item[len("PRIMARY KEY"):].strip()
            continue
        words = item.split(None, 1)
        if len(words) != 2:
            raise SchemaError(f"{name}: cannot read column definition {item!r}")
        column, rest = words[0].lower(), words[1]
        if re.search(r"\bSTATIC\b", rest, re.IGNORECASE):
            raise SchemaError(f"{name}.{column}: static columns cannot be declared through CloudFormation")
        inline_key = re.search(r"\s+PRIMARY KEY$", rest, re.IGNORECASE)
        if inline_key:
            rest = rest[: inline_key.start()]
            primary = f"({column})"
        columns[column] = _check_type(name, column, rest)
    if primary is None:
        raise SchemaError(f"{name}: no PRIMARY KEY")
    return columns, primary


def _key(primary: str) -> tuple[list[str], list[str]]:
    """``((a, b), c, d)`` -> the partition key's columns and the clustering columns, in key order."""
    key_items = split_top_level(_unwrap(primary))
    partition_names = _names(_unwrap(key_items[0])) if key_items[0].startswith("(") else [key_items[0].lower()]
    return partition_names, [k.strip().lower() for k in key_items[1:]]


def _table_options(name: str, options: str | None, clustering: list[str]) -> tuple[dict[str, str], int | None]:
    """The ``WITH`` options of table ``name``: each clustering column's order, and the default time to live."""
    orders = {c: "ASC" for c in clustering}
    ttl = None
    for option in _options(options):
        order = re.match(r"^CLUSTERING ORDER BY \((.*)\)$", option, re.IGNORECASE)
        ttl_match = re.match(r"^default_time_to_live\s*=\s*(\d+)$", option, re.IGNORECASE)
        if order:
            orders.update(_clustering_order(name, order.group(1), orders))
        elif ttl_match:
            ttl = int(ttl_match.group(1))
        else:
            raise SchemaError(f"{name}: table option {option!r} is not derived into Keyspaces; extend cql/schema.py")
    return orders, ttl


def _clustering_order(name: str, entries: str, orders: dict[str, str]) -> dict[str, str]:
    """``at DESC, id ASC`` -> column -> direction; a column outside ``orders`` or another direction is refused."""
    out: dict[str, str] = {}
    for entry in split_top_level(entries):
        column, _, direction = entry.partition(" ")
        column = column.lower()
        if column not in orders or direction.upper() not in ("ASC", "DESC"):
            raise SchemaError(f"{name}: bad clustering order entry {entry!r}")
        out[column] = direction.upper()
    return out


def _options(options: str | None) -> list[str]:
    if not options:
        return []
    return [o.strip() for o in re.split(r"\s+AND\s+", options, flags=re.IGNORECASE) if o.strip()]


def load_tables(directory: Path = CQL_DIR) -> list[TableSpec]:
    """Every table of every ``*.cql`` file, in file-name order."""
    tables = [parse_table(s) for path in sorted(directory.glob("*.cql")) for s in statements(path.read_text())]
    if not tables:
        raise SchemaError(f"no tables in {directory}")
    names = [t.name for t in tables]
    if len(set(names)) != len(names):
        raise SchemaError(f"a table is declared twice: {names}")
    return tables


_INSERT_WITH_TTL = re.compile(r"^(?:INSERT INTO|UPDATE) (?:\w+\.)?(\w+)\b.*\bUSING TTL\b", re.IGNORECASE)


def with_row_ttls(tables: Sequence[TableSpec], dml: Iterable[str]) -> list[TableSpec]:
    """``tables`` with ``rows_expire`` set on each one that a statement of ``dml`` inserts into or updates
    ``USING TTL``."""
    expiring = {m.group(1).lower() for m in (_INSERT_WITH_TTL.match(" ".join(s.split())) for s in dml) if m}
    return [replace(t, rows_expire=t.name in expiring) for t in tables]


# What Keyspaces rejects, as (pattern, reason). The statements are matched with string literals removed.
_UNSUPPORTED: tuple[tuple[str, str], ...] = (
    (r"\bCREATE\s+(CUSTOM\s+)?INDEX\b|\bDROP\s+INDEX\b", "secondary indexes"),
    (r"\bMATERIALIZED\s+VIEW\b", "materialized views"),
    (r"\bTRUNCATE\b", "TRUNCATE"),
    (r"\bALLOW\s+FILTERING\b", "ALLOW FILTERING (billed per row read; the design forbids it)"),
    (r"\bSTATIC\b", "static columns (not declarable through CloudFormation)"),
    (r"\b(CREATE|DROP)\s+(OR\s+REPLACE\s+)?(FUNCTION|AGGREGATE)\b", "user-defined functions and aggregates"),
    (r"\b(CREATE|DROP)\s+TRIGGER\b", "triggers"),
    (r"\bALTER\s+TYPE\b", "ALTER TYPE"),
    (r"\b(LOCAL_)?SERIAL\b", "SERIAL consistency"),
    (r"\bUSING\s+TIMESTAMP\b|\bWRITETIME\s*\(",
     "explicit client-side timestamps (writes carry the driver's; Keyspaces refuses one over 2 days old)"),
)
_BATCHABLE = re.compile(r"^(INSERT|UPDATE|DELETE)\b", re.IGNORECASE)


def _without_literals(statement: str) -> str:
    return re.sub(r"'(?:[^']|'')*'", "''", statement)


def keyspaces_violations(statement: str) -> list[str]:
    """What ``statement`` uses that Amazon Keyspaces does not support (empty when it is fine)."""
    text = " ".join(_without_literals(strip_comments(statement)).split())
    problems = [reason for pattern, reason in _UNSUPPORTED if re.search(pattern, text, re.IGNORECASE)]
    if re.match(r"^(UPDATE|DELETE)\b", text, re.IGNORECASE) and re.search(r"\bIN\s*\(", text, re.IGNORECASE):
        problems.append("IN in UPDATE or DELETE")
    batch = re.match(r"^BEGIN\s+(UNLOGGED\s+|LOGGED\s+|COUNTER\s+)?BATCH\b(.*)\bAPPLY\s+BATCH$", text, re.IGNORECASE)
    if batch:
        problems += [f"batch member: {v}" for inner in batch.group(2).split(";") if inner.strip()
                     for v in batch_member_violations(inner.strip())]
    return problems


def batch_member_violations(statement: str) -> list[str]:
    """A statement inside a batch: unconditional INSERT, UPDATE or DELETE only."""
    text = " ".join(_without_literals(statement).split())
    problems = []
    if not _BATCHABLE.match(text):
        problems.append(f"only INSERT, UPDATE and DELETE may be batched, not {text.split(' ', 1)[0]!r}")
    if re.search(r"\bIF\b", text, re.IGNORECASE):
        problems.append("conditional (IF ...) statements may not be batched")
    return problems + keyspaces_violations(text)
