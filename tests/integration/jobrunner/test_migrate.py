"""Migrations on real Cassandra: idempotent, an older table gains the columns cql/ added since, and the rows
of a table whose key changed are carried over to its successor without losing one."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cql.migrate import copy_legacy_history, migrate
from cql.schema import statements
from jobrunner.adapters.stores import codec
from jobrunner.adapters.stores.calendars import CassandraCalendarStore
from jobrunner.adapters.stores.cassandra import CassandraJobStore
from jobrunner.adapters.stores.session import connect
from jobrunner.domain.calendars import calendar_from_dict
from jobrunner.domain.jobs import (
    RUN_RECORDS,
    ExecutionRecord,
    ExecutionStatus,
    Job,
    Lane,
    ScheduledExecution,
    Trigger,
    execution_id_for,
    with_runs,
)
from jobrunner.domain.placement import LATE_LEAD
from jobrunner.domain.schedules import Every
from jobrunner.domain.spec import JobSpec
from jobrunner.domain.time import minute_bucket, utc
from jobrunner.ports import Completion, IdempotencyClaim, Outcome

if TYPE_CHECKING:
    from collections.abc import Iterator

    from jobrunner.adapters.stores.cassandra_settings import CassandraSettings
    from jobrunner.config import Settings

pytestmark = pytest.mark.integration

CQL = Path(__file__).resolve().parents[3] / "cql" / "001_tables.cql"


@dataclass(frozen=True)
class Older:
    """A throw-away keyspace (created empty, dropped after the test) and an admin session outside it."""

    keyspace: str
    cassandra: CassandraSettings
    admin: Any


@pytest.fixture
def older(settings: Settings) -> Iterator[Older]:
    keyspace = f"jr_migrate_{uuid.uuid4().hex[:8]}"
    cassandra = replace(settings.cassandra, keyspace=keyspace)
    admin = connect(cassandra, keyspace=False)
    admin.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}", timeout=60)
    try:
        yield Older(keyspace, cassandra, admin)
    finally:
        admin.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=60)
        admin.cluster.shutdown()


def test_migrate_is_idempotent_and_adds_missing_columns(older: Older) -> None:
    keyspace, cassandra, admin = older.keyspace, older.cassandra, older.admin
    # Given a keyspace whose job_table_v2 predates the timeout_s and trace_parent columns
    admin.execute(f"CREATE TABLE {keyspace}.job_table_v2 (user_id text, shard int, job_id text, schedule text,"
                  " PRIMARY KEY ((user_id, shard), job_id))", timeout=60)
    # When the schema is applied twice
    first = migrate(cassandra)
    second = migrate(cassandra)
    # Then the missing columns were added once, and the second run changed nothing
    assert "ALTER TABLE job_table_v2 ADD timeout_s int" in first
    assert "ALTER TABLE job_table_v2 ADD trace_parent text" in first
    assert "ALTER TABLE job_table_v2 ADD jitter_s int" in first and "ALTER TABLE job_table_v2 ADD tags text" in first
    assert "ALTER TABLE job_table_v2 ADD policies text" in first
    assert not [s for s in second if s.startswith("ALTER")]
    columns = {row.column_name for row in admin.execute(
        "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s AND table_name = 'job_table_v2'",
        (keyspace,))}
    assert {"timeout_s", "trace_parent", "paused_at", "payload", "version", "jitter_s", "tags", "policies"} <= columns
    tables = {row.table_name for row in admin.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,))}
    assert tables == {"job_table_v2", "task_schedule_v2", "task_history_v2", "job_idempotency", "job_changes",
                      "calendars"}


def unsharded(schema: str) -> str:
    """``cql/``'s text as the releases before the sharded job table had it: one ``job_table`` partition per
    tenant, the same columns."""
    sharded = ("CREATE TABLE IF NOT EXISTS job_table_v2 (", "    shard int,\n",
               "PRIMARY KEY ((user_id, shard), job_id)")
    legacy = ("CREATE TABLE IF NOT EXISTS job_table (", "", "PRIMARY KEY ((user_id), job_id)")
    for new, old in zip(sharded, legacy, strict=True):
        assert new in schema
        schema = schema.replace(new, old, 1)
    return schema


def create_previous_release(admin: Any, keyspace: str, schema: str | None = None) -> None:
    for statement in statements(unsharded(schema if schema is not None else CQL.read_text())):
        admin.execute(statement.replace("IF NOT EXISTS ", f"IF NOT EXISTS {keyspace}.", 1), timeout=60)


def test_a_tenants_jobs_are_copied_to_the_sharded_table_and_an_older_releases_later_change_too(
    older: Older,
) -> None:
    keyspace, cassandra, admin = older.keyspace, older.cassandra, older.admin
    # Given the release before the sharded job table, and 40 jobs of one tenant and one of another there,
    # one of them deleted after its last fire (its row expires)
    create_previous_release(admin, keyspace)
    bucket = datetime(2026, 11, 22, 10, 5, tzinfo=UTC)
    insert = (f"INSERT INTO {keyspace}.job_table (user_id, job_id, schedule, payload, topic, state, version,"
              " schedule_version, schedule_version_set_at, created_at, updated_at, next_run_at, tags)"
              " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)")
    every = '{"every":"PT1M","start":"2026-11-22T10:05:00.000Z"}'
    for n in range(40):
        admin.execute(insert, ("alice", f"job-{n:02}", every, f'{{"n":{n}}}', "jobs", "ACTIVE", 1, 1, 1, bucket,
                               bucket, bucket, '{"team":"a"}'))
    admin.execute(insert, ("bob", "job-b", every, "{}", "jobs", "ACTIVE", 1, 1, 1, bucket, bucket, bucket, None))
    admin.execute(insert.replace("%s)", "%s) USING TTL 3600"),
                  ("alice", "job-gone", every, "{}", "jobs", "DELETED", 2, 2, 2, bucket, bucket, None, None))
    # When the schema is applied
    applied = migrate(cassandra)
    # Then every job is copied once, spread over the tenant's shards, and reads as before
    assert "-- copied 42 job(s) from job_table to job_table_v2" in applied
    session = connect(cassandra)
    store = CassandraJobStore(session)
    jobs, cursor = store.list_jobs("alice", 100, None)
    assert cursor is None
    assert [(j.job_id, j.spec.payload, j.spec.tags) for j in jobs if j.job_id != "job-gone"] == [
        (f"job-{n:02}", {"n": n}, {"team": "a"}) for n in range(40)]
    shards = {row.shard for row in session.execute("SELECT shard FROM job_table_v2")}
    assert len(shards) > 8
    ttl = session.execute("SELECT TTL(state) AS ttl FROM job_table_v2 WHERE user_id = 'alice' AND shard = %s"
                          " AND job_id = 'job-gone'", (codec.job_shard("job-gone"),)).one().ttl
    assert ttl is not None and 0 < ttl <= 3600
    assert [j.job_id for j in store.list_jobs("bob", 10, None)[0]] == ["job-b"]
    # and when the older release, still serving during the deploy, changes a job (its way: the version is
    # the schedule version) and this release changes another, a second run carries the first over and
    # leaves the second as this release wrote it
    later = bucket + timedelta(minutes=1)
    admin.execute(f"UPDATE {keyspace}.job_table SET payload = %s, version = 2, next_run_at = %s, updated_at = %s"
                  " WHERE user_id = %s AND job_id = %s", ('{"n":"older"}', later, later, "alice", "job-01"))
    job_02 = store.get_job("alice", "job-02")
    assert job_02 is not None
    assert store.update_job(job_02.with_changes(payload={"n": "newer"}, version=2, updated_at=later), [],
                            expected_version=1)
    again = migrate(cassandra)
    assert "-- copied 1 job(s) from job_table to job_table_v2" in again
    changed, kept = store.get_job("alice", "job-01"), store.get_job("alice", "job-02")
    assert changed is not None and kept is not None
    assert (changed.spec.payload, changed.version, changed.schedule_version, changed.next_run_at) == (
        {"n": "older"}, 2, 2, later)
    assert kept.spec.payload == {"n": "newer"}
    # and a third run writes nothing
    assert not [s for s in migrate(cassandra) if s.startswith("-- copied")]
    session.cluster.shutdown()


LEGACY_TABLE = """CREATE TABLE {keyspace}.task_schedule (
    next_execution_time timestamp, segment int, lane text, due_at timestamp, job_id text, execution_id text,
    user_id text, scheduled_at timestamp, attempt int, job_version int, trigger text,
    PRIMARY KEY ((next_execution_time, segment), lane, due_at, job_id, execution_id))"""


def test_migrate_moves_the_rows_of_the_legacy_schedule_table_without_losing_one(older: Older) -> None:
    keyspace, cassandra, admin = older.keyspace, older.cassandra, older.admin
    now = datetime.now(UTC)
    future = minute_bucket(now) + timedelta(hours=2)
    past = minute_bucket(now) - timedelta(minutes=10)  # a bucket whose scan has long finished
    # Given an older keyspace whose task_schedule (no version in its key) holds a future and an overdue row
    admin.execute(LEGACY_TABLE.format(keyspace=keyspace), timeout=60)
    insert = (f"INSERT INTO {keyspace}.task_schedule (next_execution_time, segment, lane, due_at, job_id,"
              " execution_id, user_id, scheduled_at, attempt, job_version, trigger)"
              " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)")
    for due in (future + timedelta(seconds=7), past + timedelta(seconds=3)):
        admin.execute(insert, (minute_bucket(due), 2, "P", due, f"job-{due.minute}", f"exec-{due.minute}",
                               "alice", due, 1, 3, "SCHEDULE"))
    # When the schema is applied (twice)
    migrate(cassandra)
    assert not [s for s in migrate(cassandra) if s.startswith("-- moved")]
    # Then both rows are in task_schedule_v2 under their version: the future one in its own bucket,
    # the overdue one in a bucket still to be scanned; and the legacy table is empty
    rows = {r.execution_id: r for r in admin.execute(f"SELECT * FROM {keyspace}.task_schedule_v2")}
    assert set(rows) == {f"exec-{future.minute}", f"exec-{past.minute}"}
    moved_future, moved_past = rows[f"exec-{future.minute}"], rows[f"exec-{past.minute}"]
    assert (utc(moved_future.next_execution_time), moved_future.lane, moved_future.job_version) == (future, "P", 3)
    assert utc(moved_past.next_execution_time) >= minute_bucket(now) and moved_past.lane == "L"
    # (keyed no earlier than the late lane's lead after it was moved, at the instant of its fire)
    assert utc(moved_past.scheduled_at) == past + timedelta(seconds=3)
    assert utc(moved_past.due_at) >= now + LATE_LEAD
    assert list(admin.execute(f"SELECT * FROM {keyspace}.task_schedule")) == []


LEGACY_HISTORY = """CREATE TABLE {keyspace}.task_history (
    job_id text, execution_time timestamp, attempt int, execution_id text, user_id text, status text,
    trigger text, due_at timestamp, published_at timestamp, finished_at timestamp, error text,
    PRIMARY KEY ((job_id), execution_time, attempt)) WITH CLUSTERING ORDER BY (execution_time DESC, attempt DESC)"""


def legacy_record(job_id: str, at: datetime, status: ExecutionStatus, error: str | None = None) -> ExecutionRecord:
    return ExecutionRecord(
        job_id=job_id, scheduled_at=at, attempt=1, execution_id=execution_id_for(job_id, at, 1, Trigger.SCHEDULE),
        user_id="alice", status=status, trigger=Trigger.SCHEDULE, due_at=at, published_at=at + timedelta(seconds=1),
        finished_at=None if status is ExecutionStatus.RUNNING else at + timedelta(seconds=2), error=error,
    )


def test_migrate_copies_the_legacy_history_never_over_a_newer_row(older: Older) -> None:
    keyspace, cassandra, admin = older.keyspace, older.cassandra, older.admin
    fire = datetime(2026, 11, 22, 10, 5, tzinfo=UTC)
    in_flight = legacy_record("job-a", fire, ExecutionStatus.RUNNING)  # its result is still to come
    failed = legacy_record("job-a", fire - timedelta(hours=1), ExecutionStatus.FAILED, "exit 3")
    others = [legacy_record(f"job-{n}", fire, ExecutionStatus.SUCCESS) for n in range(7)]
    insert = ("INSERT INTO {keyspace}.task_history (job_id, execution_time, attempt, execution_id, user_id, status,"
              " trigger, due_at, published_at, finished_at, error) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)")

    def write_legacy(record: ExecutionRecord) -> None:
        status = None if record.status is ExecutionStatus.RUNNING else record.status.value  # RUNNING: no status
        admin.execute(insert.format(keyspace=keyspace), (
            record.job_id, record.scheduled_at, record.attempt, record.execution_id, record.user_id, status,
            record.trigger.value, record.due_at, record.published_at, record.finished_at, record.error))

    # Given an older keyspace whose task_history (no execution id in its key) holds finished records and
    # one of an execution in flight
    admin.execute(LEGACY_HISTORY.format(keyspace=keyspace), timeout=60)
    for record in (in_flight, failed, *others):
        write_legacy(record)
    # When the schema is applied
    first = migrate(cassandra)
    # Then every record is in task_history_v2, whole, found by its key (the in-flight one's result finds it)
    assert f"-- copied {2 + len(others)} row(s) from task_history to task_history_v2" in first
    session = connect(cassandra)
    store = CassandraJobStore(session)
    for record in (in_flight, failed, *others):
        assert store.get_record(record.job_id, record.scheduled_at, 1, record.execution_id) == record
    assert store.history_page("job-a", 10) == [in_flight, failed]
    # and a copy paging 2 rows at a time finds every one of them already there
    assert copy_legacy_history(session, keyspace, page_size=2) == 0
    # Given the new code then finishes the in-flight execution, and an old writer adds a legacy record
    succeeded = replace(in_flight, status=ExecutionStatus.SUCCESS, finished_at=fire + timedelta(seconds=9))
    store.write_outcomes([Outcome(succeeded, None)])
    late = legacy_record("job-a", fire + timedelta(minutes=1), ExecutionStatus.RUNNING)
    write_legacy(late)
    # When the migration runs again (paging 2 rows at a time)
    copied = copy_legacy_history(session, keyspace, page_size=2)
    # Then only the new legacy record is copied: the newer row in task_history_v2 is left as it is
    assert copied == 1
    assert store.history_page("job-a", 10) == [late, succeeded, failed]
    # and a full run copies nothing more; the legacy rows are kept, for the operator to drop with their table
    assert not [s for s in migrate(cassandra) if s.startswith("-- copied")]
    assert len(list(admin.execute(f"SELECT * FROM {keyspace}.task_history"))) == 3 + len(others)
    session.cluster.shutdown()


LEGACY_JOBS = """CREATE TABLE {keyspace}.job_table (
    user_id text, job_id text, schedule text, payload text, topic text, state text, version int, retry text,
    timeout_s int, paused_at timestamp, trace_parent text, created_at timestamp, updated_at timestamp,
    next_run_at timestamp, last_run_at timestamp, last_execution_id text, last_status text,
    PRIMARY KEY ((user_id), job_id))"""


def test_a_job_stored_before_the_schedule_version_reads_as_before_and_keeps_firing(older: Older) -> None:
    keyspace, cassandra, admin = older.keyspace, older.cassandra, older.admin
    bucket = datetime(2026, 11, 22, 10, 5, tzinfo=UTC)
    # Given an older keyspace with a job at version 4 (its rows planned under 4) and no schedule version
    admin.execute(LEGACY_JOBS.format(keyspace=keyspace), timeout=60)
    admin.execute(
        f"INSERT INTO {keyspace}.job_table (user_id, job_id, schedule, payload, topic, state, version, retry,"
        " created_at, updated_at, next_run_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        ("alice", "job-1", '{"every":"PT1M","start":"2026-11-22T10:05:00.000Z"}', '{"n":1}', "jobs",
         "ACTIVE", 4, None, bucket, bucket, bucket))
    # When the schema is applied
    applied = migrate(cassandra)
    # Then the job is copied, and reads as before, with its version as its schedule version
    assert "-- copied 1 job(s) from job_table to job_table_v2" in applied
    session = connect(cassandra)
    store = CassandraJobStore(session)
    job = store.get_job("alice", "job-1")
    assert job is not None
    assert (job.version, job.schedule_version, job.next_run_at) == (4, 4, bucket)
    # and a scan's publish of its fire (planned under 4) makes the fire after it its next run
    row = ScheduledExecution(
        bucket=bucket, segment=0, lane=Lane.PLANNED, due_at=bucket, job_id="job-1",
        execution_id=execution_id_for("job-1", bucket, 1, Trigger.SCHEDULE), user_id="alice",
        scheduled_at=bucket, attempt=1, job_version=4, trigger=Trigger.SCHEDULE)
    store.write_started([ExecutionRecord(
        job_id="job-1", scheduled_at=bucket, attempt=1, execution_id=row.execution_id, user_id="alice",
        status=ExecutionStatus.RUNNING, trigger=Trigger.SCHEDULE, due_at=bucket, published_at=bucket,
        job_version=4, next_fire_at=bucket + timedelta(minutes=1))])
    store.settle_published([Completion(done=row, following=None)])
    job = store.get_job("alice", "job-1")
    assert job is not None
    job = with_runs(job, store.latest_records(["job-1"], RUN_RECORDS)["job-1"])
    assert job.next_run_at == bucket + timedelta(minutes=1)
    session.cluster.shutdown()


def test_a_job_changed_by_code_older_than_the_schedule_version_keeps_firing(
    settings: Settings, cassandra_session: Any
) -> None:
    # Given a job written with a schedule version (1), then changed by a release older than that column
    # during a rolling deploy or after a rollback (its row then copied as it was, as ``migrate`` does): its
    # payload PATCH bumped the version to 2, wrote next_run_at and re-planned the next run under version 2,
    # as that code did for every change
    store = CassandraJobStore(cassandra_session)
    bucket = datetime(2026, 11, 22, 10, 5, tzinfo=UTC)
    job = Job(user_id="alice", job_id=str(uuid.uuid4()),
              spec=JobSpec(schedule=Every(timedelta(minutes=1), start=bucket), payload={"n": 1}, topic="jobs"),
              created_at=bucket, updated_at=bucket)
    store.create_job(job, None)
    cassandra_session.execute(
        "UPDATE job_table_v2 SET payload = %s, version = 2, next_run_at = %s WHERE user_id = %s AND shard = %s"
        " AND job_id = %s",
        ('{"n":2}', bucket + timedelta(minutes=1), "alice", codec.job_shard(job.job_id), job.job_id))
    # When this code reads it
    stored = store.get_job("alice", job.job_id)
    # Then its schedule version is its version, so the older code's row (planned under 2) is the job's
    assert stored is not None
    assert (stored.version, stored.schedule_version, stored.next_run_at) == (2, 2, bucket + timedelta(minutes=1))


def test_history_and_idempotency_keys_expire_and_an_older_table_gains_the_retention(older: Older) -> None:
    keyspace, cassandra, admin = older.keyspace, older.cassandra, older.admin
    # Given a keyspace whose history and idempotency tables were created without a retention
    admin.execute(f"CREATE TABLE {keyspace}.task_history_v2 (job_id text, execution_time timestamp, attempt int,"
                  " execution_id text, PRIMARY KEY ((job_id), execution_time, attempt, execution_id))"
                  " WITH CLUSTERING ORDER BY (execution_time DESC, attempt DESC, execution_id ASC)", timeout=60)
    admin.execute(f"CREATE TABLE {keyspace}.job_idempotency (user_id text, idempotency_key text,"
                  " PRIMARY KEY ((user_id, idempotency_key)))", timeout=60)
    # When the schema is applied (twice)
    first = migrate(cassandra)
    second = migrate(cassandra)
    # Then both tables got the file's default TTL once: 30 days of history, keys kept 24 hours
    assert "ALTER TABLE task_history_v2 WITH default_time_to_live = 2592000" in first
    assert "ALTER TABLE job_idempotency WITH default_time_to_live = 86400" in first
    assert not [s for s in second if s.startswith("ALTER")]
    # and what the store writes there expires: a record and a key carry the TTL (seconds left)
    session = connect(cassandra)
    store = CassandraJobStore(session)
    fire = datetime.now(UTC).replace(microsecond=0)
    record = ExecutionRecord(
        job_id="job-1", scheduled_at=fire, attempt=1,
        execution_id=execution_id_for("job-1", fire, 1, Trigger.SCHEDULE), user_id="alice",
        status=ExecutionStatus.RUNNING, trigger=Trigger.SCHEDULE, due_at=fire, published_at=fire)
    store.write_started([record])
    store.claim_idempotency_key(IdempotencyClaim("alice", "key-1", "job-1", "fp", fire))
    [history_ttl] = session.execute("SELECT TTL(published_at) FROM task_history_v2 WHERE job_id = 'job-1'").one()
    [key_ttl] = session.execute(
        "SELECT TTL(job_id) FROM job_idempotency WHERE user_id = 'alice' AND idempotency_key = 'key-1'").one()
    assert 2592000 - 60 < history_ttl <= 2592000
    assert 86400 - 60 < key_ttl <= 86400
    session.cluster.shutdown()


LEGACY_HISTORY_V2 = """CREATE TABLE {keyspace}.task_history_v2 (
    job_id text, execution_time timestamp, attempt int, execution_id text, user_id text, status text,
    trigger text, due_at timestamp, published_at timestamp, finished_at timestamp, error text,
    PRIMARY KEY ((job_id), execution_time, attempt, execution_id))
    WITH CLUSTERING ORDER BY (execution_time DESC, attempt DESC, execution_id ASC)"""


def test_history_written_before_the_run_columns_reads_as_runs_and_the_job_keeps_its_next_run(
    older: Older,
) -> None:
    keyspace, cassandra, admin = older.keyspace, older.cassandra, older.admin
    bucket = datetime(2026, 11, 22, 10, 5, tzinfo=UTC)
    # Given an older keyspace: a job whose scan wrote its run fields on the job row (next run 10:06),
    # and the record of its 10:05 fire, without the columns the run fields are now derived from
    admin.execute(LEGACY_HISTORY_V2.format(keyspace=keyspace), timeout=60)
    execution_id = execution_id_for("job-1", bucket, 1, Trigger.SCHEDULE)
    admin.execute(
        f"INSERT INTO {keyspace}.task_history_v2 (job_id, execution_time, attempt, execution_id, user_id, status,"
        " trigger, due_at, published_at, finished_at) VALUES (%s, %s, 1, %s, 'alice', 'SUCCESS', 'SCHEDULE',"
        " %s, %s, %s)", ("job-1", bucket, execution_id, bucket, bucket, bucket + timedelta(seconds=2)))
    # When the schema is applied
    applied = migrate(cassandra)
    # Then the history table gains the columns, and its record reads as it was
    for column in ("job_version int", "next_fire_at timestamp", "retry_at timestamp"):
        assert f"ALTER TABLE task_history_v2 ADD {column}" in applied
    session = connect(cassandra)
    store = CassandraJobStore(session)
    job = Job(user_id="alice", job_id="job-1",
              spec=JobSpec(schedule=Every(timedelta(minutes=1), start=bucket), payload={}, topic="jobs"),
              created_at=bucket, updated_at=bucket, next_run_at=bucket + timedelta(minutes=1))
    store.create_job(job, None)
    [record] = store.latest_records(["job-1"], RUN_RECORDS)["job-1"]
    assert (record.status, record.job_version, record.next_fire_at) == (ExecutionStatus.SUCCESS, None, None)
    # and the job shows it as its last run, keeping the next run its row holds
    shown = with_runs(job, [record])
    assert (shown.last_execution_id, shown.last_status, shown.next_run_at) == (
        execution_id, ExecutionStatus.SUCCESS, bucket + timedelta(minutes=1))
    session.cluster.shutdown()


def test_a_keyspace_of_the_release_before_calendars_gains_them_and_keeps_every_job(older: Older) -> None:
    keyspace, cassandra, admin = older.keyspace, older.cassandra, older.admin
    # Given a keyspace as the release before calendars left it (job_table without `policies`, no
    # `calendars` table), holding jobs written by that release
    previous = CQL.read_text().replace("    policies text,\n", "")
    create_previous_release(admin, keyspace, previous[:previous.index("CREATE TABLE IF NOT EXISTS calendars")])
    bucket = datetime(2026, 11, 22, 10, 5, tzinfo=UTC)
    for n in range(3):
        admin.execute(
            f"INSERT INTO {keyspace}.job_table (user_id, job_id, schedule, payload, topic, state, version,"
            " schedule_version, schedule_version_set_at, created_at, updated_at, next_run_at, tags)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            ("alice", f"job-{n}", '{"every":"PT1M","start":"2026-11-22T10:05:00.000Z"}', '{"n":1}', "jobs",
             "ACTIVE", 2, 2, 2, bucket, bucket, bucket, '{"team":"a"}'))
    # When the schema is applied
    applied = migrate(cassandra)
    # Then the table is added, and every job is copied and reads as before, naming no calendar
    assert "-- copied 3 job(s) from job_table to job_table_v2" in applied
    assert any(s.startswith("CREATE TABLE IF NOT EXISTS calendars") for s in applied)
    session = connect(cassandra)
    store = CassandraJobStore(session)
    jobs, _ = store.list_jobs("alice", 10, None)
    assert [(j.job_id, j.version, j.spec.tags, j.spec.calendar) for j in jobs] == [
        (f"job-{n}", 2, {"team": "a"}, None) for n in range(3)]
    # and a calendar can be stored, and a job changed to name it keeps it
    calendars = CassandraCalendarStore(session)
    calendars.put(calendar_from_dict("alice", "holidays", {"exclude": [{"date": "2026-12-25"}]}))
    assert calendars.get("alice", "holidays") is not None
    named = jobs[0].with_changes(version=3, calendar="holidays", updated_at=bucket + timedelta(seconds=1))
    assert store.update_job(named, [], expected_version=2)
    stored = store.get_job("alice", "job-0")
    assert stored is not None and stored.spec.calendar == "holidays"
    session.cluster.shutdown()


def test_a_named_datacenter_gets_the_keyspace_at_its_replication_factor(settings: Settings) -> None:
    # Given a keyspace not created yet, for a cluster whose datacenter is named (the single node's own one,
    # since a keyspace may not ask for more replicas than a datacenter has nodes to write to)
    keyspace = f"jr_migrate_{uuid.uuid4().hex[:8]}"
    cassandra = replace(settings.cassandra, keyspace=keyspace, local_dc="datacenter1", replication_factor=1)
    admin = connect(cassandra, keyspace=False)
    try:
        # When the schema is applied
        migrate(cassandra)
        # Then the keyspace is replicated per datacenter, with the factor asked for
        row = admin.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
                            (keyspace,)).one()
        assert dict(row.replication) == {"class": "org.apache.cassandra.locator.NetworkTopologyStrategy",
                                         "datacenter1": "1"}
    finally:
        admin.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=60)
        admin.cluster.shutdown()
