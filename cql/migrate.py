"""Apply ``cql/`` to a cluster, idempotently: ``python -m cql.migrate``.

Creates the keyspace (replication depends on the environment), then runs every statement of every
``cql/*.cql`` file in name order. Each statement is ``IF NOT EXISTS``, so running it again is a no-op.
On Keyspaces DDL is asynchronous, so after each CREATE TABLE it waits for the table to be ACTIVE; there it also
turns client-side timestamps on for every table of ``cql/`` that has them off (``ALTER TABLE``, in place), since
the stores rely on a write keeping the driver's timestamp when it is sent again.

Then it moves the rows of ``task_schedule`` (an older keyspace's table, whose key lacked the job
version) into ``task_schedule_v2``, each placed anew as of now so that one whose bucket was already
scanned lands in the partition being scanned (see ``domain.placement``), and deletes the moved rows.
Running it again moves nothing twice. Run it once more after the new code is live, for rows an old
writer may have added meanwhile (``docs/deploy.md``).

And it copies the rows of ``task_history`` (whose key lacked the execution id) into ``task_history_v2``,
each only if that execution has no row there yet: a row the new code wrote is newer, never overwritten.
The legacy rows are kept: the history is the record of what ran, the copy can be checked against it,
and dropping the table is the operator's step once it has been (``docs/deploy.md``).

And it copies the jobs of ``job_table`` (one partition per tenant) into ``job_table_v2`` (a tenant's jobs
over ``codec.JOB_SHARDS`` partitions), column for column, with what is left of a deleted job's time to
live. A job is copied if it has no row there yet, or written again if the legacy row is newer (its
``updated_at``): an older release still serving during the deploy writes the legacy table, so running
it once more after the new code is live carries those changes over; a row the new code changed since
is newer and kept. Both writes are conditional, so neither overwrites a change racing them.

Last, it gives the one-time jobs' rows an older release wrote without a time to live their own, so that they
expire as the rows this release writes do (``cql.kept_jobs``; nothing where the stage keeps them).
"""

from __future__ import annotations

import argparse
import re
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from cassandra import ConsistencyLevel
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import SimpleStatement

from cql.kept_jobs import (
    EXPIRE_KEPT_JOB,
    EXPIRE_ROW_MARKER,
    SELECT_KEPT_JOBS,
    expire_kept_one_time_jobs,
    row_expiry,
)
from cql.schema import CQL_DIR, TableSpec, parse_table, statements
from jobrunner.adapters.stores import codec
from jobrunner.adapters.stores.cassandra import CassandraJobStore, unset_nulls
from jobrunner.adapters.stores.expiring import RowExpiry
from jobrunner.adapters.stores.session import connect
from jobrunner.domain.limits import Limits
from jobrunner.domain.placement import placed_anew, placed_in_time

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from cassandra.cluster import Session
    from cassandra.query import PreparedStatement

    from jobrunner.adapters.stores.cassandra_settings import CassandraSettings

LEGACY_SCHEDULE = "task_schedule"
DELETE_LEGACY_SCHEDULED = (
    "DELETE FROM task_schedule WHERE next_execution_time = ? AND segment = ? AND lane = ? AND due_at = ?"
    " AND job_id = ? AND execution_id = ?"
)
SELECT_LEGACY_SCHEDULED = "SELECT * FROM task_schedule"

LEGACY_HISTORY = "task_history"
HISTORY_COLUMNS = ("job_id", "execution_time", "attempt", "execution_id", "user_id", "status", "trigger", "due_at",
                   "published_at", "finished_at", "error")
SELECT_LEGACY_HISTORY = "SELECT * FROM task_history"
SELECT_HISTORY_KEY = (
    "SELECT execution_id FROM task_history_v2 WHERE job_id = ? AND execution_time = ? AND attempt = ?"
    " AND execution_id = ?"
)
#: A lightweight transaction (Keyspaces supports them): a row new code writes meanwhile is never overwritten.
COPY_HISTORY = (
    "INSERT INTO task_history_v2 (job_id, execution_time, attempt, execution_id, user_id, status, trigger, due_at,"
    " published_at, finished_at, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS"
)

LEGACY_JOBS = "job_table"
#: ``job_table_v2``'s columns but its key, in this order in the statements below.
JOB_COLUMNS = ("schedule", "payload", "topic", "state", "version", "schedule_version", "schedule_version_set_at",
               "retry", "timeout_s", "paused_at", "trace_parent", "created_at", "updated_at", "next_run_at",
               "scan_next_run_at", "scan_schedule_version", "last_run_at", "last_execution_id", "last_status",
               "jitter_s", "tags", "policies")
