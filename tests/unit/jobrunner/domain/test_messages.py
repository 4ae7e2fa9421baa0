"""The dead letter of an execution: what a consumer of the dead-letter topic reads."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from jobrunner.domain.jobs import ExecutionStatus, Job, Trigger
from jobrunner.domain.messages import dead_letter_message
from jobrunner.domain.placement import plan_execution
from jobrunner.domain.publication import started_record
from jobrunner.domain.schedules import Every
from jobrunner.domain.spec import JobSpec

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def test_a_dead_letter_carries_the_payload_and_the_reason_keyed_by_the_job() -> None:
    job = Job(user_id="alice", job_id="job-1",
              spec=JobSpec(schedule=Every(timedelta(minutes=1), start=T0), payload={"n": 1}, topic="jobs"),
              created_at=T0, updated_at=T0)
    row = plan_execution(job, T0 + timedelta(minutes=1), T0, 16, trigger=Trigger.SCHEDULE)
    record = replace(started_record(row, job, T0), status=ExecutionStatus.FAILED, error="refused 5 times")
    key, value, headers = dead_letter_message(job, record)
    assert key == "job-1"
    assert (value["payload"], value["error"], value["execution_id"]) == ({"n": 1}, "refused 5 times", row.execution_id)
    assert headers == {"execution_id": row.execution_id, "scheduled_at": "2026-11-22T10:01:00.000Z", "attempt": "1"}
