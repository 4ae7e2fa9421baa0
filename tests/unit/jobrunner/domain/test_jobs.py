"""Jobs: the status a user sees, and deterministic execution ids."""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest

from jobrunner.domain.jobs import (
    ExecutionRecord,
    ExecutionStatus,
    Job,
    JobState,
    JobStatus,
    Lane,
    LanePosition,
    ScheduledExecution,
    Trigger,
    due_of,
    execution_id_for,
    origin_of,
    watched_execution_ids,
    with_runs,
)
from jobrunner.domain.schedules import At, Every
from jobrunner.domain.spec import JobSpec

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
NEXT = T0 + timedelta(minutes=5)


def job(state: JobState, last_status: ExecutionStatus | None, next_run_at: datetime | None) -> Job:
    return Job(user_id="alice", job_id="job-1", spec=JobSpec(schedule=At(NEXT), payload={}, topic="jobs"),
               created_at=T0, updated_at=T0, state=state, last_status=last_status, next_run_at=next_run_at)


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


def test_retries_and_watchdogs_of_a_run_now_and_a_fire_at_one_instant_differ() -> None:
    # A run now at the instant of a scheduled fire is a second lineage of the same fire and attempts
    for trigger in (Trigger.RETRY, Trigger.TIMEOUT):
        fire = execution_id_for("job-1", T0, 2, trigger)
        manual = execution_id_for("job-1", T0, 2, trigger, Trigger.MANUAL)
        assert fire != manual
        assert fire == execution_id_for("job-1", T0, 2, trigger, Trigger.SCHEDULE)  # the fire's ids never changed
    # and the lineage of a first attempt is its own trigger: the origin changes nothing there
    assert execution_id_for("job-1", T0, 1, Trigger.MANUAL, Trigger.MANUAL) == execution_id_for(
        "job-1", T0, 1, Trigger.MANUAL)


def row(attempt: int, trigger: Trigger, origin: Trigger = Trigger.SCHEDULE) -> ScheduledExecution:
    return ScheduledExecution(
        bucket=T0, segment=0, lane=Lane.LATE, due_at=T0, job_id="job-1",
        execution_id=execution_id_for("job-1", T0, attempt, trigger, origin), user_id="alice", scheduled_at=T0,
        attempt=attempt, job_version=1, trigger=trigger,
    )


@pytest.mark.parametrize("origin", [Trigger.SCHEDULE, Trigger.MANUAL])
def test_the_lineage_is_read_off_the_id(origin: Trigger) -> None:
    assert origin_of(row(1, origin)) is origin
    for trigger in (Trigger.RETRY, Trigger.TIMEOUT):
        assert origin_of(row(3, trigger, origin)) is origin


def test_a_watchdog_names_the_execution_it_watches() -> None:
    # a retry's watchdog watches that retry, in its own lineage
    manual_retry = row(2, Trigger.RETRY, Trigger.MANUAL)
    assert watched_execution_ids(row(2, Trigger.TIMEOUT, Trigger.MANUAL)) == [manual_retry.execution_id]
    assert watched_execution_ids(row(2, Trigger.TIMEOUT)) == [row(2, Trigger.RETRY).execution_id]
    # a first attempt's: the run now's; the fire's, then the run now's (a watchdog planned before lineages
    # were told apart named a run now's watchdog like the fire's)
    assert watched_execution_ids(row(1, Trigger.TIMEOUT, Trigger.MANUAL)) == [row(1, Trigger.MANUAL).execution_id]
    assert watched_execution_ids(row(1, Trigger.TIMEOUT)) == [
        row(1, Trigger.SCHEDULE).execution_id, row(1, Trigger.MANUAL).execution_id]


# -- run fields derived from history ---------------------------------------------------------------


def every_minute(schedule_version: int = 1, state: JobState = JobState.ACTIVE) -> Job:
    return Job(user_id="alice", job_id="job-1",
               spec=JobSpec(schedule=Every(timedelta(minutes=1), start=T0), payload={}, topic="jobs"), created_at=T0,
               updated_at=T0, state=state, version=schedule_version, next_run_at=T0)


def fired(at: datetime, *, version: int | None = 1, trigger: Trigger = Trigger.SCHEDULE, attempt: int = 1,
          status: ExecutionStatus = ExecutionStatus.RUNNING, published: datetime | None = None,
          retry_at: datetime | None = None) -> ExecutionRecord:
    """The record of a fire at ``at`` published at once (or at ``published``), naming the next minute."""
    return ExecutionRecord(
        job_id="job-1", scheduled_at=at, attempt=attempt, execution_id=execution_id_for("job-1", at, attempt, trigger),
        user_id="alice", status=status, trigger=trigger, due_at=at, published_at=published or at,
        job_version=version, next_fire_at=at + timedelta(minutes=1) if trigger is Trigger.SCHEDULE else None,
        retry_at=retry_at,
    )


def test_a_job_without_history_shows_its_stored_next_run_and_no_last_run() -> None:
    assert with_runs(every_minute(), []) == every_minute()


def test_the_next_run_is_the_one_named_by_the_newest_fire_of_the_current_schedule_version() -> None:
    history = [fired(T0 + timedelta(minutes=2)), fired(T0 + timedelta(minutes=1))]  # newest first
    shown = with_runs(every_minute(), history)
    assert (shown.next_run_at, shown.last_run_at, shown.last_status) == (
        T0 + timedelta(minutes=3), T0 + timedelta(minutes=2), ExecutionStatus.RUNNING)
    assert shown.status is JobStatus.RUNNING