SELECT_LEGACY_JOBS = "SELECT * FROM job_table"
#: What is left of a row's time to live (a job deleted after its last fire expires with its history).
SELECT_LEGACY_JOB_TTL = "SELECT TTL(state) AS ttl FROM job_table WHERE user_id = ? AND job_id = ?"
SELECT_JOB_COPY = "SELECT updated_at FROM job_table_v2 WHERE user_id = ? AND shard = ? AND job_id = ?"
COPY_JOB = (
    f"INSERT INTO job_table_v2 (user_id, shard, job_id, {', '.join(JOB_COLUMNS)})"
    f" VALUES (?, ?, ?, {', '.join('?' for _ in JOB_COLUMNS)}) IF NOT EXISTS USING TTL ?"
)
RECOPY_JOB = (
    f"UPDATE job_table_v2 USING TTL ? SET {', '.join(f'{c} = ?' for c in JOB_COLUMNS)}"
    " WHERE user_id = ? AND shard = ? AND job_id = ? IF updated_at = ?"
)

#: Amazon Keyspaces: a table's own properties, client-side timestamps among them.
SELECT_TABLE_PROPERTIES = (
    "SELECT custom_properties FROM system_schema_mcs.tables WHERE keyspace_name = %s AND table_name = %s"
)
#: Amazon Keyspaces: turns client-side timestamps on, in place (``{table}``: the table's name).
ENABLE_CLIENT_SIDE_TIMESTAMPS = (
    "ALTER TABLE {table} WITH custom_properties = {{'client_side_timestamps': {{'status': 'enabled'}}}}"
)

#: Every statement the migration sends besides ``cql/`` (checked by ``tests/infra/test_keyspaces_compat.py``).
STATEMENTS = (DELETE_LEGACY_SCHEDULED, SELECT_LEGACY_SCHEDULED, SELECT_LEGACY_HISTORY, SELECT_HISTORY_KEY,
              COPY_HISTORY, SELECT_LEGACY_JOBS, SELECT_LEGACY_JOB_TTL, SELECT_JOB_COPY, COPY_JOB, RECOPY_JOB,
              SELECT_TABLE_PROPERTIES, ENABLE_CLIENT_SIDE_TIMESTAMPS, SELECT_KEPT_JOBS, EXPIRE_KEPT_JOB,
              EXPIRE_ROW_MARKER)


def replication_for(mode: str, replication_factor: int = 1, datacenter: str | None = None) -> str:
    """The keyspace's replication: Keyspaces' own; on Cassandra, ``replication_factor`` copies in the named
    datacenter (NetworkTopologyStrategy, what a cluster uses), or SimpleStrategy when none is named."""
    if mode == "keyspaces":
        return "{'class': 'SingleRegionStrategy'}"
    if datacenter:
        return f"{{'class': 'NetworkTopologyStrategy', '{datacenter}': {replication_factor}}}"
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


def _sync_default_ttl(session: Session, settings: CassandraSettings, table: TableSpec) -> list[str]:
    """``CREATE TABLE IF NOT EXISTS`` leaves an older table's options too: give it the file's default TTL
    (a retention added or changed since). It applies to writes from then on, as Cassandra's TTLs do.

    On Keyspaces the stack's CloudFormation owns the tables' options (``infra/constructs/storage.py``
    derives them from the same file), so this is left to it."""
    if settings.mode == "keyspaces":
        return []
    row = session.execute(
        "SELECT default_time_to_live FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (settings.keyspace, table.name),
    ).one()
    wanted = table.default_time_to_live or 0
    if row is None or row.default_time_to_live == wanted:
        return []
    statement = f"ALTER TABLE {table.name} WITH default_time_to_live = {wanted}"
    session.execute(statement, timeout=60)
    return [statement]


def _enable_client_side_timestamps(session: Session, settings: CassandraSettings, table: TableSpec) -> list[str]:
    """On Keyspaces, turn client-side timestamps on for ``table`` where they are off (a table the stack created
    before they were asked for, or one this migration created).

    Without them Keyspaces stamps each write with its own time on arrival, so a write the driver sends again
    (``adapters/stores/session.py``, "Retries") lands as a newer write than one made after its first attempt
    landed; with them, it keeps the driver's timestamp. ``ALTER TABLE`` changes the table in place, rows kept
    (DDL is asynchronous there, hence the wait); it cannot be undone. Cassandra uses the driver's timestamps
    anyway, and has no such property."""
    if settings.mode != "keyspaces":
        return []
    row = session.execute(SELECT_TABLE_PROPERTIES, (settings.keyspace, table.name)).one()
    properties = (row.custom_properties if row is not None else None) or {}
    if str((properties.get("client_side_timestamps") or {}).get("status", "")).lower() == "enabled":
        return []
    statement = ENABLE_CLIENT_SIDE_TIMESTAMPS.format(table=table.name)
    session.execute(statement, timeout=60)
    _wait_active(session, settings.keyspace, table.name)
    return [statement]


