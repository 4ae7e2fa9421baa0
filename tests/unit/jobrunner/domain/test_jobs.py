"""Jobs: the status a user sees, and deterministic execution ids."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from jobrunner.domain.jobs import ExecutionStatus, Job, JobState, JobStatus, Trigger, execution_id_for
from jobrunner.domain.schedules import At

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
NEXT = T0 + timedelta(minutes=5)


def job(state: JobState, last_status: ExecutionStatus | None, next_run_at: datetime | None) -> Job:
    return Job(
        user_id="alice", job_id="job-1", schedule=At(NEXT), payload={}, topic="jobs", created_at=T0,
        updated_at=T0, state=state, last_status=last_status, next_run_at=next_run_at,
    )


LAST_STATUSES = [None, *ExecutionStatus]


@pytest.mark.parametrize(("last_status", "next_run_at"), list(itertools.product(LAST_STATUSES, [None, NEXT])))
@pytest.mark.parametrize("state", [JobState.CANCELLED, JobState.PAUSED])
def test_user_intent_wins_over_execution_state(
    state: JobState, last_status: ExecutionStatus | None, next_run_at: datetime | None
) -> None:
    assert job(state, last_status, next_run_at).status == JobStatus(state.value)


@pytest.mark.parametrize(
    ("last_status", "next_run_at", "status"),
    [
        (None, None, JobStatus.PENDING),
        (None, NEXT, JobStatus.SCHEDULED),
        (ExecutionStatus.SCHEDULED, None, JobStatus.SCHEDULED),
        (ExecutionStatus.SCHEDULED, NEXT, JobStatus.SCHEDULED),
        (ExecutionStatus.RUNNING, None, JobStatus.RUNNING),
        (ExecutionStatus.RUNNING, NEXT, JobStatus.RUNNING),
        (ExecutionStatus.SUCCESS, None, JobStatus.SUCCESS),
        (ExecutionStatus.SUCCESS, NEXT, JobStatus.SCHEDULED),
        (ExecutionStatus.FAILED, None, JobStatus.FAILED),
        (ExecutionStatus.FAILED, NEXT, JobStatus.SCHEDULED),
    ],
)
def test_active_job_status(
    last_status: ExecutionStatus | None, next_run_at: datetime | None, status: JobStatus
) -> None:
    assert job(JobState.ACTIVE, last_status, next_run_at).status is status


def test_execution_id_is_deterministic() -> None:
    first = execution_id_for("job-1", T0, 1, Trigger.SCHEDULE)
    assert first == execution_id_for("job-1", T0, 1, Trigger.SCHEDULE)
    assert uuid.UUID(first).version == 5


def test_execution_id_depends_on_the_instant_not_its_representation() -> None:
    same_instant = T0.astimezone(timezone(timedelta(hours=-5))).replace(microsecond=999)
    assert execution_id_for("job-1", same_instant, 1, Trigger.SCHEDULE) == execution_id_for(
        "job-1", T0, 1, Trigger.SCHEDULE
    )


def test_execution_ids_differ_per_job_attempt_trigger_and_time() -> None:
    combos = list(
        itertools.product(["job-1", "job-2"], [T0, T0 + timedelta(milliseconds=1)], [1, 2], list(Trigger))
    )
    ids = {execution_id_for(j, t, attempt, trigger) for j, t, attempt, trigger in combos}
    assert len(ids) == len(combos)
