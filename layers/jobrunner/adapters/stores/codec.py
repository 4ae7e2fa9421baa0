"""Row <-> domain conversions shared by the CQL store (kept apart so the store stays about queries)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jobrunner.domain.jobs import ExecutionRecord, ExecutionStatus, Job, JobState, Lane, ScheduledExecution, Trigger
from jobrunner.domain.placement import row_ttl
from jobrunner.domain.policies import CatchUp, Overlap
from jobrunner.domain.schedules import schedule_from_dict
from jobrunner.domain.segments import segment_of
from jobrunner.domain.spec import JobSpec, RetryPolicy
from jobrunner.domain.targets import HttpsTarget, LambdaTarget, SqsTarget
from jobrunner.domain.time import utc

if TYPE_CHECKING:
    from collections.abc import Callable


def _ts(value: datetime | None) -> datetime | None:
    return utc(value) if value is not None else None


#: The partitions a tenant's jobs are spread over (``job_table_v2``'s ``shard``). Fixed for a keyspace:
#: changing it would move every job, so it is not a setting.
JOB_SHARDS = 16


def job_shard(job_id: str) -> int:
    """The ``job_table_v2`` partition (with the tenant) of a job: its segment among ``JOB_SHARDS`` segments
    (``domain.segments.segment_of``: a stable hash, the same in every process and release). The same hash
    as its segment's on purpose: with a segment count that is a multiple of 16 (16 by default), every job a
    (minute, segment) scan reads is in one shard per tenant, so the scan reads a tenant's jobs of a page in
    one ``IN`` request, as when a tenant was one partition, while a tenant's executions, spread over the
    segments, spread over its 16 partitions."""
    return segment_of(job_id, JOB_SHARDS)


def job_key(user_id: str, job_id: str) -> tuple[str, int, str]:
    """The ``job_table_v2`` key of a job, in the order of the statements' ``WHERE``."""
    return user_id, job_shard(job_id), job_id


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def job_from_row(row: Any) -> Job:
    """The job of a ``job_table_v2`` row. Its schedule version is the stored one only if it was written with
    the current version (``schedule_version_set_at``); a row last changed by code that predates the
    column (an older release, whose rows ``cql.migrate`` copies as they are) re-planned on every change,
    so its version is its schedule version. Its next run is the scan's if the scan planned it under the
    current schedule version, else the one the last change of schedule or state wrote (also for rows
    written before the scan had columns of its own). The first fire planned under its schedule version
    (``Job.schedule_from``) is the next run that change wrote (``next_run_at``: no other change, and no scan,
    writes it), known only when its schedule version is and no scan of an older release wrote a next run
    under it."""
    current = row.schedule_version is not None and row.schedule_version_set_at == row.version
    schedule_version = row.schedule_version if current else row.version
    scan_current = row.scan_schedule_version is not None and row.scan_schedule_version == schedule_version
    return Job(
        user_id=row.user_id,
        job_id=row.job_id,
        spec=spec_from_row(row),
        created_at=utc(row.created_at),
        updated_at=utc(row.updated_at),
        state=JobState(row.state),
        version=row.version,
        schedule_version=schedule_version,
        paused_at=_ts(row.paused_at),
        trace_parent=row.trace_parent,
        next_run_at=_ts(row.scan_next_run_at if scan_current else row.next_run_at),
        schedule_from=None if scan_current or not current else _ts(row.next_run_at),
        last_run_at=_ts(row.last_run_at),
        last_execution_id=row.last_execution_id,
        last_status=ExecutionStatus(row.last_status) if row.last_status else None,
        created_by=getattr(row, "created_by", None),  # a row read from before the column: not known
    )


def is_job(row: Any) -> bool:
    """Whether a ``job_table_v2`` row read is a job: not None, and not a key whose columns have all expired (the
    row marker of an INSERT without a time to live outlives the cells a later write gave one: see
    ``CassandraJobStore``, "expiry"). Such a key reads as no job, everywhere."""
    return row is not None and row.version is not None


