"""The bodies of the job routes: a job in (``JobIn``, ``JobPatchIn``) and out (``JobOut``), batches, bulk
commands, backfills and runs. Each maps to and from the domain's ``JobSpec``: the rules are the spec's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, JsonValue, StrictBool

from jobrunner.api.schedules import ScheduleIn
from jobrunner.api.schemas.common import Payload, Strict, Tags
from jobrunner.api.schemas.targets import TargetIn, TargetShape, target_of
from jobrunner.domain.jobs import Job, JobStatus
from jobrunner.domain.policies import MAX_CATCH_UP_FIRES, MAX_CATCH_UP_WINDOW_S, CatchUp, Overlap
from jobrunner.domain.spec import (
    MAX_BACKOFF_DELAY_S,
    MAX_DESCRIPTION,
    MAX_JITTER_S,
    MAX_MULTIPLIER,
    MAX_RETRIES,
    MAX_TIMEOUT_S,
    SPEC_FIELDS,
    JobSpec,
    RetryChange,
    RetryPolicy,
    SpecChange,
)
from jobrunner.domain.tags import MAX_TAGS
from jobrunner.domain.time import rfc3339
from jobrunner.services.jobs import MAX_BATCH

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from datetime import datetime


class BackoffIn(Strict):
    initial_delay_s: float = Field(RetryPolicy.initial_delay_s, gt=0, le=MAX_BACKOFF_DELAY_S)
    multiplier: float = Field(RetryPolicy.multiplier, ge=1, le=MAX_MULTIPLIER)
    max_delay_s: float = Field(RetryPolicy.max_delay_s, gt=0, le=MAX_BACKOFF_DELAY_S)


_CALENDAR = (
    "the name of one of the tenant's calendars (PUT /calendars/{name}): a fire on a date it excludes is "
    "not run (recorded SKIPPED); recurring jobs only"
)


OverlapName = Literal["allow_all", "skip", "buffer_one", "buffer_all", "cancel_other"]
_OVERLAP = (
    "what a fire does while the job's previous execution has not reported (Temporal's semantics): "
    "allow_all (run it), skip (record it SKIPPED), buffer_one (hold one, skip the others), buffer_all "
    "(hold each, run them in order), cancel_other (send the workers a cancel for the previous, run it)"
)


class CatchUpIn(Strict):
    """Which missed fires are replayed (a fire is missed when the scan reaches it more than 10 s late): those of the
    last window_s seconds, and of those the latest most; the others are recorded SKIPPED. Neither: all of them."""

    window_s: int | None = Field(
        None, ge=1, le=MAX_CATCH_UP_WINDOW_S, description="only the missed fires of the last this many seconds"
    )
    most: int | None = Field(None, ge=1, le=MAX_CATCH_UP_FIRES, description="only the latest this many missed fires")

    def policy(self) -> CatchUp:
        return CatchUp(window_s=self.window_s, most=self.most)


_DELETE_AFTER_LAST = (
    "delete the job once its schedule has no fire left and its last executions have ended; its "
    "history and change log stay readable until they expire (history_days)"
)


_TARGET = (
    "where its executions are delivered instead of a topic's workers: exactly one of https, lambda or sqs "
    "(docs/targets.md); a job with a target has no topic"
)
_DESCRIPTION = f"a note on the job in your words (what it is for, who to ask), at most {MAX_DESCRIPTION} characters"


class JobIn(Strict):
    schedule: ScheduleIn
    payload: Payload = Field(default_factory=dict, description="any JSON value, size-limited")
    topic: str | None = Field(None, min_length=1, max_length=249,
                              description="an allowed topic; default jobs; none with a target")
    max_retries: int = Field(0, ge=0, le=MAX_RETRIES, description="retries after the first attempt fails")
    backoff: BackoffIn | None = None
    timeout_s: int | None = Field(None, ge=1, le=MAX_TIMEOUT_S, description="an execution not reported by then fails")
    jitter_s: int | None = Field(
        None,
        ge=1,
        le=MAX_JITTER_S,
        description=(
            "each scheduled fire is due up to this many seconds after it, at an offset fixed per job and fire "
            "(spreads jobs that share a fire time); none: at the fire"
        ),
    )
    tags: Tags | None = Field(
        None,
        description=(
            f"key/value labels, at most {MAX_TAGS} (keys: letters, digits, _ . / -); lists and bulk changes select "
            "by them"
        ),
    )
    calendar: str | None = Field(None, min_length=1, max_length=64, description=_CALENDAR)
    delete_after_last: StrictBool = Field(False, description=_DELETE_AFTER_LAST)
    overlap: OverlapName = Field("allow_all", description=_OVERLAP)
    catch_up: CatchUpIn | None = Field(None, description="the misfire policy; none: replay every missed fire")
    description: str | None = Field(None, max_length=MAX_DESCRIPTION, description=_DESCRIPTION)
    target: TargetIn | None = Field(None, description=_TARGET)
    idempotency_key: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        description="same key and tenant within 24 hours: the same job (200), never a second",
    )

    def to_spec(self) -> JobSpec:
        """The job this body asks for (its shape checked here; ``JobSpec.checked`` holds the spec's rules)."""
        backoff = self.backoff or BackoffIn()
        retry = RetryPolicy(
            max_retries=self.max_retries,
            initial_delay_s=backoff.initial_delay_s,
            multiplier=backoff.multiplier,
            max_delay_s=backoff.max_delay_s,
        )
        return JobSpec(**_spec_values(self, set(type(self).model_fields) & set(SPEC_FIELDS)), retry=retry)


#: The spec's fields whose model is not the spec's value: each with what makes the value (the retries, two fields
#: of a body, are mapped by each model itself). Any other field of the spec is taken as the body holds it.
_TO_SPEC: dict[str, Callable[[Any], Any]] = {
    "schedule": lambda schedule: schedule.schedule(),
    "tags": lambda tags: tags or {},
    "overlap": Overlap,
    "catch_up": lambda catch_up: catch_up.policy() if catch_up is not None else CatchUp(),
    "target": lambda target: target_of(target) if target is not None else None,
}


def _spec_values(body: BaseModel, names: Iterable[str]) -> dict[str, Any]:
    """The spec's values of the fields ``names`` of ``body``."""
    return {name: _TO_SPEC.get(name, _same)(getattr(body, name)) for name in names}


def _same(value: Any) -> Any:
    return value


class JobPatchIn(Strict):
    """Only the fields present change; they take effect from the next fire."""

    schedule: ScheduleIn | None = None
    payload: Payload = None
    topic: str | None = Field(None, min_length=1, max_length=249,
                              description="not with a target (remove it, null, to name a topic)")
    max_retries: int | None = Field(None, ge=0, le=MAX_RETRIES)
    backoff: BackoffIn | None = None
    timeout_s: int | None = Field(None, ge=1, le=MAX_TIMEOUT_S)
    jitter_s: int | None = Field(
        None,
        ge=1,
        le=MAX_JITTER_S,
        description=(
            "null to remove; "
            "each scheduled fire is due up to this many seconds after it, at an offset fixed per job and fire "
            "(spreads jobs that share a fire time); none: at the fire"
        ),
    )
    tags: Tags | None = Field(None, description="the job's whole set of tags, replacing its own ({} clears)")
    calendar: str | None = Field(None, min_length=1, max_length=64, description="null to remove; " + _CALENDAR)
    delete_after_last: StrictBool | None = Field(None, description=_DELETE_AFTER_LAST)
    overlap: OverlapName | None = Field(None, description=_OVERLAP)
    catch_up: CatchUpIn | None = Field(None, description="the misfire policy, replacing the job's ({}: replay all)")
    description: str | None = Field(None, max_length=MAX_DESCRIPTION, description="null to remove; " + _DESCRIPTION)
    target: TargetIn | None = Field(None, description=(
        "null to remove (its executions then go to the topic given, or the default one); setting one removes "
        "the job's topic; " + _TARGET))

    def to_change(self) -> SpecChange:
        """The spec's fields this body names (``model_fields_set``), to apply to the job as its change reads it. A
        null is a value only for a field whose null means none (``NULL_CLEARS``); elsewhere it leaves the field."""
        named = {
            name
            for name in self.model_fields_set & set(SPEC_FIELDS)
            if name in NULL_CLEARS or getattr(self, name) is not None
        }
        retry = self._retry_change()
        return SpecChange(**_spec_values(self, named), **({"retry": retry} if retry is not None else {}))

    def _retry_change(self) -> RetryChange | None:
        """What the request changes of the retries: the count if given, the whole backoff if given (its
        fields not given take their defaults, as on a submit); merged with the job by the service."""
        if self.max_retries is None and self.backoff is None:
            return None
        if self.backoff is None:
            return RetryChange(max_retries=self.max_retries)
        b = self.backoff
        return RetryChange(self.max_retries, b.initial_delay_s, b.multiplier, b.max_delay_s)


#: The fields of a PATCH whose null removes what the job has ("null to remove"); a null elsewhere changes nothing.
NULL_CLEARS = frozenset({"payload", "timeout_s", "jitter_s", "calendar", "description", "target"})


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
    topic: str | None = Field(description="null for a job with a target")
    max_retries: int
    backoff: BackoffIn
    timeout_s: int | None
    jitter_s: int | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    calendar: str | None = None
    delete_after_last: bool = False
    overlap: str = "allow_all"
    catch_up: dict[str, int] = Field(default_factory=dict, description="{}: every missed fire is replayed")
    description: str | None = None
    target: TargetShape | None = Field(None, description="where its executions are delivered (null: its topic)")
    remaining_fires: int | None = Field(
        None,
        description=(
            "fires left from the next run to the schedule's end (count or end), on GET /jobs/{id}; null: no end "
            "within 1000 fires"
        ),
    )
    version: int
    next_run_at: str | None
    last_run_at: str | None
    last_execution_id: str | None
    last_status: str | None
    created_at: str
    updated_at: str
    next_runs: list[str] | None = Field(None, description="the next fire times, when asked with ?preview=N")
    excluded_runs: list[ExcludedRunOut] | None = Field(
        None, description="those of next_runs the job's calendar excludes (not run), with why; with ?preview=N"
    )

    @classmethod
    def of(
        cls,
        job: Job,
        next_runs: list[datetime] | None = None,
        excluded: dict[datetime, str] | None = None,
        remaining: int | None = None,
    ) -> JobOut:
        def ts(value: Any) -> str | None:
            return rfc3339(value) if value is not None else None

        spec = job.spec.plain()
        retry = spec.pop("retry")
        return cls(
            **spec,
            max_retries=retry.pop("max_retries"),
            backoff=BackoffIn(**retry),
            job_id=job.job_id,
            state=job.state.value,
            status=job.status.value,
            version=job.version,
            next_run_at=ts(job.next_run_at),
            last_run_at=ts(job.last_run_at),
            last_execution_id=job.last_execution_id,
            last_status=job.last_status.value if job.last_status else None,
            created_at=rfc3339(job.created_at),
            updated_at=rfc3339(job.updated_at),
            next_runs=[rfc3339(t) for t in next_runs] if next_runs is not None else None,
            excluded_runs=[ExcludedRunOut(at=rfc3339(t), reason=why) for t, why in sorted(excluded.items())]
            if excluded is not None
            else None,
            remaining_fires=remaining,
        )


class JobsOut(BaseModel):
    items: list[JobOut]
    next_cursor: str | None = None


class JobsBatchIn(Strict):
    """Several jobs in one request, each exactly as ``POST /jobs`` takes it."""

    jobs: list[JobIn] = Field(
        min_length=1,
        max_length=MAX_BATCH,
        description=(
            f"1 to {MAX_BATCH} jobs; if any is wrong, each wrong field is named (jobs.3.schedule) and none is created"
        ),
    )


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
    queued: int = Field(
        description="executions queued now (0 for a dry run; a fire already backfilled is not queued again)"
    )


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
