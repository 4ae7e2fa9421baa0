"""Migrations on real Cassandra: idempotent, and an older table gains the columns cql/ added since."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from jobrunner.adapters.stores.migrate import migrate
from jobrunner.adapters.stores.session import connect

if TYPE_CHECKING:
    from jobrunner.config import Settings

pytestmark = pytest.mark.integration


def test_migrate_is_idempotent_and_adds_missing_columns(settings: Settings) -> None:
    keyspace = f"jr_migrate_{uuid.uuid4().hex[:8]}"
    cassandra = replace(settings.cassandra, keyspace=keyspace)
    admin = connect(cassandra, keyspace=False)
    try:
        # Given a keyspace whose job_table predates the timeout_s and trace_parent columns
        admin.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                      "{'class': 'SimpleStrategy', 'replication_factor': 1}", timeout=60)
        admin.execute(f"CREATE TABLE {keyspace}.job_table (user_id text, job_id text, schedule text,"
                      " PRIMARY KEY ((user_id), job_id))", timeout=60)
        # When the schema is applied twice
        first = migrate(cassandra)
        second = migrate(cassandra)
        # Then the missing columns were added once, and the second run changed nothing
        assert "ALTER TABLE job_table ADD timeout_s int" in first
        assert "ALTER TABLE job_table ADD trace_parent text" in first
        assert not [s for s in second if s.startswith("ALTER")]
        columns = {row.column_name for row in admin.execute(
            "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s AND table_name = 'job_table'",
            (keyspace,))}
        assert {"timeout_s", "trace_parent", "paused_at", "payload", "version"} <= columns
        tables = {row.table_name for row in admin.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,))}
        assert tables == {"job_table", "task_schedule", "task_history", "job_idempotency"}
    finally:
        admin.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=60)
        admin.cluster.shutdown()