def test_fires_of_an_older_schedule_version_leave_the_changes_next_run() -> None:
    # a change of schedule (version 2) wrote next_run_at T0; the newest fire is the old schedule's
    shown = with_runs(every_minute(schedule_version=2), [fired(T0 + timedelta(minutes=9), version=1)])
    assert shown.next_run_at == T0
    assert shown.last_run_at == T0 + timedelta(minutes=9)


def test_records_from_before_the_columns_count_as_runs_only() -> None:
    shown = with_runs(every_minute(), [fired(T0 + timedelta(minutes=9), version=None)])
    assert (shown.next_run_at, shown.last_run_at) == (T0, T0 + timedelta(minutes=9))


def test_manual_runs_and_retries_do_not_move_the_next_run_but_are_the_last_run() -> None:
    fire = fired(T0 + timedelta(minutes=1), status=ExecutionStatus.FAILED)
    manual = fired(T0 + timedelta(minutes=1, seconds=30), trigger=Trigger.MANUAL)
    retry = fired(T0 + timedelta(minutes=1), trigger=Trigger.RETRY, attempt=2,
                  published=T0 + timedelta(minutes=1, seconds=40))
    shown = with_runs(every_minute(), [manual, retry, fire])
    assert shown.next_run_at == T0 + timedelta(minutes=2)
    assert shown.last_execution_id == retry.execution_id  # published last, though of an older fire


def test_a_failure_whose_retry_is_planned_shows_scheduled() -> None:
    failed = fired(T0, status=ExecutionStatus.FAILED, retry_at=T0 + timedelta(seconds=20))
    assert with_runs(every_minute(), [failed]).last_status is ExecutionStatus.SCHEDULED
    dead = fired(T0, status=ExecutionStatus.FAILED)
    assert with_runs(every_minute(), [dead]).last_status is ExecutionStatus.FAILED


@pytest.mark.parametrize("state", [JobState.PAUSED, JobState.CANCELLED])
def test_a_paused_or_cancelled_job_keeps_its_stored_next_run(state: JobState) -> None:
    stopped = every_minute(state=state).with_changes(next_run_at=None)
    assert with_runs(stopped, [fired(T0)]).next_run_at is None


def test_the_last_fire_of_a_schedule_leaves_no_next_run() -> None:
    last = replace(fired(T0), next_fire_at=None)
    assert with_runs(every_minute(), [last]).next_run_at is None


def test_a_lane_position_survives_its_encoding_and_sorts_as_the_lane_does() -> None:
    due = datetime(2026, 11, 22, 10, 1, 7, 250000, tzinfo=UTC)
    first = LanePosition(due, "job|a", "exec,\"1\"", 3)
    assert LanePosition.decode(first.encode()) == first
    later = [LanePosition(due, "job|a", "exec,\"1\"", 4), LanePosition(due, "job|b", "a", 1),
             LanePosition(due + timedelta(milliseconds=1), "a", "a", 1)]
    assert all(first < other for other in later)


def test_a_jitter_offset_is_fixed_per_job_and_fire_and_spread_over_the_window() -> None:
    start = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
    job = Job(user_id="t", job_id=str(uuid.uuid4()),
              spec=JobSpec(schedule=Every(timedelta(minutes=1), start=start), payload={}, topic="jobs", jitter_s=60),
              created_at=start, updated_at=start)
    fires = [start + timedelta(minutes=k) for k in range(3000)]
    deltas = [due_of(job, fire) - fire for fire in fires]
    offsets = [delta.total_seconds() for delta in deltas]
    # each offset is in the window, in whole milliseconds, and the same every time it is worked out
    assert all(timedelta(0) <= delta < timedelta(seconds=60) for delta in deltas)
    assert all(delta % timedelta(milliseconds=1) == timedelta(0) for delta in deltas)
    assert [due_of(job, fire) - fire for fire in fires[:50]] == deltas[:50]
    # and spread evenly: each tenth of the window holds 6 to 14 % of the fires (10 % expected)
    tenths = Counter(int(offset // 6) for offset in offsets)
    assert set(tenths) == set(range(10)) and all(180 <= n <= 420 for n in tenths.values()), tenths
    # while another job's offsets differ, and a job without a window is due at its fires
    other = replace(job, job_id=str(uuid.uuid4()))
    assert sum(due_of(other, fire) != due_of(job, fire) for fire in fires[:100]) > 95
    assert due_of(job.with_changes(jitter_s=None), fires[7]) == fires[7]


def test_a_backfills_retries_and_watchdogs_are_a_lineage_of_their_own() -> None:
    fire = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)
    ids = {origin: execution_id_for("j", fire, 2, Trigger.RETRY, origin)
           for origin in (Trigger.SCHEDULE, Trigger.MANUAL, Trigger.BACKFILL)}
    assert len(set(ids.values())) == 3
    assert execution_id_for("j", fire, 1, Trigger.BACKFILL) not in {
        execution_id_for("j", fire, 1, Trigger.SCHEDULE), execution_id_for("j", fire, 1, Trigger.MANUAL)}
    for origin, execution_id in ids.items():
        row = ScheduledExecution(bucket=fire, segment=0, lane=Lane.LATE, due_at=fire, job_id="j",
                                 execution_id=execution_id, user_id="t", scheduled_at=fire, attempt=2, job_version=1,
                                 trigger=Trigger.RETRY)
        assert origin_of(row) is origin
