"""When a job that asked for it (``JobSpec.delete_after_last``) is done, and may be deleted.

A job is done when its schedule has no fire left after the last fire it had (the newest record of its
schedule's lineage under its current schedule version names no next fire), that fire has ended (run and
reported, failed with no retry left, or not run for a stated reason: SKIPPED), and none of its newest
records is still in progress (running, held, or failed with its retry still to come). Then nothing of
its own can still need it: a retry or a watchdog of an execution of a deleted job would be dropped. Its
history records and its change log are kept until they expire (``history_days``); they name their
tenant, which alone can still read them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobrunner.domain.jobs import ExecutionStatus, JobState, Trigger

if TYPE_CHECKING:
    from collections.abc import Sequence

    from jobrunner.domain.jobs import ExecutionRecord, Job

_ENDED = (ExecutionStatus.SUCCESS, ExecutionStatus.FAILED, ExecutionStatus.SKIPPED)


def in_progress(records: Sequence[ExecutionRecord]) -> list[ExecutionRecord]:
    """Those of ``records`` (a job's newest, in history order) whose execution has not ended for good: running,
    held, or failed with a retry planned that has no record of its own yet, or whose own record has not ended."""
    attempts = {(r.scheduled_at, r.attempt) for r in records}

    def retry_to_come(record: ExecutionRecord) -> bool:
        return (record.status is ExecutionStatus.FAILED and record.retry_at is not None
                and (record.scheduled_at, record.attempt + 1) not in attempts)

    busy = [r for r in records if r.status not in _ENDED or retry_to_come(r)]
    return busy


def done_for_good(job: Job, records: Sequence[ExecutionRecord]) -> bool:
    """Whether ``job`` asked to be deleted after its last fire and is done (see the module doc). ``records``:
    its newest history records (``domain.jobs.RUN_RECORDS`` of them), in history order."""
    if not job.spec.delete_after_last or job.state is not JobState.ACTIVE:
        return False
    last = next((r for r in records if r.trigger is Trigger.SCHEDULE and r.job_version == job.schedule_version), None)
    if last is None or last.next_fire_at is not None or last.status not in _ENDED:
        return False
    return not in_progress(records)
