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
from pathlib import Path
from typing import TYPE_CHECKING

from jobrunner.adapters.stores.session import CassandraSettings, connect

if TYPE_CHECKING:
    from cassandra.cluster import Session

CQL_DIR = Path(__file__).resolve().parents[4] / "cql"


def cql_statements(directory: Path = CQL_DIR) -> list[str]:
    """The statements of every ``.cql`` file, comments stripped, in file-name order."""
    statements = []
    for path in sorted(directory.glob("*.cql")):
        text = re.sub(r"--[^\n]*", "", path.read_text())
        statements += [s.strip() for s in text.split(";") if s.strip()]
    return statements


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


def migrate(settings: CassandraSettings, directory: Path = CQL_DIR) -> list[str]:
    """Apply the schema; returns the statements run."""
    session = connect(settings, keyspace=False)
    try:
        session.execute(
            f"CREATE KEYSPACE IF NOT EXISTS {settings.keyspace}"
            f" WITH replication = {replication_for(settings.mode)}"
        )
        session.set_keyspace(settings.keyspace)
        statements = cql_statements(directory)
        for statement in statements:
            session.execute(statement, timeout=60)
            match = re.match(r"CREATE TABLE IF NOT EXISTS (\w+)", statement, re.IGNORECASE)
            if settings.mode == "keyspaces" and match:
                _wait_active(session, settings.keyspace, match.group(1))
        return statements
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