def _tables(session: Session, keyspace: str) -> set[str]:
    return {row.table_name for row in session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,))}


def move_legacy_rows(session: Session, keyspace: str, now: datetime | None = None) -> int:
    """Move every row of the legacy ``task_schedule`` table into ``task_schedule_v2``; returns how many.

    A full read of the old table (token-range paging, which Keyspaces supports); each row is written
    to the new table before it is deleted from the old one, so a crash in between leaves a copy, never
    a loss (a copy is the same execution, under the same ``execution_id``). A row is placed as of its write
    (``domain.placement``), and written again if that write returned too late for its scan."""
    if LEGACY_SCHEDULE not in _tables(session, keyspace):
        return 0
    store = CassandraJobStore(session)
    delete = session.prepare(DELETE_LEGACY_SCHEDULED)
    delete.consistency_level = ConsistencyLevel.LOCAL_QUORUM
    read = SimpleStatement(SELECT_LEGACY_SCHEDULED, fetch_size=500, consistency_level=ConsistencyLevel.LOCAL_QUORUM)
    moved = 0
    for row in session.execute(read):
        placed_at = now or datetime.now(UTC)
        moved_row = placed_anew(codec.scheduled_from_row(row), placed_at)
        store.write_scheduled([moved_row])
        while now is None and not placed_in_time([moved_row], placed_at, datetime.now(UTC)):  # too slow: again
            placed_at = datetime.now(UTC)
            moved_row = placed_anew(moved_row, placed_at)
            store.write_scheduled([moved_row])
        session.execute(delete, (row.next_execution_time, row.segment, row.lane, row.due_at, row.job_id,
                                 row.execution_id))
        moved += 1
    return moved


def copy_legacy_history(session: Session, keyspace: str, page_size: int = 500, concurrency: int = 32) -> int:
    """Copy every row of the legacy ``task_history`` table into ``task_history_v2``; returns how many were
    copied (rows already there are left as they are, so running it again copies nothing twice).

    A full read of the old table, page by page; for each page, a point read of each row's key in the new
    table, then for the missing ones an ``INSERT ... IF NOT EXISTS``: a row the new code wrote (in the
    meantime too) is newer and wins. The read spares most re-runs the cost of a lightweight transaction."""
    if LEGACY_HISTORY not in _tables(session, keyspace):
        return 0
    exists = session.prepare(SELECT_HISTORY_KEY)
    exists.consistency_level = ConsistencyLevel.LOCAL_QUORUM
    copy = session.prepare(COPY_HISTORY)  # its serial consistency is the session profile's (none on Keyspaces)
    copy.consistency_level = ConsistencyLevel.LOCAL_QUORUM
    read = SimpleStatement(SELECT_LEGACY_HISTORY, fetch_size=page_size, consistency_level=ConsistencyLevel.LOCAL_QUORUM)
    copied = 0
    page: list[tuple[object, ...]] = []
    for row in session.execute(read):
        values = tuple(getattr(row, column, None) for column in HISTORY_COLUMNS)
        if values[3] is not None:  # an execution id: always written, and part of the new key
            page.append(values)
        if len(page) == page_size:
            copied += _copy_missing(session, exists, copy, page, concurrency)
            page = []
    return copied + _copy_missing(session, exists, copy, page, concurrency)


def _copy_missing(
    session: Session, exists: PreparedStatement, copy: PreparedStatement, rows: Sequence[tuple[object, ...]],
    concurrency: int,
) -> int:
    """Copy those of ``rows`` (in ``HISTORY_COLUMNS`` order) whose key is not in ``task_history_v2``."""
    found = execute_concurrent_with_args(session, exists, [row[:4] for row in rows], concurrency=concurrency,
                                         raise_on_first_error=True)
    missing = [row for row, (_ok, result) in zip(rows, found, strict=True) if result.one() is None]
    unset = [unset_nulls(row) for row in missing]  # an unset value writes nothing, a null a tombstone
    applied = execute_concurrent_with_args(session, copy, unset, concurrency=concurrency, raise_on_first_error=True)
    return sum(1 for _ok, result in applied if result.one().applied)


