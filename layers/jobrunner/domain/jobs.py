"""Jobs, scheduled executions and execution records.

Two status fields, from different places so that they never overwrite each other:
- ``Job.state`` is the user's intent (ACTIVE, PAUSED, CANCELLED), written only by the API.
- ``Job.last_status`` is the state of the latest execution. No execution writes the job: its run
  fields (last run, last status, next run) are derived from its newest history records
  (``with_runs``), so an execution writes nothing to its job's row (``job_table_v2``).
The status a user sees (``Job.status``) is derived from both.

Every change bumps ``Job.version``; a change of schedule or state (submit, a schedule PATCH, pause,
resume, cancel) also sets ``Job.schedule_version`` to it. A scheduled execution carries the schedule
version it was planned under, and the scan drops rows whose schedule version is stale. That single rule
implements cancel, pause, resume and schedule changes without deleting rows that a scan may be reading,
and lets a change of anything else (payload, topic, retry, timeout) leave the planned rows and the next
run as they are: re-planning those from a read of the job could take a next run that a scan's
completion had just overwritten with the old schedule's. A change that loses its compare-and-set leaves
the rows it wrote first under the version number the winner takes: the scan tells them apart by the
job's schedule and by the first fire the winner planned (``Job.schedule_from``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, replace
from datetime import timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from jobrunner.domain.spec import SPEC_FIELDS, JobSpec
from jobrunner.domain.time import from_epoch_ms, to_epoch_ms

# What the API reports is what the CLI reads: one definition, shared with the clients.
from jobrunner_client.protocol import JobStatus as JobStatus

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime


class JobState(StrEnum):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    CANCELLED = "CANCELLED"
    #: Deleted after its last fire (``delete_after_last``, ``domain.retire``): not found by the API any more, but
    #: its runs now, backfills and retries still in flight go on, and its row expires with its history.
    DELETED = "DELETED"


class ExecutionStatus(StrEnum):
    SCHEDULED = "SCHEDULED"
    RUNNING = "RUNNING"  # published to Kafka, handed to the workers
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    #: Not run: a policy left this fire out (``domain.policies``); the record's ``error`` says which and why.
    SKIPPED = "SKIPPED"


class Trigger(StrEnum):
    SCHEDULE = "SCHEDULE"
    MANUAL = "MANUAL"
    #: A past fire of the schedule run on request (``POST /jobs/{id}/backfill``), due when asked.
    BACKFILL = "BACKFILL"
    RETRY = "RETRY"
    #: Not published: at its due instant the scan checks that the execution it names has reported,
    #: and fails it (then retries or dead-letters it) when it has not.
    TIMEOUT = "TIMEOUT"


class Lane(StrEnum):
    """Where in its partition a scheduled execution is written.

    PLANNED rows are written before their minute's scan can have started and are read once by it (and
    by the scan itself into its own partition, which it keeps in memory); LATE rows are written by others
    when the scan may already be running and are polled by it every second.
    """

    PLANNED = "P"
    LATE = "L"


@dataclass(frozen=True)
class Job:
    """A job: its identity, its spec (``domain.spec``: every option its user controls), its lifecycle and its
    run state."""

    user_id: str
    job_id: str
    #: What its user asked for; its topic always named (a submit resolves the tenant's default).
    spec: JobSpec
    created_at: datetime
    updated_at: datetime
    state: JobState = JobState.ACTIVE
    version: int = 1
    #: The version of the last change of schedule or state; the job's scheduled rows are planned under it.
    #: 0 when constructed: the version itself (also for jobs stored before the column existed).
    schedule_version: int = 0
    #: When the job was last paused (resume with catch-up replays the fires missed since then).
    paused_at: datetime | None = None
    #: The first fire planned by the change that set ``schedule_version`` (the next run that change wrote), as the
    #: store read it: the scheduled rows of that version are its fires at or after it. A row of the version at an
    #: earlier fire was planned by a change that lost its compare-and-set to that one (a resume with catch-up losing
    #: to a plain one), and is not the job's (``domain.publication.publishable``). None when not known (a job
    #: stored before it was kept, one paused or ended by that change), and then nothing is checked against it.
    schedule_from: datetime | None = None
    #: W3C traceparent of the request that created the job (executions carry a child of it).
    trace_parent: str | None = None
    #: The principal that submitted it (an IAM role, a Cognito identity, ...), else its tenant; its submit's change
    #: log entry is the row's (``domain.changes.submit_entry``). None only for a job stored before it was kept, whose
    #: submit wrote an entry of its own.
    created_by: str | None = None
    next_run_at: datetime | None = None
    last_run_at: datetime | None = None
    last_execution_id: str | None = None
    last_status: ExecutionStatus | None = None

    def __post_init__(self) -> None:
        if not self.schedule_version:
            object.__setattr__(self, "schedule_version", self.version)

    @property
    def status(self) -> JobStatus:
        if self.state is JobState.CANCELLED:
            return JobStatus.CANCELLED
        if self.state is JobState.PAUSED:
            return JobStatus.PAUSED
        if self.state is JobState.DELETED:
            return JobStatus.DELETED
        if self.last_status is ExecutionStatus.RUNNING or (self.last_status and self.next_run_at is None):
            return JobStatus(self.last_status.value)
        return JobStatus.SCHEDULED if self.next_run_at is not None else JobStatus.PENDING

    def with_changes(self, **changes: Any) -> Job:
        """This job with ``changes``, which may name fields of its spec too (``schedule=``, ``payload=``)."""
        spec = {name: changes.pop(name) for name in SPEC_FIELDS if name in changes}
        if spec:
            changes["spec"] = replace(changes.get("spec", self.spec), **spec)
        return replace(self, **changes)


def due_of(job: Job, fire: datetime) -> datetime:
    """When the execution of ``fire``, a fire of ``job``'s schedule, is due: the fire itself, or with a
    jitter window, the fire plus an offset within it that depends only on the job and the fire (the same
    each time it is planned, spread evenly over the window in whole milliseconds). The fire stays the
    execution's ``scheduled_at`` (its id and the next fire come from it); only its due instant moves."""
    if not job.spec.jitter_s:
        return fire
    digest = hashlib.sha256(f"{job.job_id}|{to_epoch_ms(fire)}".encode()).digest()
    return fire + timedelta(milliseconds=int.from_bytes(digest[:8], "big") % (job.spec.jitter_s * 1000))


