"""Request and response bodies. Unknown fields are rejected everywhere (``extra="forbid"``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from jobrunner.domain.jobs import Job, RetryPolicy
from jobrunner.domain.time import rfc3339


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScheduleIn(Strict):
    """Exactly one of ``at``, ``every``, ``cron``, ``iso8601``."""

    at: str | None = Field(None, description="RFC 3339 instant with offset, e.g. 2026-11-22T10:00:00Z")
    every: str | None = Field(None, description="ISO 8601 duration, at least PT10S, e.g. PT5M")
    start: str | None = Field(None, description="with every: first fire (RFC 3339)")
    end: str | None = Field(None, description="with every: no fire after this instant (RFC 3339)")
    cron: str | None = Field(None, description="five-field cron expression")
    timezone: str | None = Field(None, description="with cron: IANA time zone, default UTC")
    iso8601: str | None = Field(None, description="ISO 8601 repeating interval, e.g. R5/2026-11-22T10:00:00Z/PT1H")


class BackoffIn(Strict):
    initial_delay_s: float = Field(10.0, gt=0, le=86_400)
    multiplier: float = Field(2.0, ge=1, le=10)
    max_delay_s: float = Field(300.0, gt=0, le=86_400)


class JobIn(Strict):
    schedule: ScheduleIn
    payload: JsonValue = Field(default_factory=dict, description="any JSON value, size-limited")
    topic: str | None = Field(None, min_length=1, max_length=249)
    max_retries: int = Field(0, ge=0, le=20)
    backoff: BackoffIn | None = None

    def retry_policy(self) -> RetryPolicy:
        backoff = self.backoff or BackoffIn()
        return RetryPolicy(
            max_retries=self.max_retries, initial_delay_s=backoff.initial_delay_s,
            multiplier=backoff.multiplier, max_delay_s=backoff.max_delay_s,
        )


class JobOut(BaseModel):
    job_id: str
    status: str
    schedule: dict[str, Any]
    payload: JsonValue
    topic: str
    max_retries: int
    backoff: BackoffIn
    version: int
    next_run_at: str | None
    last_run_at: str | None
    last_execution_id: str | None
    last_status: str | None
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, job: Job) -> JobOut:
        def ts(value: Any) -> str | None:
            return rfc3339(value) if value is not None else None

        return cls(
            job_id=job.job_id, status=job.status.value, schedule=job.schedule.to_dict(), payload=job.payload,
            topic=job.topic, max_retries=job.retry.max_retries,
            backoff=BackoffIn(initial_delay_s=job.retry.initial_delay_s, multiplier=job.retry.multiplier,
                              max_delay_s=job.retry.max_delay_s),
            version=job.version, next_run_at=ts(job.next_run_at), last_run_at=ts(job.last_run_at),
            last_execution_id=job.last_execution_id,
            last_status=job.last_status.value if job.last_status else None,
            created_at=rfc3339(job.created_at), updated_at=rfc3339(job.updated_at),
        )


class ExecutionOut(BaseModel):
    execution_id: str
    scheduled_at: str
    attempt: int
    status: str
    trigger: str
    due_at: str
    published_at: str | None
    finished_at: str | None
    error: str | None


class ExecutionsOut(BaseModel):
    items: list[ExecutionOut]
    next_cursor: str | None = None


class ErrorDetail(BaseModel):
    field: str
    reason: str


class ErrorOut(BaseModel):
    error: str
    message: str
    errors: list[ErrorDetail] = []
