"""Everything the store sends, and everything in cql/, is within what Amazon Keyspaces supports.

Sources: ``STATEMENTS`` of ``jobrunner.adapters.stores.cassandra`` (every CQL string the store issues) and
of ``jobrunner.adapters.stores.changes`` (the change log's) and ``.calendars`` (the calendars'),
the statements it puts in batches (read from its source), ``STATEMENTS`` of
``cql.migrate`` (what the migration sends besides the schema), the consistency
levels the store modules use, and ``cql/*.cql``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from cql.schema import CQL_DIR, batch_member_violations, keyspaces_violations, statements

STORES = Path(__file__).resolve().parents[2] / "layers" / "jobrunner" / "adapters" / "stores"
#: The store's modules: the store, and the history table's adapter it composes (its statements are the store's).
STORE_MODULES = ("cassandra.py", "history.py")
#: Keyspaces rejects EACH_QUORUM, QUORUM, ALL, TWO, THREE, ANY, SERIAL and LOCAL_SERIAL.
SUPPORTED_CONSISTENCY = {"ONE", "LOCAL_ONE", "LOCAL_QUORUM"}


def _store_statements() -> list[str]:
    from jobrunner.adapters.stores.cassandra import STATEMENTS

    return list(STATEMENTS)


def _change_log_statements() -> list[str]:
    from jobrunner.adapters.stores.changes import STATEMENTS

    return list(STATEMENTS)


def _calendar_statements() -> list[str]:
    from jobrunner.adapters.stores.calendars import STATEMENTS

    return list(STATEMENTS)


@pytest.mark.parametrize("statement", _calendar_statements(), ids=lambda s: s[:60])
def test_calendar_statement_is_supported(statement: str) -> None:
    assert keyspaces_violations(statement) == []


def test_statements_lists_every_cql_constant_of_the_calendars() -> None:
    import jobrunner.adapters.stores.calendars as calendars

    constants = {value for value in vars(calendars).values() if isinstance(value, str) and _CQL.match(value)}

    assert constants <= set(calendars.STATEMENTS)


def _migration_statements() -> list[str]:
    from cql.migrate import STATEMENTS

    return list(STATEMENTS)


def _cql_statements() -> list[str]:
    return [s for path in sorted(CQL_DIR.glob("*.cql")) for s in statements(path.read_text())]


@pytest.mark.parametrize("statement", _store_statements(), ids=lambda s: s[:60])
def test_store_statement_is_supported(statement: str) -> None:
    assert keyspaces_violations(statement) == []


@pytest.mark.parametrize("statement", _change_log_statements(), ids=lambda s: s[:60])
def test_change_log_statement_is_supported(statement: str) -> None:
    assert keyspaces_violations(statement) == []


def test_statements_lists_every_cql_constant_of_the_change_log() -> None:
    import jobrunner.adapters.stores.changes as changes

    constants = {value for value in vars(changes).values() if isinstance(value, str) and _CQL.match(value)}

    assert constants <= set(changes.STATEMENTS)


@pytest.mark.parametrize("statement", _migration_statements(), ids=lambda s: s[:60])
def test_migration_statement_is_supported(statement: str) -> None:
    assert keyspaces_violations(statement) == []


def test_statements_lists_every_cql_constant_of_the_migration() -> None:
    import cql.migrate as migration

    constants = {value for value in vars(migration).values() if isinstance(value, str) and _CQL.match(value)}

    assert constants <= set(migration.STATEMENTS)


@pytest.mark.parametrize("statement", _cql_statements(), ids=lambda s: s[:60])
def test_schema_statement_is_supported(statement: str) -> None:
    assert keyspaces_violations(statement) == []


_CQL = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|BEGIN|CREATE|ALTER|DROP|TRUNCATE|USE)\b", re.IGNORECASE)


def test_statements_lists_every_cql_constant_of_the_store() -> None:
    import jobrunner.adapters.stores.cassandra as store

    constants = {name for name, value in vars(store).items() if isinstance(value, str) and _CQL.match(value)}

    assert {getattr(store, name) for name in constants} <= set(store.STATEMENTS)


def test_store_executes_no_inline_cql_outside_statements() -> None:
    from jobrunner.adapters.stores.cassandra import STATEMENTS

    literals = [node.value for module in STORE_MODULES for node in ast.walk(ast.parse((STORES / module).read_text()))
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and _CQL.match(node.value)]

    # Module constants are built from several literals; every literal must be part of one of them.
    assert [literal for literal in literals if not any(literal in statement for statement in STATEMENTS)] == []


def _batched_statement_names(source: str) -> set[str]:
    """Names of the module constants passed to ``<batch>.add(self._stmt(NAME), ...)``, and to
    ``<statements>.write_many(NAME, ...)`` (``driver.Statements``), which puts its statement in unlogged batches."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
            continue
        first = node.args[0]
        if (node.func.attr == "add" and isinstance(first, ast.Call) and first.args
                and isinstance(first.args[0], ast.Name) and first.args[0].id.isupper()):
            names.add(first.args[0].id)
        elif node.func.attr == "write_many" and isinstance(first, ast.Name) and first.id.isupper():
            names.add(first.id)
    return names


