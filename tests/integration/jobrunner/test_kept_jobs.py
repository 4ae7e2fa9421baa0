"""The migration's step for one-time jobs' rows an older release wrote without a time to live (``cql.kept_jobs``),
on real Cassandra: rows as that release wrote them (``INSERT_JOB``: no time to live, a row marker) get the time to
live this release writes them with, whole, key included; nothing else is touched, twice nothing, and a change
racing the step wins."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from cql.kept_jobs import (
    KEPT_COLUMNS,
    SELECT_KEPT_JOBS,
    expire_kept_one_time_jobs,
    kept_job,
    rewrite_kept_jobs,
)
from cql.migrate import migrate
from jobrunner.adapters.stores import codec
from jobrunner.adapters.stores.cassandra import INSERT_JOB, CassandraJobStore
from jobrunner.adapters.stores.expiring import RowExpiry
from jobrunner.adapters.stores.session import connect
from jobrunner.domain.expiry import row_expires_at, ttl_seconds
from jobrunner.domain.jobs import Job, JobState
from jobrunner.domain.schedules import At, Every
from jobrunner.domain.spec import JobSpec

if TYPE_CHECKING:
    from collections.abc import Iterator

    from jobrunner.adapters.stores.cassandra_settings import CassandraSettings
    from jobrunner.config import Settings

pytestmark = pytest.mark.integration

HISTORY_S = 2 * 86_400
#: The expiry rule of a stage that lets rows expire (``one_time_rows_expire``), and of one that keeps them.
EXPIRING = RowExpiry(lambda _tenant: HISTORY_S, on=True, now=lambda: datetime.now(UTC))
KEPT = RowExpiry(lambda _tenant: HISTORY_S, on=False, now=lambda: datetime.now(UTC))


@pytest.fixture
def cassandra(settings: Settings) -> CassandraSettings:
    """A throw-away keyspace with the schema applied: the step walks the whole job table, which must hold this
    test's rows only."""
    cassandra = replace(settings.cassandra, keyspace=f"jr_kept_{uuid.uuid4().hex[:8]}")
    migrate(cassandra, expiry=KEPT)
    return cassandra


@pytest.fixture
def session(cassandra: CassandraSettings) -> Iterator[Any]:
    """A session on ``cassandra``'s keyspace, dropped after the test."""
    session = connect(cassandra)
    try:
        yield session
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {cassandra.keyspace}", timeout=60)
        session.cluster.shutdown()


def job(job_id: str, schedule: At | Every, at: datetime, **changes: Any) -> Job:
    return Job(user_id="alice", job_id=job_id, spec=JobSpec(schedule=schedule, payload={"id": job_id}, topic="jobs"),
               created_at=at, updated_at=at, **changes)


def written_by_the_older_release(session: Any, *jobs: Job) -> None:
    """Each job as the release before expiring rows wrote it: ``INSERT_JOB``, no time to live."""
    insert = session.prepare(INSERT_JOB)
    for one in jobs:
        session.execute(insert, codec.job_values(one))


def cell_ttls(session: Any, one: Job) -> dict[str, int | None] | None:
    """The time to live of each cell of ``one``'s row that holds a value; None when there is no row."""
    columns = ", ".join(f"{c}, TTL({c}) AS ttl_{c}" for c in KEPT_COLUMNS)
    row = session.execute(f"SELECT {columns} FROM job_table_v2 WHERE user_id = %s AND shard = %s AND job_id = %s",
                          codec.job_key(one.user_id, one.job_id)).one()
    if row is None:
        return None
    return {c: getattr(row, f"ttl_{c}") for c in KEPT_COLUMNS if getattr(row, c) is not None}


def ttls_of(session: Any, one: Job) -> dict[str, int | None]:
    """``cell_ttls`` of a row that must be there."""
    ttls = cell_ttls(session, one)
    assert ttls is not None, f"{one.job_id}: no row"
    return ttls


def keys(session: Any, one: Job) -> list[Any]:
    return list(session.execute("SELECT user_id FROM job_table_v2 WHERE user_id = %s AND shard = %s AND job_id = %s",
                                codec.job_key(one.user_id, one.job_id)))


