"""Request and response bodies. Unknown fields are rejected everywhere (``extra="forbid"``)."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue, StrictBool
from pydantic_core import PydanticCustomError

from jobrunner.api.schedules import ScheduleIn, checked_by
from jobrunner.domain.jobs import (
    MAX_BACKOFF_DELAY_S,
    MAX_JITTER_S,
    MAX_RETRIES,
    MAX_TIMEOUT_S,
    ExecutionRecord,
    Job,
    JobStatus,
    RetryChange,
    RetryPolicy,
)
from jobrunner.domain.ledger import FireOutcome
from jobrunner.domain.limits import DEFAULT_MAX_PAYLOAD_BYTES, payload_refusal
from jobrunner.domain.policies import MAX_CATCH_UP_FIRES, MAX_CATCH_UP_WINDOW_S, CatchUp
from jobrunner.domain.tags import MAX_TAGS, parse_tags
from jobrunner.domain.time import rfc3339
from jobrunner.services.jobs import MAX_BATCH

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from jobrunner.domain.calendars import Calendar
    from jobrunner.domain.changes import JobChange
    from jobrunner.domain.ledger import Fire


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _default_limit() -> int:
    return DEFAULT_MAX_PAYLOAD_BYTES


#: The payload limit of the tenant whose request is being validated (``JobService.payload_limit``), set around
#: each request by the api (``app.py``), read only when a body has a payload: the model checks a payload's size
#: with its other fields.
PAYLOAD_LIMIT: ContextVar[Callable[[], int]] = ContextVar("payload_limit", default=_default_limit)


def _within_limit(payload: JsonValue) -> JsonValue:
    refusal = payload_refusal(payload, PAYLOAD_LIMIT.get()())
    if refusal is not None:
        raise PydanticCustomError("too_large", "{reason}", {"reason": refusal})
    return payload


Payload = Annotated[JsonValue, AfterValidator(_within_limit)]
#: A tag's key and value, each checked as the domain checks a job's tags (an error names ``tags.<key>``).
TagKey = Annotated[str, checked_by(lambda key, path: next(iter(parse_tags({key: ""}, path))))]
TagValue = Annotated[str, checked_by(lambda value, path: parse_tags({"key": value}, path)["key"])]
Tags = Annotated[dict[TagKey, TagValue], Field(max_length=MAX_TAGS)]


class BackoffIn(Strict):
    initial_delay_s: float = Field(10.0, gt=0, le=MAX_BACKOFF_DELAY_S)
    multiplier: float = Field(2.0, ge=1, le=10)
    max_delay_s: float = Field(300.0, gt=0, le=MAX_BACKOFF_DELAY_S)


_CALENDAR = ("the name of one of the tenant's calendars (PUT /calendars/{name}): a fire on a date it excludes is "
             "not run (recorded SKIPPED); recurring jobs only")


OverlapName = Literal["allow_all", "skip", "buffer_one", "buffer_all", "cancel_other"]
_OVERLAP = ("what a fire does while the job's previous execution has not reported (Temporal's semantics): "
            "allow_all (run it), skip (record it SKIPPED), buffer_one (hold one, skip the others), buffer_all "
            "(hold each, run them in order), cancel_other (send the workers a cancel for the previous, run it)")


class CatchUpIn(Strict):
    """Which missed fires are replayed (a fire is missed when the scan reaches it more than 10 s late): those of the
    last window_s seconds, and of those the latest most; the others are recorded SKIPPED. Neither: all of them."""

    window_s: int | None = Field(None, ge=1, le=MAX_CATCH_UP_WINDOW_S, description="only the missed fires of "
                                                                                   "the last this many seconds")
    most: int | None = Field(None, ge=1, le=MAX_CATCH_UP_FIRES, description="only the latest this many missed fires")

    def policy(self) -> CatchUp:
        return CatchUp(window_s=self.window_s, most=self.most)


_DELETE_AFTER_LAST = ("delete the job once its schedule has no fire left and its last executions have ended; its "
                      "history and change log stay readable until they expire (history_days)")


class JobIn(Strict):
    schedule: ScheduleIn
    payload: Payload = Field(default_factory=dict, description="any JSON value, size-limited")
    topic: str | None = Field(None, min_length=1, max_length=249, description="an allowed topic; default jobs")
    max_retries: int = Field(0, ge=0, le=MAX_RETRIES, description="retries after the first attempt fails")
    backoff: BackoffIn | None = None
    timeout_s: int | None = Field(None, ge=1, le=MAX_TIMEOUT_S, description="an execution not reported by then fails")
    jitter_s: int | None = Field(None, ge=1, le=MAX_JITTER_S, description=(
        "each scheduled fire is due up to this many seconds after it, at an offset fixed per job and fire "
        "(spreads jobs that share a fire time); none: at the fire"))
    tags: Tags | None = Field(None, description=(
        f"key/value labels, at most {MAX_TAGS} (keys: letters, digits, _ . / -); lists and bulk changes select "
        "by them"))
    calendar: str | None = Field(None, min_length=1, max_length=64, description=_CALENDAR)
    delete_after_last: StrictBool = Field(False, description=_DELETE_AFTER_LAST)
    overlap: OverlapName = Field("allow_all", description=_OVERLAP)
    catch_up: CatchUpIn | None = Field(None, description="the misfire policy; none: replay every missed fire")
    idempotency_key: str | None = Field(
        None, min_length=1, max_length=128,
        description="same key and tenant within 24 hours: the same job (200), never a second",
    )

    def retry_policy(self) -> RetryPolicy:
        return _retry(self.max_retries, self.backoff)


def _retry(max_retries: int, backoff: BackoffIn | None) -> RetryPolicy:
    backoff = backoff or BackoffIn()
    return RetryPolicy(
        max_retries=max_retries, initial_delay_s=backoff.initial_delay_s,
        multiplier=backoff.multiplier, max_delay_s=backoff.max_delay_s,
    )


class JobPatchIn(Strict):
    """Only the fields present change; they take effect from the next fire."""

    schedule: ScheduleIn | None = None
    payload: Payload = None
    topic: str | None = Field(None, min_length=1, max_length=249)
    max_retries: int | None = Field(None, ge=0, le=MAX_RETRIES)
    backoff: BackoffIn | None = None
    timeout_s: int | None = Field(None, ge=1, le=MAX_TIMEOUT_S)
    jitter_s: int | None = Field(None, ge=1, le=MAX_JITTER_S, description=(
        "null to remove; "
        "each scheduled fire is due up to this many seconds after it, at an offset fixed per job and fire "
        "(spreads jobs that share a fire time); none: at the fire"))
    tags: Tags | None = Field(None, description="the job's whole set of tags, replacing its own ({} clears)")
    calendar: str | None = Field(None, min_length=1, max_length=64, description="null to remove; " + _CALENDAR)
    delete_after_last: StrictBool | None = Field(None, description=_DELETE_AFTER_LAST)
    overlap: OverlapName | None = Field(None, description=_OVERLAP)
    catch_up: CatchUpIn | None = Field(None, description="the misfire policy, replacing the job's ({}: replay all)")

    def retry_change(self) -> RetryChange | None:
        """What the request changes of the retries: the count if given, the whole backoff if given (its
        fields not given take their defaults, as on a submit); merged with the job by the service."""
        if self.max_retries is None and self.backoff is None:
            return None
        if self.backoff is None:
            return RetryChange(max_retries=self.max_retries)
        b = self.backoff
        return RetryChange(self.max_retries, b.initial_delay_s, b.multiplier, b.max_delay_s)


class ResumeIn(Strict):
    catch_up: StrictBool = Field(False, description="run the fires missed while paused, one after another")


class ExcludedRunOut(BaseModel):
    at: str
    reason: str


class JobOut(BaseModel):
    job_id: str
    state: str
    status: str
    schedule: dict[str, Any]
    payload: JsonValue
    topic: str
    max_retries: int
    backoff: BackoffIn
    timeout_s: int | None
    jitter_s: int | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    calendar: str | None = None
    delete_after_last: bool = False
    overlap: str = "allow_all"
    catch_up: dict[str, int] = Field(default_factory=dict, description="{}: every missed fire is replayed")
    remaining_fires: int | None = Field(None, description=(
        "fires left from the next run to the schedule's end (count or end), on GET /jobs/{id}; null: no end "
        "within 1000 fires"))
    version: int
    next_run_at: str | None
    last_run_at: str | None
    last_execution_id: str | None
    last_status: str | None
    created_at: str
    updated_at: str
    next_runs: list[str] | None = Field(None, description="the next fire times, when asked with ?preview=N")
    excluded_runs: list[ExcludedRunOut] | None = Field(
        None, description="those of next_runs the job's calendar excludes (not run), with why; with ?preview=N")

    @classmethod
    def of(cls, job: Job, next_runs: list[datetime] | None = None,
           excluded: dict[datetime, str] | None = None, remaining: int | None = None) -> JobOut:
        def ts(value: Any) -> str | None:
            return rfc3339(value) if value is not None else None

        return cls(
            job_id=job.job_id, state=job.state.value, status=job.status.value, timeout_s=job.timeout_s,
            jitter_s=job.jitter_s, tags=job.tags,
            schedule=job.schedule.to_dict(), payload=job.payload,
            topic=job.topic, max_retries=job.retry.max_retries,
            backoff=BackoffIn(initial_delay_s=job.retry.initial_delay_s, multiplier=job.retry.multiplier,
                              max_delay_s=job.retry.max_delay_s),
            version=job.version, next_run_at=ts(job.next_run_at), last_run_at=ts(job.last_run_at),
            last_execution_id=job.last_execution_id,
            last_status=job.last_status.value if job.last_status else None,
            created_at=rfc3339(job.created_at), updated_at=rfc3339(job.updated_at),
            next_runs=[rfc3339(t) for t in next_runs] if next_runs is not None else None,
            excluded_runs=[ExcludedRunOut(at=rfc3339(t), reason=why) for t, why in sorted(excluded.items())]
            if excluded is not None else None, calendar=job.calendar, delete_after_last=job.delete_after_last,
            overlap=job.overlap.value, catch_up=job.catch_up.to_dict(),
            remaining_fires=remaining,
        )


class JobsOut(BaseModel):
    items: list[JobOut]
    next_cursor: str | None = None


class JobsBatchIn(Strict):
    """Several jobs in one request, each exactly as ``POST /jobs`` takes it."""

    jobs: list[JobIn] = Field(min_length=1, max_length=MAX_BATCH, description=(
        f"1 to {MAX_BATCH} jobs; if any is wrong, each wrong field is named (jobs.3.schedule) and none is created"))


class BatchItemOut(BaseModel):
    created: bool = Field(description="false: the job an earlier request with the same idempotency_key made")
    job: JobOut


class JobsBatchOut(BaseModel):
    items: list[BatchItemOut] = Field(description="one per job sent, in the same order")


class BackfillIn(Strict):
    """The past fires of the job's schedule in [from, to] to run now (or, with dry_run, to list)."""

    start: str = Field(alias="from", description="RFC 3339 instant: the first fire considered")
    end: str = Field(alias="to", description="RFC 3339 instant, not in the future: the last fire considered")
    dry_run: StrictBool = Field(False, description="list the fires without running them")


