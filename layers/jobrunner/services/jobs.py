"""Submitting and reading jobs."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobrunner.domain.errors import InvalidField, JobNotFound
from jobrunner.domain.jobs import (
    ExecutionRecord,
    Job,
    RetryPolicy,
    ScheduledExecution,
    Trigger,
    execution_id_for,
)
from jobrunner.domain.placement import place
from jobrunner.domain.schedules import AT_PAST_TOLERANCE, At, Every, Schedule
from jobrunner.domain.segments import segment_of
from jobrunner.domain.time import utc

if TYPE_CHECKING:
    from datetime import datetime

    from jobrunner.ports import Clock, JobStore


@dataclass(frozen=True)
class JobRules:
    segment_count: int
    default_topic: str = "jobs"
    allowed_topics: frozenset[str] = frozenset({"jobs"})
    max_payload_bytes: int = 64 * 1024


@dataclass(frozen=True)
class NewJob:
    schedule: Schedule
    payload: Any
    topic: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)


def plan_execution(
    job: Job, due_at: datetime, now: datetime, segment_count: int, *, trigger: Trigger, attempt: int = 1,
    scheduled_at: datetime | None = None,
) -> ScheduledExecution:
    """The ``task_schedule`` row for one attempt of ``job`` due at ``due_at``, placed as seen at ``now``."""
    scheduled_at = utc(scheduled_at or due_at)
    bucket, lane = place(due_at, now)
    return ScheduledExecution(
        bucket=bucket,
        segment=segment_of(job.job_id, segment_count),
        lane=lane,
        due_at=utc(due_at),
        job_id=job.job_id,
        execution_id=execution_id_for(job.job_id, scheduled_at, attempt, trigger),
        user_id=job.user_id,
        scheduled_at=scheduled_at,
        attempt=attempt,
        job_version=job.version,
        trigger=trigger,
    )


class JobService:
    def __init__(self, store: JobStore, clock: Clock, rules: JobRules) -> None:
        self._store = store
        self._clock = clock
        self._rules = rules

    def submit(self, user_id: str, new: NewJob) -> Job:
        """Validate ``new`` against the rules and store it with its first run; returns the stored job."""
        now = self._clock.now()
        topic = new.topic or self._rules.default_topic
        if topic not in self._rules.allowed_topics:
            raise InvalidField("topic", f"not an allowed topic; allowed: {sorted(self._rules.allowed_topics)}")
        size = len(json.dumps(new.payload, separators=(",", ":")).encode("utf-8"))
        if size > self._rules.max_payload_bytes:
            raise InvalidField("payload", f"is {size} bytes; the limit is {self._rules.max_payload_bytes}")
        schedule = new.schedule
        if isinstance(schedule, At) and schedule.at < now - AT_PAST_TOLERANCE:
            raise InvalidField("schedule.at", "is in the past")
        if isinstance(schedule, Every):
            schedule = schedule.anchored(now)
        first = schedule.first_fire(now)
        if first is None:
            raise InvalidField("schedule", "never fires")
        job = Job(
            user_id=user_id,
            job_id=str(uuid.uuid4()),
            schedule=schedule,
            payload=new.payload,
            topic=topic,
            created_at=now,
            updated_at=now,
            retry=new.retry,
            next_run_at=first,
        )
        row = plan_execution(job, first, now, self._rules.segment_count, trigger=Trigger.SCHEDULE)
        self._store.create(job, row)
        return job

    def get(self, user_id: str, job_id: str) -> Job:
        job = self._store.get(user_id, job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job

    def executions(self, user_id: str, job_id: str, limit: int = 50) -> list[ExecutionRecord]:
        self.get(user_id, job_id)  # tenancy check: another tenant's job is "not found"
        return self._store.history(job_id, limit)
