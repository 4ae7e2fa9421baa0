"""Apply ``cql/`` to a cluster, idempotently: ``python -m jobrunner.adapters.stores.migrate``.

Creates the keyspace (replication depends on the environment), then runs every statement of every
``cql/*.cql`` file in name order. Each statement is ``IF NOT EXISTS``, so running it again is a no-op.
On Keyspaces DDL is asynchronous, so after each CREATE TABLE it waits for the table to be ACTIVE.

Then it moves the rows of ``task_schedule`` (an older keyspace's table, whose key lacked the job
version) into ``task_schedule_v2``, each placed anew as of now so that one whose bucket was already
scanned lands in the partition being scanned (see ``domain.placement``), and deletes the moved rows.
Running it again moves nothing twice. Run it once more after the new code is live, for rows an old
writer may have added meanwhile (``docs/deploy.md``).
"""

from __future__ import annotations

import argparse
import os
import re
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement

from jobrunner.adapters.stores import codec
from jobrunner.adapters.stores.cassandra import CassandraJobStore
from jobrunner.adapters.stores.cql_schema import CQL_DIR, TableSpec, parse_table, statements
from jobrunner.adapters.stores.session import CassandraSettings, connect
from jobrunner.domain.placement import placed_anew

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


LEGACY_SCHEDULE = "task_schedule"


def move_legacy_rows(session: Session, keyspace: str, now: datetime | None = None) -> int:
    """Move every row of the legacy ``task_schedule`` table into ``task_schedule_v2``; returns how many.

    A full read of the old table (token-range paging, which Keyspaces supports); each row is written
    to the new table before it is deleted from the old one, so a crash in between leaves a copy, never
    a loss (a copy is the same execution, under the same ``execution_id``)."""
    tables = {row.table_name for row in session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,))}
    if LEGACY_SCHEDULE not in tables:
        return 0
    store = CassandraJobStore(session)
    delete = session.prepare(
        f"DELETE FROM {LEGACY_SCHEDULE} WHERE next_execution_time = ? AND segment = ? AND lane = ? AND due_at = ?"
        " AND job_id = ? AND execution_id = ?"
    )
    delete.consistency_level = ConsistencyLevel.LOCAL_QUORUM
    read = SimpleStatement(f"SELECT * FROM {LEGACY_SCHEDULE}", fetch_size=500,
                           consistency_level=ConsistencyLevel.LOCAL_QUORUM)
    moved = 0
    for row in session.execute(read):
        old = codec.scheduled_from_row(row)
        store.schedule([placed_anew(old, now or datetime.now(UTC))])
        session.execute(delete, (row.next_execution_time, row.segment, row.lane, row.due_at, row.job_id,
                                 row.execution_id))
        moved += 1
    return moved


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
        moved = move_legacy_rows(session, settings.keyspace)
        if moved:
            applied.append(f"-- moved {moved} row(s) from {LEGACY_SCHEDULE} to task_schedule_v2")
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