def execution_id_for(
    job_id: str, scheduled_at: datetime, attempt: int, trigger: Trigger, origin: Trigger = Trigger.SCHEDULE
) -> str:
    """Deterministic id of one attempt of one fire: every copy of it (after a crash) carries the same id.

    ``origin`` is the trigger of the first attempt of the lineage a RETRY or TIMEOUT row belongs to. A run
    now requested at the very instant of a scheduled fire is a second lineage with the same fire and the
    same attempts; its retries and watchdogs must not take the fire's ids. The schedule's lineage adds
    nothing to the name, so its ids are the ones planned before lineages were told apart."""
    name = f"{job_id}|{to_epoch_ms(scheduled_at)}|{attempt}|{trigger.value}"
    if origin is not Trigger.SCHEDULE and trigger in (Trigger.RETRY, Trigger.TIMEOUT):
        name += f"|{origin.value}"
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"jobrunner:{name}"))


#: The triggers that start a lineage: a first attempt, which retries and watchdogs follow.
LINEAGES = (Trigger.SCHEDULE, Trigger.MANUAL, Trigger.BACKFILL)


def origin_of(execution: ScheduledExecution | ExecutionRecord) -> Trigger:
    """The lineage of an execution or a watchdog (SCHEDULE, MANUAL or BACKFILL), read off its id."""
    if execution.trigger in LINEAGES:
        return execution.trigger
    for origin in (Trigger.MANUAL, Trigger.BACKFILL):
        if execution.execution_id == execution_id_for(execution.job_id, execution.scheduled_at, execution.attempt,
                                                      execution.trigger, origin):
            return origin
    return Trigger.SCHEDULE