def spec_from_row(row: Any) -> JobSpec:
    """The spec of a ``job_table_v2`` row: its own columns, and the policies column for the rest."""
    return JobSpec(
        schedule=schedule_from_dict(json.loads(row.schedule)),
        payload=json.loads(row.payload),
        topic=row.topic,
        retry=RetryPolicy(**json.loads(row.retry)) if row.retry else RetryPolicy(),
        timeout_s=row.timeout_s,
        jitter_s=row.jitter_s,
        tags=json.loads(row.tags) if row.tags else {},
        **policies_from_column(row.policies),
    )


def job_values(job: Job) -> tuple[Any, ...]:
    """Values in the column order of ``INSERT_JOB``."""
    spec = job.spec
    return (
        job.user_id, job_shard(job.job_id), job.job_id, dumps(spec.schedule.to_dict()), dumps(spec.payload), spec.topic,
        job.state.value, job.version, job.schedule_version, job.version, dumps(asdict(spec.retry)), spec.timeout_s,
        job.paused_at, job.trace_parent, job.created_at, job.updated_at,
        job.next_run_at, job.last_run_at, job.last_execution_id,
        job.last_status.value if job.last_status else None, spec.jitter_s, _tags(job), policies_column(job),
        job.created_by,
    )


def job_row_fields(job: Job) -> tuple[Any, ...]:
    """Values of every column after the key, in ``INSERT_JOB``'s order, for a compare-and-set that writes the whole
    row (``UPDATE_JOB_EXPIRING``): the job as read with its changes. As the two partial updates do, a change of
    schedule or state writes its next run, and any other change the next run the row holds (``schedule_from``:
    the one the change that set the schedule version wrote); the run fields are derived from history, never
    stored (null)."""
    replans = job.schedule_version == job.version
    values = job_values(replace(job, next_run_at=job.next_run_at if replans else job.schedule_from,
                                last_run_at=None, last_execution_id=None, last_status=None))
    return values[3:]


def job_user_fields(job: Job) -> tuple[Any, ...]:
    """Values in the SET order of ``UPDATE_JOB_USER_FIELDS``."""
    spec = job.spec
    return (
        dumps(spec.schedule.to_dict()), dumps(spec.payload), spec.topic, job.state.value, job.version,
        job.schedule_version, job.version, dumps(asdict(spec.retry)), spec.timeout_s, job.paused_at, job.updated_at,
        job.next_run_at, spec.jitter_s, _tags(job), policies_column(job),
    )


def job_settings(job: Job) -> tuple[Any, ...]:
    """Values in the SET order of ``UPDATE_JOB_SETTINGS``."""
    spec = job.spec
    return (dumps(spec.payload), spec.topic, job.version, job.version, dumps(asdict(spec.retry)), spec.timeout_s,
            job.updated_at, spec.jitter_s, _tags(job), policies_column(job))


#: The spec's fields kept in the policies column (the others have columns of their own), each with what reads it
#: back from its JSON. A field is written only when it is not its default, so a new option needs no new column, and
#: rows written before it read as its default.
_IN_POLICIES: dict[str, Callable[[Any], Any]] = {
    "calendar": str,
    "delete_after_last": bool,
    "overlap": Overlap,
    "catch_up": CatchUp.from_dict,
    "description": str,
    "target": lambda shape: _target(shape),
}
#: A spec that leaves every one out.
_DEFAULTS = JobSpec(schedule=None, payload=None)  # type: ignore[arg-type]


def policies_column(job: Job) -> str | None:
    """The policies column: the spec's fields of ``_IN_POLICIES`` not at their default, as JSON; nothing (null)
    when all are."""
    plain = job.spec.plain()
    policies = {name: plain[name] for name in _IN_POLICIES if getattr(job.spec, name) != getattr(_DEFAULTS, name)}
    return dumps(policies) if policies else None


def policies_from_column(text: str | None) -> dict[str, Any]:
    """The spec's fields the policies column holds (the defaults for a null, or a field it leaves out)."""
    policies = json.loads(text) if text else {}
    return {name: read(policies[name]) if name in policies else getattr(_DEFAULTS, name)
            for name, read in _IN_POLICIES.items()}


