"""Scheduled rows expire instead of being deleted, on a real Cassandra: every insert carries its time to live."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobrunner.adapters.stores.cassandra import CassandraJobStore
from jobrunner.domain.jobs import (
    ExecutionRecord,
    ExecutionStatus,
    Job,
    Lane,
    ScheduledExecution,
    Trigger,
    execution_id_for,
)
from jobrunner.domain.placement import KEEP_ROWS, scan_closes_at
from jobrunner.domain.schedules import At
from jobrunner.domain.spec import JobSpec
from jobrunner.domain.time import minute_bucket
from jobrunner.ports import Completion, Outcome

pytestmark = pytest.mark.integration


def _row(job: Job, due: datetime, segment: int) -> ScheduledExecution:
    return ScheduledExecution(
        bucket=minute_bucket(due), segment=segment, lane=Lane.PLANNED, due_at=due, job_id=job.job_id,
        execution_id=execution_id_for(job.job_id, due, 1, Trigger.SCHEDULE), user_id=job.user_id,
        scheduled_at=due, attempt=1, job_version=1, trigger=Trigger.SCHEDULE,
    )


def _ttl(session: Any, row: ScheduledExecution) -> int | None:
    found = session.execute(
        "SELECT TTL(user_id) AS ttl FROM task_schedule_v2 WHERE next_execution_time = %s AND segment = %s"
        " AND lane = %s AND due_at = %s AND job_id = %s",
        (row.bucket, row.segment, row.lane.value, row.due_at, row.job_id),
    ).one()
    assert found is not None, "the row is not stored"
    return found.ttl  # type: ignore[no-any-return]


def test_every_scheduled_row_expires_a_while_after_its_scan_and_a_done_one_is_not_deleted(
    cassandra_session: Any,
) -> None:
    store = CassandraJobStore(cassandra_session)
    segment = uuid.uuid4().int % 1_000_000 + 100
    now = datetime.now(UTC)
    due = now + timedelta(hours=2)
    job = Job(user_id=f"user-{uuid.uuid4().hex[:6]}", job_id=str(uuid.uuid4()),
              spec=JobSpec(schedule=At(due), payload={}, topic="jobs"), created_at=now, updated_at=now,
              next_run_at=due)
    # Given a job whose first run is written with it, and a manual run written on its own
    first, manual = _row(job, due, segment), _row(job, due + timedelta(days=3), segment)
    store.create_job(job, first)
    store.write_scheduled([manual])
    # Then each is kept until KEEP_ROWS after its own scan may close (a few seconds of slack for the round trip)
    for row in (first, manual):
        expected = (scan_closes_at(row.bucket) + KEEP_ROWS - now).total_seconds()
        ttl = _ttl(cassandra_session, row)
        assert ttl is not None and expected - 30 <= ttl <= expected + 1
    # And completing the first leaves it in place (it expires; no delete, no tombstone)
    store.settle_published([Completion(done=first, following=None)])
    assert _ttl(cassandra_session, first) is not None
    # And a row due further ahead than any time to live reaches is kept without one
    far = _row(job, datetime(2040, 2, 29, 12, 0, tzinfo=UTC), segment)
    store.write_scheduled([far])
    assert _ttl(cassandra_session, far) is None


def test_a_history_record_expires_after_its_tenants_retention_from_its_last_write(cassandra_session: Any) -> None:
    # Given a store where one tenant keeps history 3 days and every other one the default (30)
    days = {"brief": 3}
    store = CassandraJobStore(cassandra_session, history_ttl_s=lambda tenant: days.get(tenant, 30) * 86_400)
    fire = datetime.now(UTC).replace(microsecond=0)

    def record(tenant: str) -> ExecutionRecord:
        job_id = str(uuid.uuid4())
        return ExecutionRecord(
            job_id=job_id, scheduled_at=fire, attempt=1,
            execution_id=execution_id_for(job_id, fire, 1, Trigger.SCHEDULE), user_id=tenant,
            status=ExecutionStatus.RUNNING, trigger=Trigger.SCHEDULE, due_at=fire, published_at=fire)

    def ttl(job_id: str, column: str) -> int:
        found = cassandra_session.execute(f"SELECT TTL({column}) AS ttl FROM task_history_v2 WHERE job_id = %s",
                                          (job_id,)).one()
        return found.ttl  # type: ignore[no-any-return]

    brief, other = record("brief"), record("someone")
    # When each is published, then the brief tenant's finishes
    store.write_started([brief, other])
    store.write_outcomes([Outcome(record=replace(brief, status=ExecutionStatus.SUCCESS, finished_at=fire), retry=None)])
    # Then each record carries its tenant's retention, the finished one from its result
    assert 3 * 86_400 - 60 < ttl(brief.job_id, "published_at") <= 3 * 86_400
    assert 3 * 86_400 - 60 < ttl(brief.job_id, "status") <= 3 * 86_400
    assert 30 * 86_400 - 60 < ttl(other.job_id, "published_at") <= 30 * 86_400