def copy_legacy_jobs(session: Session, keyspace: str, page_size: int = 500) -> int:
    """Copy every job of the legacy ``job_table`` into ``job_table_v2`` that is not there yet, or whose copy
    is older than it (``updated_at``); returns how many were written (see the module doc)."""
    if LEGACY_JOBS not in _tables(session, keyspace):
        return 0
    prepared: dict[str, PreparedStatement] = {}

    def stmt(cql: str) -> PreparedStatement:  # prepared when first used: an older table may lack `state`
        if cql not in prepared:
            prepared[cql] = session.prepare(cql)
            prepared[cql].consistency_level = ConsistencyLevel.LOCAL_QUORUM  # serial: the session profile's
        return prepared[cql]

    read = SimpleStatement(SELECT_LEGACY_JOBS, fetch_size=page_size, consistency_level=ConsistencyLevel.LOCAL_QUORUM)
    written = 0
    for row in session.execute(read):
        key = codec.job_key(row.user_id, row.job_id)
        values = tuple(getattr(row, column, None) for column in JOB_COLUMNS)  # an older table lacks some
        ttl = 0  # none
        if getattr(row, "state", None) == "DELETED":
            ttl = session.execute(stmt(SELECT_LEGACY_JOB_TTL), (row.user_id, row.job_id)).one().ttl or 0
        copy = session.execute(stmt(SELECT_JOB_COPY), key).one()
        updated_at = getattr(row, "updated_at", None)
        if copy is None:  # unset, not null: an insert of a null writes a tombstone
            result = session.execute(stmt(COPY_JOB), (*key, *unset_nulls(values), ttl)).one()
        elif updated_at is not None and (copy.updated_at is None or updated_at > copy.updated_at):
            result = session.execute(stmt(RECOPY_JOB), (ttl, *values, *key, copy.updated_at)).one()
        else:
            continue
        written += bool(result.applied)
    return written


def migrate(settings: CassandraSettings, directory: Path = CQL_DIR, *, expiry: RowExpiry | None = None) -> list[str]:
    """Apply the schema (tables created, missing columns added, default TTLs set, client-side timestamps on where
    Keyspaces has them off), then carry the data over (module doc); returns the statements run, and a line for
    each data step that wrote rows.

    ``expiry``: the rule one-time jobs' rows are written with (``cql.kept_jobs.row_expiry`` of the stage's
    settings); by default the store's own default (on, ``Limits``' history retention)."""
    session = connect(settings, keyspace=False)
    try:
        session.execute(
            f"CREATE KEYSPACE IF NOT EXISTS {settings.keyspace}"
            f" WITH replication = {replication_for(settings.mode, settings.replication_factor, settings.local_dc)}"
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
            table = parse_table(statement)
            applied += _add_missing_columns(session, settings, table)
            applied += _sync_default_ttl(session, settings, table)
            applied += _enable_client_side_timestamps(session, settings, table)
        moved = move_legacy_rows(session, settings.keyspace)
        if moved:
            applied.append(f"-- moved {moved} row(s) from {LEGACY_SCHEDULE} to task_schedule_v2")
        copied = copy_legacy_history(session, settings.keyspace)
        if copied:
            applied.append(f"-- copied {copied} row(s) from {LEGACY_HISTORY} to task_history_v2")
        jobs = copy_legacy_jobs(session, settings.keyspace)
        if jobs:
            applied.append(f"-- copied {jobs} job(s) from {LEGACY_JOBS} to job_table_v2")
        if expiry is None:
            expiry = RowExpiry(lambda _tenant: Limits().history_ttl_s, on=True, now=lambda: datetime.now(UTC))
        expiring = expire_kept_one_time_jobs(session, expiry)
        if expiring:
            applied.append(f"-- gave {expiring} one-time job(s) of job_table_v2 their time to live")
        return applied
    finally:
        session.cluster.shutdown()


def main() -> None:
    from jobrunner.config import Settings

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keyspace", default=Settings.from_env().keyspace)
    args = parser.parse_args()
    stage = Settings.from_env().replace(keyspace=args.keyspace)
    settings = stage.cassandra
    applied = migrate(settings, expiry=row_expiry(stage))
    print(f"schema applied to keyspace {settings.keyspace}: {len(applied)} statement(s)")
    for done in (line for line in applied if line.startswith("-- ")):  # the rows moved, copied or given a TTL
        print(done[3:])


if __name__ == "__main__":
    main()