class BackfillOut(BaseModel):
    fires: list[str]
    dry_run: bool
    queued: int = Field(description="executions queued now (0 for a dry run; a fire already backfilled is not "
                                    "queued again)")


class ChangeOut(BaseModel):
    changed_at: str
    actor: str = Field(description="the principal that made the request")
    action: str = Field(description="submit, patch, pause, resume, cancel, run or backfill")
    version: int = Field(description="the job's version after the change")
    details: dict[str, Any]

    @classmethod
    def of(cls, change: JobChange) -> ChangeOut:
        return cls(changed_at=rfc3339(change.changed_at), actor=change.actor, action=change.action,
                   version=change.version, details=change.details)


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
            at=rfc3339(fire.at), due_at=rfc3339(fire.due_at), outcome=fire.outcome.value, detail=fire.detail,
            lateness_ms=fire.lateness_ms, dst=fire.dst,
            executions=[FireExecutionOut(execution_id=e.execution_id, trigger=e.trigger.value, attempt=e.attempt,
                                         status=e.status.value,
                                         published_at=rfc3339(e.published_at) if e.published_at else None)
                        for e in fire.executions],
        )


class FiresOut(BaseModel):
    items: list[FireOut]
    next_cursor: str | None = None
    summary: dict[str, int] = Field(description="how many fires of this page had each outcome")
    unaccounted: int = Field(description="fires of this page nothing explains (outcome missing): 0 means every "
                                         "past fire was run once, or was not run for a stated reason")
    notes: list[str] = Field(default_factory=list, description="what the ledger could not take into account")


