"""The CQL parser that derives the Keyspaces tables: what it reads, and what it refuses."""

from __future__ import annotations

import pytest

from cql.schema import (
    Column,
    SchemaError,
    load_tables,
    parse_table,
    split_top_level,
    statements,
    with_row_ttls,
)


def test_reads_composite_keys_clustering_order_and_collections() -> None:
    spec = parse_table(
        "CREATE TABLE IF NOT EXISTS ks.events ("
        " day date, shard int, at timestamp, id text, tags map<text, frozen<list<int>>>, note text,"
        " PRIMARY KEY ((day, shard), at, id)"
        ") WITH CLUSTERING ORDER BY (at DESC) AND default_time_to_live = 3600"
    )

    assert spec.name == "events"
    assert spec.partition_key == (Column("day", "date"), Column("shard", "int"))
    assert spec.clustering == ((Column("at", "timestamp"), "DESC"), (Column("id", "text"), "ASC"))
    assert spec.regular == (Column("tags", "map<text, frozen<list<int>>>"), Column("note", "text"))
    assert spec.default_time_to_live == 3600


def test_reads_an_inline_primary_key() -> None:
    spec = parse_table("CREATE TABLE t (id uuid PRIMARY KEY, v text)")

    assert spec.partition_key == (Column("id", "uuid"),)
    assert spec.clustering == ()


def test_comments_are_ignored() -> None:
    script = "-- a table\nCREATE TABLE t (k int, /* note */ v int, PRIMARY KEY (k)); // done\n"

    assert statements(script) == ["CREATE TABLE t (k int, v int, PRIMARY KEY (k))"]


def test_split_keeps_type_parameters_together() -> None:
    assert split_top_level("a map<text, int>, b int, PRIMARY KEY ((a, b))") == [
        "a map<text, int>", "b int", "PRIMARY KEY ((a, b))",
    ]


@pytest.mark.parametrize(("statement", "message"), [
    ("CREATE TABLE t (k int, s int STATIC, c int, PRIMARY KEY (k, c))", "static"),
    ("CREATE TABLE t (k int, v int, PRIMARY KEY (k)) WITH compaction = {'class': 'LCS'}", "not derived"),
    ("CREATE TABLE t (k int, v duration, PRIMARY KEY (k))", "duration"),
    ("CREATE TABLE t (k int, v int)", "PRIMARY KEY"),
    ("CREATE TABLE t (k int, PRIMARY KEY (k, c))", "not declared"),
    ("CREATE TYPE address (street text)", "only CREATE TABLE"),
    ("CREATE TABLE t (k int, c int, PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (x DESC)", "clustering order"),
])
def test_what_it_cannot_reproduce_is_refused(statement: str, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        parse_table(statement)


def test_the_project_schema_parses() -> None:
    names = [t.name for t in load_tables()]

    assert {"job_table_v2", "task_schedule_v2", "task_history_v2"} <= set(names)
    assert "task_history" not in names  # replaced: its key lacked the execution id


def test_tables_inserted_using_ttl_are_marked_for_keyspaces_to_turn_ttl_on() -> None:
    tables = [parse_table(f"CREATE TABLE {name} (k int PRIMARY KEY, v int)") for name in ("a", "b")]
    dml = ["INSERT INTO a (k, v) VALUES (?, ?)\n USING TTL ?", "INSERT INTO b (k) VALUES (?)", "SELECT * FROM b"]
    assert [(t.name, t.rows_expire) for t in with_row_ttls(tables, dml)] == [("a", True), ("b", False)]


def test_tables_updated_using_ttl_are_marked_too() -> None:
    # (a one-time job's row is written by updates only, each with its time to live: adapters.stores.expiring)
    tables = [parse_table(f"CREATE TABLE {name} (k int PRIMARY KEY, v int)") for name in ("a", "b")]
    dml = ["UPDATE b USING TTL ? SET v = ? WHERE k = ? IF v = ?", "UPDATE a SET v = ? WHERE k = ?"]
    assert [(t.name, t.rows_expire) for t in with_row_ttls(tables, dml)] == [("a", False), ("b", True)]


def test_the_job_table_is_marked_for_keyspaces_to_turn_ttl_on() -> None:
    from jobrunner.adapters.stores.cassandra import STATEMENTS

    marked = {t.name for t in with_row_ttls(load_tables(), STATEMENTS) if t.rows_expire}
    assert "job_table_v2" in marked


def test_every_function_of_the_schema_tools_has_a_cyclomatic_complexity_of_at_most_12() -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "C901", "--config",
                             "lint.mccabe.max-complexity=12", "cql"], cwd=root, capture_output=True, text=True,
                            check=False)

    assert result.returncode == 0, result.stdout + result.stderr
