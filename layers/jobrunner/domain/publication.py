"""What a due row of the scan means for its job: whether it is still wanted, the fire after it, and the history
record of publishing it. Pure rules of the scan (``services.scan``), kept here beside the job they read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobrunner.domain.jobs import ExecutionRecord, ExecutionStatus, JobState, Trigger
from jobrunner.domain.schedules import fires_at

if TYPE_CHECKING:
    from datetime import datetime

    from jobrunner.domain.jobs import Job, ScheduledExecution

#: A record in one of these states has ended: a replay of its row is completed, never published again.
ENDED = (ExecutionStatus.SUCCESS, ExecutionStatus.FAILED, ExecutionStatus.SKIPPED)


def row_identity(row: ScheduledExecution) -> tuple[object, ...]:
    """A row's identity: its whole key (the clustering key includes the version it was planned under)."""
    return (row.lane, row.due_at, row.job_id, row.execution_id, row.job_version)


def next_fire(row: ScheduledExecution, job: Job) -> datetime | None:
    """The fire that follows a scheduled fire: from the fire just published, not from now, so a scan running
    late (after missed ticks or a crash) replays every missed fire, one after another, instead of skipping
    them. None for the last fire, and for manual runs and retries (which leave the schedule as it is)."""
    if row.trigger is not Trigger.SCHEDULE or not job.spec.schedule.recurring:
        return None
    return job.spec.schedule.next_fire_after(row.scheduled_at)


def started_record(row: ScheduledExecution, job: Job, now: datetime) -> ExecutionRecord:
    """The history record of publishing ``row`` at ``now``, with what the job's run fields derive from."""
    return ExecutionRecord(
        job_id=row.job_id, scheduled_at=row.scheduled_at, attempt=row.attempt,
        execution_id=row.execution_id, user_id=row.user_id, status=ExecutionStatus.RUNNING,
        trigger=row.trigger, due_at=row.due_at, published_at=now, job_version=row.job_version,
        next_fire_at=next_fire(row, job),
    )


def planned_ahead(row: ScheduledExecution, job: Job) -> bool:
    """A scheduled fire planned under a version the job has not reached (yet)."""
    return row.trigger is Trigger.SCHEDULE and row.job_version > job.version


def publishable(row: ScheduledExecution, job: Job) -> bool:
    """Whether ``row`` is still wanted by ``job`` as it now stands. Cancel stops everything. A pause stops
    the schedule only: retries (and manual runs and backfills) of work already requested go on. A scheduled fire is
    wanted only under the job's current schedule version: a change of schedule or state re-plans the
    fires it keeps, and a change of anything else keeps the rows planned."""
    if job.state is JobState.CANCELLED:
        return False
    if row.trigger in (Trigger.MANUAL, Trigger.BACKFILL, Trigger.RETRY):
        return True  # (of a job deleted after its last fire too: requested before it was)
    if job.state in (JobState.PAUSED, JobState.DELETED):
        return False
    # A row of the current schedule version is the job's only if its fire is one of the job's schedule, at or
    # after the first fire the change that set the version planned: a change attempt that failed (its
    # compare-and-set never landed) can leave rows under the very version number the next, successful attempt
    # takes, at fire times of a schedule the job never had, or at fires of the same schedule that the winner
    # did not plan (a resume with catch-up that lost to a plain resume: the fires of the pause). The winner's
    # own fires start at that first one, so a loser's row at or after it is a copy of one of them (same
    # execution id, deduplicated by its record).
    if row.job_version != job.schedule_version or not fires_at(job.spec.schedule, row.scheduled_at):
        return False
    return job.schedule_from is None or row.scheduled_at >= job.schedule_from
