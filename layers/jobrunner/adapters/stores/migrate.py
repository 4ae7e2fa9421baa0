"""Apply ``cql/`` to a cluster, idempotently: ``python -m jobrunner.adapters.stores.migrate``.

Creates the keyspace (replication depends on the environment), then runs every statement of every
``cql/*.cql`` file in name order. Each statement is ``IF NOT EXISTS``, so running it again is a no-op.
On Keyspaces DDL is asynchronous, so after each CREATE TABLE it waits for the table to be ACTIVE.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from typing import TYPE_CHECKING

from jobrunner.adapters.stores.cql_schema import CQL_DIR, TableSpec, parse_table, statements
from jobrunner.adapters.stores.session import CassandraSettings, connect

if TYPE_CHECKING:
    from pathlib import Path

    from cassandra.cluster import Session



def replication_for(mode: str, replication_factor: int = 1) -> str:
    if mode == "keyspaces":
        return "{'class': 'SingleRegionStrategy'}"
    return f"{{'class': 'SimpleStrategy', 'replication_factor': {replication_factor}}}"


def _wait_active(session: Session, keyspace: str, table: str, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    query = "SELECT status FROM system_schema_mcs.tables WHERE keyspace_name = %s AND table_name = %s"
    while time.monotonic() < deadline:
        row = session.execute(query, (keyspace, table)).one()
        if row is not None and row.status == "ACTIVE":
            return
        time.sleep(2)
    raise TimeoutError(f"table {keyspace}.{table} did not become ACTIVE")


def _add_missing_columns(session: Session, settings: CassandraSettings, table: TableSpec) -> list[str]:
    """``CREATE TABLE IF NOT EXISTS`` leaves an older table as it was: add the columns it lacks.

    Only regular columns can be added (a key never changes once a table exists); Keyspaces supports
    ``ALTER TABLE ... ADD``, and its DDL is asynchronous, hence the wait.
    """
    rows = session.execute(
        "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s",
        (settings.keyspace, table.name),
    )
    existing = {row.column_name for row in rows}
    added = []
    for column in table.regular:
        if column.name not in existing:
            statement = f"ALTER TABLE {table.name} ADD {column.name} {column.type}"
            session.execute(statement, timeout=60)
            added.append(statement)
    if added and settings.mode == "keyspaces":
        _wait_active(session, settings.keyspace, table.name)
    return added


def migrate(settings: CassandraSettings, directory: Path = CQL_DIR) -> list[str]:
    """Apply the schema (tables created, missing columns added); returns the statements run."""
    session = connect(settings, keyspace=False)
    try:
        session.execute(
            f"CREATE KEYSPACE IF NOT EXISTS {settings.keyspace}"
            f" WITH replication = {replication_for(settings.mode)}"
        )
        session.set_keyspace(settings.keyspace)
        applied = []
        for statement in [st for path in sorted(directory.glob("*.cql")) for st in statements(path.read_text())]:
            session.execute(statement, timeout=60)
            applied.append(statement)
            match = re.match(r"CREATE TABLE IF NOT EXISTS (\w+)", statement, re.IGNORECASE)
            if match is None:
                continue
            if settings.mode == "keyspaces":
                _wait_active(session, settings.keyspace, match.group(1))
            applied += _add_missing_columns(session, settings, parse_table(statement))
        return applied
    finally:
        session.cluster.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keyspace", default=os.environ.get("CASSANDRA_KEYSPACE", "jobrunner"))
    args = parser.parse_args()
    from jobrunner.config import Settings

    settings = Settings.from_env().cassandra
    settings = CassandraSettings(**{**settings.__dict__, "keyspace": args.keyspace})
    applied = migrate(settings)
    print(f"schema applied to keyspace {settings.keyspace}: {len(applied)} statement(s)")


if __name__ == "__main__":
    main()
