"""What a job did, as the api shows it: its change log, its firing ledger and its executions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from jobrunner.domain.ledger import FireOutcome
from jobrunner.domain.time import rfc3339

if TYPE_CHECKING:
    from jobrunner.domain.changes import JobChange
    from jobrunner.domain.jobs import ExecutionRecord
    from jobrunner.domain.ledger import Fire


class ChangeOut(BaseModel):
    changed_at: str
    actor: str = Field(description="the principal that made the request")
    action: str = Field(description="submit, patch, pause, resume, cancel, run or backfill")
    version: int = Field(description="the job's version after the change")
    details: dict[str, Any]

    @classmethod
    def of(cls, change: JobChange) -> ChangeOut:
        return cls(
            changed_at=rfc3339(change.changed_at),
            actor=change.actor,
            action=change.action,
            version=change.version,
            details=change.details,
        )


class ChangesOut(BaseModel):
    items: list[ChangeOut]
    next_cursor: str | None = None


class FireExecutionOut(BaseModel):
    execution_id: str
    trigger: str
    attempt: int
    status: str
    published_at: str | None


class FireOut(BaseModel):
    at: str = Field(description="the fire: an instant the schedule in effect then called for")
    due_at: str = Field(description="when its execution was due (the fire, or within the job's jitter window)")
    outcome: str = Field(description="what became of it: " + ", ".join(o.value for o in FireOutcome))
    detail: str | None = Field(None, description="why, in words: a skip's reason, the pause or cancel that stopped it")
    lateness_ms: float | None = Field(None, description="published - due, for a fire the schedule published")
    dst: str | None = Field(None, description="what a daylight-saving change did to it (moved, merged, repeated)")
    executions: list[FireExecutionOut] = Field(description="its executions, of every lineage")

    @classmethod
    def of(cls, fire: Fire) -> FireOut:
        return cls(
            at=rfc3339(fire.at),
            due_at=rfc3339(fire.due_at),
            outcome=fire.outcome.value,
            detail=fire.detail,
            lateness_ms=fire.lateness_ms,
            dst=fire.dst,
            executions=[
                FireExecutionOut(
                    execution_id=e.execution_id,
                    trigger=e.trigger.value,
                    attempt=e.attempt,
                    status=e.status.value,
                    published_at=rfc3339(e.published_at) if e.published_at else None,
                )
                for e in fire.executions
            ],
        )


class FiresOut(BaseModel):
    items: list[FireOut]
    next_cursor: str | None = None
    summary: dict[str, int] = Field(description="how many fires of this page had each outcome")
    unaccounted: int = Field(
        description="fires of this page nothing explains (outcome missing): 0 means every "
        "past fire was run once, or was not run for a stated reason"
    )
    notes: list[str] = Field(default_factory=list, description="what the ledger could not take into account")


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

    @classmethod
    def of(cls, r: ExecutionRecord) -> ExecutionOut:
        return cls(
            execution_id=r.execution_id,
            scheduled_at=rfc3339(r.scheduled_at),
            attempt=r.attempt,
            status=r.status.value,
            trigger=r.trigger.value,
            due_at=rfc3339(r.due_at),
            published_at=rfc3339(r.published_at) if r.published_at else None,
            finished_at=rfc3339(r.finished_at) if r.finished_at else None,
            error=r.error,
        )


class ExecutionsOut(BaseModel):
    items: list[ExecutionOut]
    next_cursor: str | None = None