def test_an_older_releases_one_time_jobs_get_their_time_to_live_and_nothing_else_is_touched(
    cassandra: CassandraSettings, session: Any,
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    # Given jobs written by the release before rows expired: a one-time job due in an hour, a recurring one,
    # a paused one-time one
    due = job("one-time", At(now + timedelta(hours=1)), now)
    recurring = job("recurring", Every(timedelta(minutes=1), start=now), now)
    paused = job("paused", At(now + timedelta(hours=1)), now, state=JobState.PAUSED, paused_at=now)
    written_by_the_older_release(session, due, recurring, paused)
    assert set(ttls_of(session, due).values()) == {None}
    # When the migration runs
    applied = migrate(cassandra, expiry=EXPIRING)
    # Then the one-time job's cells all carry the time to live this release writes it with (its instant),
    # and it reads as it did
    assert "-- gave 1 one-time job(s) of job_table_v2 their time to live" in applied
    expires_at = row_expires_at(due, timedelta(seconds=HISTORY_S))
    expected = ttl_seconds(expires_at, datetime.now(UTC))
    ttls = ttls_of(session, due)
    assert {"schedule", "payload", "state", "version", "created_at", "updated_at"} <= set(ttls)
    assert all(ttl is not None and expected - 60 <= ttl <= expected + 2 for ttl in ttls.values()), ttls
    store = CassandraJobStore(session)
    assert store.get_job("alice", "one-time") == due
    # and the recurring and the paused jobs are untouched (no time to live)
    assert set(ttls_of(session, recurring).values()) == {None}
    assert set(ttls_of(session, paused).values()) == {None}
    # and a second run rewrites nothing
    assert not [s for s in migrate(cassandra, expiry=EXPIRING) if s.startswith("-- gave")]
    assert expire_kept_one_time_jobs(session, EXPIRING, page_size=1) == 0


def test_a_change_racing_the_step_wins_and_the_row_is_skipped(session: Any) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    # Given a one-time job written by the older release, read by the step
    due = job("raced", At(now + timedelta(hours=1)), now)
    written_by_the_older_release(session, due)
    row = session.execute(SELECT_KEPT_JOBS + " WHERE user_id = %s AND shard = %s AND job_id = %s",
                          codec.job_key("alice", "raced")).one()
    read = kept_job(row, EXPIRING)
    assert read is not None and read.version == 1
    # When this release changes it before the step writes (its at moved a day later), then the step writes
    store = CassandraJobStore(session, history_ttl_s=lambda _tenant: HISTORY_S)
    changed = due.with_changes(schedule=At(now + timedelta(days=1)), version=2, updated_at=now)
    assert store.update_job(changed, [], expected_version=1)
    # Then the step's compare-and-set does not land: the change is kept, with its own time to live
    assert rewrite_kept_jobs(session, [read]) == 0
    stored = store.get_job("alice", "raced")
    assert stored is not None and (stored.version, stored.spec.schedule) == (2, At(now + timedelta(days=1)))
    expected = ttl_seconds(row_expires_at(changed, timedelta(seconds=HISTORY_S)), datetime.now(UTC))
    assert all(ttl is not None and expected - 60 <= ttl <= expected + 2 for ttl in ttls_of(session, changed).values())
    # and the step finds nothing left to do
    assert expire_kept_one_time_jobs(session, EXPIRING) == 0


def test_a_job_past_its_instant_goes_at_once_key_and_all(session: Any) -> None:
    long_ago = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
    # Given two one-time jobs of the older release whose instants passed long ago, one of them copied from
    # job_table with the scan's columns of a release before that
    gone = job("gone", At(long_ago), long_ago)
    copied = job("copied", At(long_ago), long_ago)
    written_by_the_older_release(session, gone, copied)
    session.execute("UPDATE job_table_v2 SET scan_next_run_at = %s, scan_schedule_version = 1 WHERE user_id = %s"
                    " AND shard = %s AND job_id = %s", (long_ago, *codec.job_key("alice", "copied")))
    # and, for contrast, one rewritten by this release's own compare-and-set, which writes no row marker
    store = CassandraJobStore(session, history_ttl_s=lambda _tenant: HISTORY_S)
    changed = job("changed", At(long_ago), long_ago)
    written_by_the_older_release(session, changed)
    assert store.update_job(changed.with_changes(version=2), [], expected_version=1)
    # When the step runs
    started = time.monotonic()
    assert expire_kept_one_time_jobs(session, EXPIRING) == 2
    # Then their rows carry the shortest time to live (or, where more than that second has passed since the step
    # began, on a loaded machine, are already gone), and once it has passed they read as no job
    ttls = cell_ttls(session, gone)
    if ttls is None:
        assert time.monotonic() - started > 1, "the row went before its time to live could have passed"
    else:
        assert set(ttls.values()) <= {1}
    time.sleep(2.5)
    assert store.get_job("alice", "gone") is None and store.get_job("alice", "copied") is None
    # and no key is left of them (their markers went too), where this release's own rewrite leaves its key
    assert keys(session, gone) == [] and keys(session, copied) == []
    assert store.get_job("alice", "changed") is None and len(keys(session, changed)) == 1


def test_nothing_is_rewritten_where_the_stage_keeps_one_time_jobs(cassandra: CassandraSettings, session: Any) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    # Given a one-time job written by the older release, on a stage with one_time_rows_expire false
    due = job("kept", At(now + timedelta(hours=1)), now)
    written_by_the_older_release(session, due)
    # When the migration runs with the stage's rule
    applied = migrate(cassandra, expiry=KEPT)
    # Then the row keeps no time to live
    assert not [s for s in applied if s.startswith("-- gave")]
    assert expire_kept_one_time_jobs(session, KEPT) == 0
    assert set(ttls_of(session, due).values()) == {None}
