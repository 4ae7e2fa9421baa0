"""The reconciler's pure decisions about one job: whether its history is worth a read, whether an orphan read again
is still lost, and the row that repairs it."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from jobrunner.domain.jobs import JobState, Trigger, execution_id_for
from jobrunner.domain.orphans import Reason
from jobrunner.domain.placement import plan_execution
from jobrunner.domain.policies import Overlap

if TYPE_CHECKING:
    from datetime import datetime

    from jobrunner.domain.jobs import ExecutionRecord, Job, ScheduledExecution
    from jobrunner.domain.orphans import Orphan


def wants_history(job: Job, last_fire: datetime | None, index: set[tuple[str, int]]) -> bool:
    """Whether a job with a fire due in the window (its last, ``last_fire``) needs its history read: when that fire's
    row was not found among the done partitions' rows (a row of the late lane, or a lost one), or when it has
    retries or a buffer policy (executions that may fail or wait after their fire)."""
    if last_fire is None:
        return False
    if job.spec.retry.max_retries > 0 or job.spec.overlap in (Overlap.BUFFER_ONE, Overlap.BUFFER_ALL):
        return True
    return (execution_id_for(job.job_id, last_fire, 1, Trigger.SCHEDULE), job.schedule_version) not in index


def still_lost(orphan: Orphan, job: Job, record: ExecutionRecord | None) -> bool:
    """Whether ``orphan``, read again with its job (``job``) and its record, is still to repair."""
    if orphan.reason is Reason.MISSED_RETRY:
        return record is None and job.state is not JobState.CANCELLED
    if job.state is not JobState.ACTIVE or job.schedule_version != orphan.job_version:
        return False  # changed since: the change planned what it wants
    if orphan.reason is Reason.STUCK_HOLD:
        return record is not None and record.published_at is None
    return record is None


def replanned(orphan: Orphan, job: Job, now: datetime, *, segment_count: int) -> ScheduledExecution:
    """The orphan's row again, under its own id, placed as of ``now``."""
    if orphan.reason is Reason.MISSED_RETRY:
        row = plan_execution(job, orphan.due_at, now, segment_count, trigger=Trigger.RETRY, attempt=orphan.attempt,
                             scheduled_at=orphan.scheduled_at, origin=orphan.origin)
    elif orphan.reason is Reason.STUCK_HOLD:  # held: let the scan decide again, at once
        row = replace(plan_execution(job, now, now, segment_count, trigger=Trigger.SCHEDULE,
                                     scheduled_at=orphan.scheduled_at), job_version=orphan.job_version)
    else:
        row = plan_execution(job, orphan.scheduled_at, now, segment_count, trigger=Trigger.SCHEDULE)
    assert row.execution_id == orphan.execution_id, (row, orphan)
    return row