_TARGETS: dict[str, type[HttpsTarget] | type[LambdaTarget] | type[SqsTarget]] = {
    "https": HttpsTarget, "lambda": LambdaTarget, "sqs": SqsTarget}


def _target(shape: dict[str, dict[str, Any]]) -> HttpsTarget | LambdaTarget | SqsTarget:
    """A stored target, read as written and not checked again: a rule made stricter later must not make a job
    unreadable (what the stage no longer allows, the scan dead-letters)."""
    [(kind, fields)] = shape.items()
    return _TARGETS[kind](**fields)


def _tags(job: Job) -> str | None:
    """The tags column: JSON, or nothing (null) for a job without tags."""
    return dumps(job.spec.tags) if job.spec.tags else None


def scheduled_from_row(row: Any) -> ScheduledExecution:
    return ScheduledExecution(
        bucket=utc(row.next_execution_time),
        segment=row.segment,
        lane=Lane(row.lane),
        due_at=utc(row.due_at),
        job_id=row.job_id,
        execution_id=row.execution_id,
        user_id=row.user_id,
        scheduled_at=utc(row.scheduled_at),
        attempt=row.attempt,
        job_version=row.job_version,
        trigger=Trigger(row.trigger),
        held=bool(getattr(row, "held", None)),
    )


def scheduled_values(row: ScheduledExecution, now: datetime | None = None) -> tuple[Any, ...]:
    """Values in the column order of ``INSERT_SCHEDULED``, its time to live (``row_ttl``) as written at
    ``now`` (the wall clock when None) last. (A held row's ``held`` is written by the statement itself.)"""
    ttl = row_ttl(row.bucket, now if now is not None else datetime.now(UTC))
    return (*scheduled_key(row), row.user_id, row.scheduled_at, row.attempt, row.trigger.value, ttl)


def scheduled_key(row: ScheduledExecution) -> tuple[Any, ...]:
    """The primary key of a ``task_schedule_v2`` row, in column order."""
    return (row.bucket, row.segment, row.lane.value, row.due_at, row.job_id, row.execution_id, row.job_version)




def _status(status: str | None, published_at: datetime | None) -> ExecutionStatus:
    """A record's status: none written is RUNNING (a publish writes no status, so that a replayed publish never
    moves an ended execution back); SCHEDULED is a fire held by its overlap policy, RUNNING once published."""
    if status is None or (status == ExecutionStatus.SCHEDULED.value and published_at is not None):
        return ExecutionStatus.RUNNING
    return ExecutionStatus(status)


def record_from_row(row: Any) -> ExecutionRecord:
    return ExecutionRecord(
        job_id=row.job_id,
        scheduled_at=utc(row.execution_time),
        attempt=row.attempt,
        execution_id=row.execution_id,
        user_id=row.user_id,
        status=_status(row.status, row.published_at),
        trigger=Trigger(row.trigger),
        due_at=utc(row.due_at),
        published_at=_ts(row.published_at),
        finished_at=_ts(row.finished_at),
        error=row.error,
        job_version=row.job_version,
        next_fire_at=_ts(row.next_fire_at),
        retry_at=_ts(row.retry_at),
    )


def started_record_values(record: ExecutionRecord) -> tuple[Any, ...]:
    """Values in the column order of ``INSERT_RECORD_STARTED`` (no status: see that statement)."""
    return (
        record.job_id, record.scheduled_at, record.attempt, record.execution_id, record.user_id,
        record.trigger.value, record.due_at, record.published_at, record.job_version, record.next_fire_at,
    )


def record_values(record: ExecutionRecord) -> tuple[Any, ...]:
    """Values in the column order of ``INSERT_RECORD``."""
    return (
        record.job_id, record.scheduled_at, record.attempt, record.execution_id, record.user_id,
        record.status.value, record.trigger.value, record.due_at, record.published_at,
        record.finished_at, record.error, record.job_version, record.next_fire_at, record.retry_at,
    )