def test_batches_hold_only_unconditional_writes() -> None:
    import jobrunner.adapters.stores.cassandra as store

    batched = set().union(*(_batched_statement_names((STORES / module).read_text()) for module in STORE_MODULES))

    assert {"INSERT_JOB", "INSERT_SCHEDULED", "INSERT_RECORD_STARTED", "DELETE_SCHEDULED"} <= batched
    for name in sorted(batched):
        assert batch_member_violations(getattr(store, name)) == [], name


def test_the_stores_build_no_logged_batch() -> None:
    # A logged batch stalls on a cluster for as long as a node that has just died is still thought alive (its
    # batch log waits for two other nodes), and on Keyspaces each of its rows is written twice: every step of
    # several rows is ordered instead (adapters/stores/cassandra.py). The batches the stores do build are
    # UNLOGGED: rows packed into one request, each row its own write, with no batch log.
    for path in sorted(STORES.glob("*.py")):
        source = path.read_text()
        assert "BatchType.LOGGED" not in source, path.name
        assert source.count("BatchStatement(") == source.count("BatchType.UNLOGGED"), path.name


def _consistency_levels() -> tuple[set[str], set[str]]:
    """(levels used as a request's consistency, levels used as a serial consistency) in the store modules. The
    settling read's serial level on Cassandra (``SERIAL_READ``) counts as serial: a store for Keyspaces never uses
    it (``tests/unit/jobrunner/adapters/stores/test_cassandra.py`` checks both profiles)."""
    regular, serial = set(), set()
    for path in sorted(STORES.glob("*.py")):
        for line in path.read_text().splitlines():
            for level in re.findall(r"ConsistencyLevel\.(\w+)", line):
                (serial if "serial_consistency" in line or line.startswith("SERIAL_READ =") else regular).add(level)
    return regular, serial


def test_store_uses_only_supported_consistency_levels() -> None:
    regular, _serial = _consistency_levels()

    assert regular
    assert regular <= SUPPORTED_CONSISTENCY


def test_serial_consistency_of_conditional_writes_is_local() -> None:
    # Where one is set (a cluster's profile, the settling read on Cassandra), it is the single-datacenter LOCAL_SERIAL.
    _regular, serial = _consistency_levels()

    assert serial <= {"LOCAL_SERIAL"}


MIGRATION = Path(__file__).resolve().parents[2] / "cql" / "migrate.py"


def test_only_the_session_profiles_choose_a_serial_consistency() -> None:
    # Keyspaces lists SERIAL and LOCAL_SERIAL among the levels it rejects with an exception, and runs every write, a
    # conditional one too, at LOCAL_QUORUM: its profile sets no serial level (adapters/stores/keyspaces.py), the
    # Cassandra profile sets LOCAL_SERIAL (adapters/stores/session.py). A statement that set its own would send it
    # to Keyspaces too, so none does: not the store's, not the migration's (which runs on both).
    setters = []
    for path in [*sorted(STORES.glob("*.py")), MIGRATION]:
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else []
            setters += [f"{path.name}:{node.lineno}" for target in targets
                        if isinstance(target, ast.Attribute) and target.attr == "serial_consistency_level"]

    assert setters == []


@pytest.mark.parametrize(("statement", "problem"), [
    ("CREATE INDEX ON job_table (state)", "secondary indexes"),
    ("CREATE MATERIALIZED VIEW v AS SELECT * FROM t", "materialized views"),
    ("TRUNCATE task_history_v2", "TRUNCATE"),
    ("SELECT * FROM job_table WHERE state = ? ALLOW FILTERING", "ALLOW FILTERING"),
    ("CREATE TABLE t (k int, s int STATIC, c int, PRIMARY KEY (k, c))", "static columns"),
    ("CREATE FUNCTION f (x int) RETURNS NULL ON NULL INPUT RETURNS int LANGUAGE java AS 'return x;'",
     "user-defined functions"),
    ("CREATE OR REPLACE AGGREGATE a (int) SFUNC f STYPE int", "user-defined functions"),
    ("CREATE TRIGGER tr ON t USING 'org.x.Trigger'", "triggers"),
    ("ALTER TYPE address ADD zip text", "ALTER TYPE"),
    ("UPDATE t SET v = 1 WHERE k IN (1, 2)", "IN in UPDATE"),
    ("INSERT INTO t (k, v) VALUES (1, 2) USING TIMESTAMP 5", "client-side timestamps"),
    ("BEGIN BATCH INSERT INTO t (k) VALUES (1) IF NOT EXISTS; APPLY BATCH", "conditional"),
    ("BEGIN BATCH SELECT * FROM t; APPLY BATCH", "only INSERT, UPDATE and DELETE"),
])
def test_unsupported_features_are_caught(statement: str, problem: str) -> None:
    assert any(problem in v for v in keyspaces_violations(statement))


def test_words_inside_string_literals_do_not_count() -> None:
    assert keyspaces_violations("INSERT INTO t (k, note) VALUES (1, 'TRUNCATE ALLOW FILTERING')") == []