class ExclusionIn(Strict):
    """Exactly a date, or from and to (both dates, whole days included; or both local date-times
    YYYY-MM-DDTHH:MM[:SS], from included, to excluded), on the calendar's wall clock."""

    date: str | None = Field(None, description="a whole local day, YYYY-MM-DD")
    start: str | None = Field(None, alias="from", description="YYYY-MM-DD, or YYYY-MM-DDTHH:MM[:SS] (local)")
    end: str | None = Field(None, alias="to", description="YYYY-MM-DD (included), or YYYY-MM-DDTHH:MM[:SS] (excluded)")
    note: str | None = Field(None, max_length=200, description="in words: Christmas, release freeze, ...")

    def as_dict(self) -> dict[str, str]:
        return {k: v for k, v in (("date", self.date), ("from", self.start), ("to", self.end), ("note", self.note))
                if v is not None}


class CalendarIn(Strict):
    """A calendar of excluded dates and ranges in a time zone; a PUT replaces the calendar whole."""

    timezone: str = Field("UTC", max_length=64, description="IANA time zone the dates and times are read in")
    exclude: list[ExclusionIn] = Field(default_factory=list, max_length=1000)
    description: str | None = Field(None, max_length=500)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"timezone": self.timezone, "exclude": [e.as_dict() for e in self.exclude]}
        if self.description is not None:
            out["description"] = self.description
        return out


