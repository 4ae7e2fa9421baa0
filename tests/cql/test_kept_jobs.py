"""Which rows of ``job_table_v2`` the migration gives a time to live (``cql.kept_jobs``), without a server: the
rows are read as the step's SELECT returns them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from cql.kept_jobs import KEPT_COLUMNS, expire_kept_one_time_jobs, kept_job
from cql.schema import load_tables
from jobrunner.adapters.stores import codec
from jobrunner.adapters.stores.expiring import RowExpiry
from jobrunner.domain.expiry import row_expires_at, ttl_seconds
from jobrunner.domain.jobs import Job, JobState
from jobrunner.domain.schedules import At, Every
from jobrunner.domain.spec import JobSpec

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
HISTORY_S = 2 * 86_400
EXPIRING = RowExpiry(lambda _tenant: HISTORY_S, on=True, now=lambda: NOW)


def one_time(at: datetime, **changes: Any) -> Job:
    return Job(user_id="alice", job_id="job-1", spec=JobSpec(schedule=At(at), payload={}, topic="jobs"),
               created_at=at - timedelta(hours=1), updated_at=at - timedelta(hours=1), **changes)


def row(job: Job, version_ttl: int | None = None) -> SimpleNamespace:
    """``job``'s row as the step reads it, written by ``INSERT_JOB`` (``version_ttl`` None: no time to live)."""
    values = codec.job_values(job)
    columns = dict(zip(("user_id", "shard", "job_id", "schedule", "payload", "topic", "state", "version",
                        "schedule_version", "schedule_version_set_at", "retry", "timeout_s", "paused_at",
                        "trace_parent", "created_at", "updated_at", "next_run_at", "last_run_at",
                        "last_execution_id", "last_status", "jitter_s", "tags", "policies", "created_by"),
                       values, strict=True))
    return SimpleNamespace(**columns, scan_next_run_at=None, scan_schedule_version=None, version_ttl=version_ttl)


def test_the_step_rewrites_every_column_of_the_job_table_but_its_key() -> None:
    table = next(t for t in load_tables() if t.name == "job_table_v2")
    assert tuple(c.name for c in table.regular) == KEPT_COLUMNS


def test_a_one_time_job_without_a_time_to_live_gets_the_one_the_store_would_write() -> None:
    job = one_time(NOW + timedelta(hours=1))
    kept = kept_job(row(job), EXPIRING)
    expected = ttl_seconds(row_expires_at(job, timedelta(seconds=HISTORY_S)), NOW)
    assert kept is not None
    assert (kept.key, kept.version, kept.ttl) == (codec.job_key("alice", "job-1"), 1, expected)
    assert kept.ttl == EXPIRING.ttl(job) > 0
    assert dict(zip(KEPT_COLUMNS, kept.columns, strict=True))["payload"] == "{}"


def test_a_job_past_its_instant_gets_the_shortest_time_to_live() -> None:
    kept = kept_job(row(one_time(datetime(2025, 1, 6, tzinfo=UTC))), EXPIRING)
    assert kept is not None and kept.ttl == 1


def test_rows_that_need_no_rewrite_are_left() -> None:
    due = one_time(NOW + timedelta(hours=1))
    recurring = Job(user_id="alice", job_id="job-2",
                    spec=JobSpec(schedule=Every(timedelta(minutes=1), start=NOW), payload={}, topic="jobs"),
                    created_at=NOW, updated_at=NOW)
    paused = one_time(NOW + timedelta(hours=1), state=JobState.PAUSED, paused_at=NOW)
    beyond_2038 = one_time(datetime(2040, 1, 1, tzinfo=UTC))
    assert kept_job(row(due, version_ttl=3600), EXPIRING) is None  # a time to live already
    assert kept_job(row(recurring), EXPIRING) is None
    assert kept_job(row(paused), EXPIRING) is None
    assert kept_job(row(beyond_2038), EXPIRING) is None  # an instant no store holds: kept, as the store does
    key_only = SimpleNamespace(**{c: None for c in ("user_id", "shard", "job_id", *KEPT_COLUMNS)}, version_ttl=None)
    assert kept_job(key_only, EXPIRING) is None  # not a job (an expired row's marker)
    assert kept_job(row(due), RowExpiry(lambda _tenant: HISTORY_S, on=False, now=lambda: NOW)) is None


def test_the_step_reads_nothing_where_the_stage_keeps_one_time_jobs() -> None:
    class NoSession:
        def execute(self, *args: Any) -> Any:
            raise AssertionError("the step read the job table")

    off = RowExpiry(lambda _tenant: HISTORY_S, on=False, now=lambda: NOW)
    assert expire_kept_one_time_jobs(NoSession(), off) == 0