def watched_execution_ids(watchdog: ScheduledExecution) -> list[str]:
    """The id of the execution a TIMEOUT row watches; for a first attempt of the schedule's lineage, then
    the run now's: a watchdog planned before lineages were told apart carries that id for both."""
    origin = origin_of(watchdog)
    trigger = origin if watchdog.attempt == 1 else Trigger.RETRY
    watched = [execution_id_for(watchdog.job_id, watchdog.scheduled_at, watchdog.attempt, trigger, origin)]
    if watchdog.attempt == 1 and origin is Trigger.SCHEDULE:
        watched.append(execution_id_for(watchdog.job_id, watchdog.scheduled_at, 1, Trigger.MANUAL))
    return watched


@dataclass(frozen=True)
class ScheduledExecution:
    """A row of ``task_schedule_v2``: one attempt of one fire, waiting for its scan."""

    bucket: datetime
    segment: int
    lane: Lane
    due_at: datetime
    job_id: str
    execution_id: str
    user_id: str
    scheduled_at: datetime
    attempt: int
    #: The job's ``schedule_version`` when the row was planned.
    job_version: int
    trigger: Trigger
    #: A fire its overlap policy holds (written again by the scan for later, ``services.scan``): its next fire
    #: was planned when it was first held, so whatever releases it (its policy, or a change of policy to
    #: ``allow_all``) plans none; the row says so itself, so that no policy needs a read to know it.
    held: bool = False


@dataclass(frozen=True, order=True)
class LanePosition:
    """Where a scheduled row sorts within its lane (its clustering key after the lane): a scan's progress
    through its PLANNED lane is kept as the position of the last row it has settled (``ScanService``)."""

    due_at: datetime
    job_id: str
    execution_id: str
    job_version: int

    @classmethod
    def of(cls, row: ScheduledExecution) -> LanePosition:
        return cls(row.due_at, row.job_id, row.execution_id, row.job_version)

    def encode(self) -> str:
        """A string to keep the position in (the scan's lease item); ``decode`` reads it back."""
        return json.dumps([to_epoch_ms(self.due_at), self.job_id, self.execution_id, self.job_version])

    @classmethod
    def decode(cls, text: str) -> LanePosition:
        due_ms, job_id, execution_id, job_version = json.loads(text)
        return cls(from_epoch_ms(int(due_ms)), str(job_id), str(execution_id), int(job_version))


@dataclass(frozen=True)
class ExecutionRecord:
    """A row of ``task_history_v2``: what happened to one execution (one attempt of one lineage of a fire)."""

    job_id: str
    scheduled_at: datetime
    attempt: int
    execution_id: str
    user_id: str
    status: ExecutionStatus
    trigger: Trigger
    due_at: datetime
    published_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None
    #: The job's schedule version the execution was planned under (None: a record from before the column).
    job_version: int | None = None
    #: For a scheduled fire: the schedule's next fire after it, the job's next run once this one is out
    #: (None: the schedule has none).
    next_fire_at: datetime | None = None
    #: For a failed execution that is retried: when its retry is due.
    retry_at: datetime | None = None


#: How many of a job's newest history records its run fields are derived from (``with_runs``).
RUN_RECORDS = 20


def with_runs(job: Job, records: Sequence[ExecutionRecord]) -> Job:
    """``job`` with its run fields derived from ``records``, its newest history records in history order.

    - The last run is the record published last (a retry of an older fire can follow a newer fire).
      Its status is the last status, except that a failed execution whose retry is planned reads
      SCHEDULED.
    - The next run of an active job is the ``next_fire_at`` of its newest scheduled fire planned under the
      current schedule version: the scan writes it into the fire's record before publishing it. Until
      such a fire is out (a new job, or a change of schedule or state), it is the one the job row holds.
    Records written before these columns existed carry no schedule version and count only as runs.
    """
    published = [r for r in records if r.published_at is not None]
    changes: dict[str, Any] = {}
    if published:
        last = max(published, key=lambda r: r.published_at or r.scheduled_at)
        status = ExecutionStatus.SCHEDULED if last.retry_at is not None else last.status
        changes.update(last_run_at=last.published_at, last_execution_id=last.execution_id, last_status=status)
    if job.state is JobState.ACTIVE:
        fire = next((r for r in records if r.trigger is Trigger.SCHEDULE and r.job_version is not None
                     and r.job_version == job.schedule_version), None)
        if fire is not None:
            changes["next_run_at"] = fire.next_fire_at
    return replace(job, **changes) if changes else job