class CalendarOut(BaseModel):
    name: str
    timezone: str
    exclude: list[dict[str, str]]
    description: str | None = None
    updated_at: str | None = None

    @classmethod
    def of(cls, calendar: Calendar) -> CalendarOut:
        data = calendar.to_dict()
        return cls(name=calendar.name, timezone=calendar.timezone, exclude=data["exclude"],
                   description=calendar.description,
                   updated_at=rfc3339(calendar.updated_at) if calendar.updated_at else None)


class CalendarsOut(BaseModel):
    items: list[CalendarOut]
    next_cursor: str | None = None


class BulkIn(Strict):
    """Pause, resume or cancel the jobs a tag (and optionally a status and a kind) selects, a page at a time."""

    action: Literal["pause", "resume", "cancel"]
    tag: str = Field(min_length=1, max_length=400, description="key:value (or key: any value)")
    status: JobStatus | None = None
    kind: Literal["at", "every", "cron", "iso8601"] | None = None
    limit: int = Field(100, ge=1, le=500, description="jobs selected per request")
    cursor: str | None = Field(None, max_length=2048, description="the next_cursor of the previous request")


class BulkFailure(BaseModel):
    job_id: str
    reason: str


class BulkOut(BaseModel):
    changed: list[str]
    unchanged: list[str]
    failed: list[BulkFailure]
    next_cursor: str | None = Field(None, description="more jobs may match: send the request again with it")


class RunOut(BaseModel):
    execution_id: str
    job_id: str
    due_at: str
    trigger: str


class SegmentOut(BaseModel):
    segment: int
    watermark: str | None
    lag_s: float | None
    last_heartbeat: str | None
    last_owner: str | None
    published_total: int
    healthy: bool
    #: A segment above the configured count, still scanned for rows written under a larger count.
    retired: bool = False
    #: Partitions of the segment whose scans kept failing, retried with backoff until done.
    parked: int = 0


class SegmentsOut(BaseModel):
    items: list[SegmentOut]


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
            execution_id=r.execution_id, scheduled_at=rfc3339(r.scheduled_at), attempt=r.attempt,
            status=r.status.value, trigger=r.trigger.value, due_at=rfc3339(r.due_at),
            published_at=rfc3339(r.published_at) if r.published_at else None,
            finished_at=rfc3339(r.finished_at) if r.finished_at else None, error=r.error,
        )


class ExecutionsOut(BaseModel):
    items: list[ExecutionOut]
    next_cursor: str | None = None


class HealthOut(BaseModel):
    status: Literal["ok"]


class ErrorDetail(BaseModel):
    field: str
    reason: str


class ErrorOut(BaseModel):
    error: str
    message: str
    errors: list[ErrorDetail] = []
