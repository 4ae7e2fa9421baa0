"""Submitting, reading and managing jobs."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from jobrunner.domain.errors import Conflict, InvalidField, JobNotFound
from jobrunner.domain.jobs import (
    ExecutionRecord,
    Job,
    JobState,
    JobStatus,
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

MAX_TIMEOUT_S = 24 * 3600
#: How many store pages one filtered list request may read before answering (with a cursor).
MAX_PAGES_PER_LIST = 20


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
    timeout_s: int | None = None
    trace_parent: str | None = None

    def fingerprint(self) -> str:
        """Digest of the request, to tell a retried submission from a different one with the same key."""
        body = {"schedule": self.schedule.to_dict(), "payload": self.payload, "topic": self.topic,
                "retry": asdict(self.retry), "timeout_s": self.timeout_s}
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class JobChanges:
    """A PATCH: only the fields given change; they take effect from the next fire."""

    schedule: Schedule | None = None
    payload: Any = None
    payload_set: bool = False
    topic: str | None = None
    retry: RetryPolicy | None = None
    timeout_s: int | None = None
    timeout_set: bool = False


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

    # -- submit ---------------------------------------------------------------------------------

    def submit(self, user_id: str, new: NewJob, idempotency_key: str | None = None) -> tuple[Job, bool]:
        """Validate and store ``new`` with its first run; returns (job, created). With an idempotency key,
        a repeat of the same request returns the job made the first time (created False), and a different
        request with the same key is a conflict."""
        now = self._clock.now()
        topic = self._check_topic(new.topic)
        self._check_payload(new.payload)
        self._check_timeout(new.timeout_s)
        schedule = new.schedule
        if isinstance(schedule, At) and schedule.at < now - AT_PAST_TOLERANCE:
            raise InvalidField("schedule.at", "is more than 5 minutes in the past")
        if isinstance(schedule, Every):
            schedule = schedule.anchored(now)
        first = schedule.first_fire(now)
        if first is None:
            raise InvalidField("schedule", "never fires after now")
        job = Job(
            user_id=user_id, job_id=str(uuid.uuid4()), schedule=schedule, payload=new.payload, topic=topic,
            created_at=now, updated_at=now, retry=new.retry, timeout_s=new.timeout_s, next_run_at=first,
            trace_parent=new.trace_parent,
        )
        if idempotency_key is not None:
            fingerprint = new.fingerprint()
            winner, winner_fingerprint = self._store.claim_idempotency_key(
                user_id, idempotency_key, job.job_id, fingerprint
            )
            if winner != job.job_id:
                if winner_fingerprint != fingerprint:
                    raise Conflict("idempotency_key was already used for a different request")
                existing = self._store.get(user_id, winner)
                if existing is not None:
                    return existing, False
                job = job.with_changes(job_id=winner)  # the first request died before writing: finish it
        self._store.create(job, self._plan(job, first, now, Trigger.SCHEDULE))
        return job, True

    # -- read -----------------------------------------------------------------------------------

    def get(self, user_id: str, job_id: str) -> Job:
        job = self._store.get(user_id, job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job

    def list_jobs(
        self, user_id: str, limit: int, cursor: str | None, status: JobStatus | None = None
    ) -> tuple[list[Job], str | None]:
        """A page of the tenant's jobs, optionally only those in ``status``. A filtered page may hold fewer
        than ``limit`` jobs (even none) and still have a next cursor: keep following it until it is None."""
        if status is None:
            return self._store.list_jobs(user_id, limit, cursor)
        found: list[Job] = []
        for _ in range(MAX_PAGES_PER_LIST):
            page, cursor = self._store.list_jobs(user_id, limit - len(found), cursor)
            found += [job for job in page if job.status is status]
            if cursor is None or len(found) >= limit:
                break
        return found, cursor

    def executions(
        self, user_id: str, job_id: str, limit: int = 50, before: tuple[datetime, int] | None = None
    ) -> list[ExecutionRecord]:
        self.get(user_id, job_id)  # tenancy check: another tenant's job is "not found"
        return self._store.history(job_id, limit, before)

    def preview(self, job: Job, count: int) -> list[datetime]:
        """The next ``count`` fire times of an active job, from its next run."""
        fires: list[datetime] = []
        instant = job.next_run_at
        while instant is not None and len(fires) < count and job.state is JobState.ACTIVE:
            fires.append(instant)
            instant = job.schedule.next_fire_after(instant)
        return fires

    # -- manage ---------------------------------------------------------------------------------

    def cancel(self, user_id: str, job_id: str) -> Job:
        """Cancel: nothing further is published. Rows already planned carry the old version and are
        dropped by their scan, which reads the job just before publishing."""
        job = self.get(user_id, job_id)
        if job.state is JobState.CANCELLED:
            return job
        return self._save(job, state=JobState.CANCELLED, next_run_at=None)

    def pause(self, user_id: str, job_id: str) -> Job:
        job = self._active_or_paused(user_id, job_id)
        if job.state is JobState.PAUSED:
            return job
        return self._save(job, state=JobState.PAUSED, next_run_at=None, paused_at=self._clock.now())

    def resume(self, user_id: str, job_id: str, catch_up: bool = False) -> Job:
        """Resume from the first fire after now; with ``catch_up``, from the first fire after the pause, so
        that the fires missed while paused run one after another."""
        job = self._active_or_paused(user_id, job_id)
        if job.state is JobState.ACTIVE:
            return job
        now = self._clock.now()
        since = (job.paused_at or now) if catch_up else now
        first = job.schedule.next_fire_after(since - timedelta(milliseconds=1) if catch_up else since)
        if first is None:
            raise Conflict("the schedule has no fire left after now; nothing to resume")
        return self._save(job, state=JobState.ACTIVE, next_run_at=first)

    def run_now(self, user_id: str, job_id: str) -> ScheduledExecution:
        """A manual run, due now, recorded in history with trigger MANUAL (allowed on paused jobs)."""
        job = self.get(user_id, job_id)
        if job.state is JobState.CANCELLED:
            raise Conflict("the job is cancelled")
        now = self._clock.now()
        row = self._plan(job, now, now, Trigger.MANUAL)
        self._store.schedule([row])
        return row

    def change(self, user_id: str, job_id: str, changes: JobChanges) -> Job:
        """Apply a PATCH; it takes effect from the next fire (a new schedule starts from now)."""
        job = self.get(user_id, job_id)
        if job.state is JobState.CANCELLED:
            raise Conflict("the job is cancelled")
        now = self._clock.now()
        updates: dict[str, Any] = {}
        if changes.topic is not None:
            updates["topic"] = self._check_topic(changes.topic)
        if changes.payload_set:
            self._check_payload(changes.payload)
            updates["payload"] = changes.payload
        if changes.retry is not None:
            updates["retry"] = changes.retry
        if changes.timeout_set:
            self._check_timeout(changes.timeout_s)
            updates["timeout_s"] = changes.timeout_s
        next_run_at = job.next_run_at
        if changes.schedule is not None:
            schedule = changes.schedule.anchored(now) if isinstance(changes.schedule, Every) else changes.schedule
            next_run_at = schedule.first_fire(now)
            if next_run_at is None or next_run_at < now - AT_PAST_TOLERANCE:
                raise InvalidField("schedule", "never fires after now")
            updates["schedule"] = schedule
        if job.state is JobState.PAUSED:
            next_run_at = None
        return self._save(job, next_run_at=next_run_at, **updates)

    # -- helpers --------------------------------------------------------------------------------

    def _active_or_paused(self, user_id: str, job_id: str) -> Job:
        job = self.get(user_id, job_id)
        if job.state is JobState.CANCELLED:
            raise Conflict("the job is cancelled")
        return job

    def _save(self, job: Job, **changes: Any) -> Job:
        """A new version of ``job`` with its next run (if any) planned under that version."""
        now = self._clock.now()
        updated = job.with_changes(version=job.version + 1, updated_at=now, **changes)
        row = None
        if updated.state is JobState.ACTIVE and updated.next_run_at is not None:
            row = self._plan(updated, updated.next_run_at, now, Trigger.SCHEDULE)
        self._store.update(updated, row)
        return updated

    def _plan(self, job: Job, due_at: datetime, now: datetime, trigger: Trigger) -> ScheduledExecution:
        return plan_execution(job, due_at, now, self._rules.segment_count, trigger=trigger)

    def _check_topic(self, topic: str | None) -> str:
        topic = topic or self._rules.default_topic
        if topic not in self._rules.allowed_topics:
            raise InvalidField("topic", f"not an allowed topic; allowed: {sorted(self._rules.allowed_topics)}")
        return topic

    def _check_payload(self, payload: Any) -> None:
        size = len(json.dumps(payload, separators=(",", ":")).encode("utf-8"))
        if size > self._rules.max_payload_bytes:
            raise InvalidField("payload", f"is {size} bytes; the limit is {self._rules.max_payload_bytes}")

    @staticmethod
    def _check_timeout(timeout_s: int | None) -> None:
        if timeout_s is not None and not 1 <= timeout_s <= MAX_TIMEOUT_S:
            raise InvalidField("timeout_s", f"must be between 1 and {MAX_TIMEOUT_S} seconds")
