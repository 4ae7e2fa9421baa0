"""/jobs: submit, list, change in bulk; one job: read, change, cancel, pause, resume, run now, backfill."""

from __future__ import annotations

from http import HTTPStatus
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from jobrunner import telemetry
from jobrunner.api.routes.common import (
    _KEY_REUSED,
    _OVER_A_LIMIT,
    _TOPIC_NOT_GRANTED,
    JobId,
    _actor,
    _header,
    _json,
    _one,
    _tenant,
    documented,
)
from jobrunner.api.schemas import (
    BackfillIn,
    BackfillOut,
    BatchItemOut,
    BulkFailure,
    BulkIn,
    BulkOut,
    JobIn,
    JobOut,
    JobPatchIn,
    JobsBatchIn,
    JobsBatchOut,
    JobsOut,
    ResumeIn,
    RunOut,
)
from jobrunner.domain.jobs import JobStatus
from jobrunner.domain.schedules import parse_instant
from jobrunner.domain.selection import JobFilter
from jobrunner.domain.time import rfc3339
from jobrunner.domain.tracing import new_traceparent, parse_traceparent
from jobrunner.wiring import container

router = Router()


@router.post("/jobs", responses=documented({201: (JobOut, "created"), 200: (JobOut, "idempotent repeat"),
                                            403: _TOPIC_NOT_GRANTED,
                                            409: _KEY_REUSED, 429: _OVER_A_LIMIT}))
def submit_job(body: Annotated[JobIn, Body()]) -> Response[Any]:
    tenant = _tenant()
    job, created = container().jobs.submit(tenant, body.to_spec(), body.idempotency_key, actor=_actor(),
                                           trace_parent=_trace())
    telemetry.current_span().set_attribute("jobrunner.job_id", job.job_id)
    return _json(HTTPStatus.CREATED if created else HTTPStatus.OK, _one(job))


@router.post("/jobs/batch", responses=documented({
    201: (JobsBatchOut, "created (every job, or some; the others were idempotent repeats)"),
    200: (JobsBatchOut, "every job an idempotent repeat"),
    403: "forbidden: a job's topic is not granted to this tenant (nothing created)", 409: _KEY_REUSED,
    422: "validation_error: jobs wrong: each wrong field named by its item, nothing created",
    429: _OVER_A_LIMIT + "; the rate counts every job of the batch"}))
def submit_jobs(body: Annotated[JobsBatchIn, Body()]) -> Response[Any]:
    """Up to 100 jobs in one request: what loading many one-time jobs should use (one request, and writes
    made together). A 503 may leave the jobs before the failure created: give each an idempotency_key to
    retry safely."""
    items = [(job.to_spec(), job.idempotency_key) for job in body.jobs]
    results = container().jobs.submit_many(_tenant(), items, actor=_actor(), trace_parent=_trace())
    out = JobsBatchOut(items=[BatchItemOut(created=created, job=_one(job)) for job, created in results])
    return _json(HTTPStatus.CREATED if any(created for _, created in results) else HTTPStatus.OK, out)


def _trace() -> str:
    """The trace of the jobs a request submits: its span when tracing is on, else the caller's traceparent, else a
    new one."""
    return (telemetry.current_traceparent() or parse_traceparent(_header(router.current_event.headers, "traceparent"))
            or new_traceparent())


@router.get("/jobs", responses=documented({200: JobsOut}))
def list_jobs(
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
    status: Annotated[JobStatus | None, Query()] = None,
    kind: Annotated[Literal["at", "every", "cron", "iso8601"] | None, Query()] = None,
    tag: Annotated[str | None, Query(max_length=400, description="key:value, or key for any value")] = None,
) -> Response[Any]:
    where = JobFilter.of(status, kind, tag)
    jobs, next_cursor = container().jobs.list_jobs(_tenant(), limit, cursor or None, where=where)
    return _json(HTTPStatus.OK, JobsOut(items=[JobOut.of(j) for j in jobs], next_cursor=next_cursor))


@router.post("/jobs/bulk", responses=documented({200: (BulkOut, "what was done to each job selected")}))
def bulk_change(body: Annotated[BulkIn, Body()]) -> Response[Any]:
    where = JobFilter.of(body.status, body.kind, body.tag)
    result, cursor = container().jobs.bulk(_tenant(), body.action, where, body.limit, body.cursor, actor=_actor())
    failed = [BulkFailure(job_id=job_id, reason=reason) for job_id, reason in result.failed]
    return _json(HTTPStatus.OK, BulkOut(changed=result.changed, unchanged=result.unchanged, failed=failed,
                                        next_cursor=cursor))


@router.get("/jobs/<job_id>", responses=documented({200: JobOut}, 404))
def get_job(job_id: JobId, preview: Annotated[int, Query(ge=0, le=50)] = 0) -> Response[Any]:
    services = container()
    job = services.jobs.get(_tenant(), job_id)
    remaining = services.jobs.fires_left(job)
    if not preview:
        return _json(HTTPStatus.OK, JobOut.of(job, remaining=remaining))  # (as _one)
    fires = services.jobs.preview(job, preview)
    return _json(HTTPStatus.OK, JobOut.of(job, fires, services.jobs.excluded(job, fires), remaining))


@router.patch("/jobs/<job_id>", responses=documented({200: JobOut, 403: _TOPIC_NOT_GRANTED, 429: _OVER_A_LIMIT},
                                                     404, 409))
def change_job(job_id: JobId, body: Annotated[JobPatchIn, Body()]) -> Response[Any]:
    services = container()
    tenant = _tenant()
    return _json(HTTPStatus.OK, _one(services.jobs.change(tenant, job_id, body.to_change(), actor=_actor())))


@router.delete("/jobs/<job_id>", responses=documented({200: JobOut}, 404, 409))
def cancel_job(job_id: JobId) -> Response[Any]:
    return _json(HTTPStatus.OK, _one(container().jobs.cancel(_tenant(), job_id, actor=_actor())))


@router.post("/jobs/<job_id>/pause", responses=documented({200: JobOut}, 404, 409))
def pause_job(job_id: JobId) -> Response[Any]:
    return _json(HTTPStatus.OK, _one(container().jobs.pause(_tenant(), job_id, actor=_actor())))


@router.post("/jobs/<job_id>/resume", responses=documented({200: JobOut}, 404, 409))
def resume_job(job_id: JobId, body: Annotated[ResumeIn | None, Body()] = None) -> Response[Any]:
    catch_up = body.catch_up if body is not None else False
    return _json(HTTPStatus.OK, _one(container().jobs.resume(_tenant(), job_id, catch_up, actor=_actor())))


@router.post("/jobs/<job_id>/run", responses=documented({202: RunOut, 429: _OVER_A_LIMIT}, 404, 409))
def run_job(job_id: JobId) -> Response[Any]:
    row = container().jobs.run_now(_tenant(), job_id, actor=_actor())
    out = RunOut(execution_id=row.execution_id, job_id=row.job_id, due_at=rfc3339(row.due_at),
                 trigger=row.trigger.value)
    return _json(HTTPStatus.ACCEPTED, out)


@router.post("/jobs/<job_id>/backfill", responses=documented({
    200: (BackfillOut, "a dry run: the fires the range holds"), 202: (BackfillOut, "queued"), 429: _OVER_A_LIMIT},
    404, 409))
def backfill_job(job_id: JobId, body: Annotated[BackfillIn, Body()]) -> Response[Any]:
    start, end = parse_instant(body.start, "from"), parse_instant(body.end, "to")
    done = container().jobs.backfill(_tenant(), job_id, start, end, body.dry_run, actor=_actor())
    out = BackfillOut(fires=[rfc3339(f) for f in done.fires], dry_run=body.dry_run, queued=len(done.queued))
    return _json(HTTPStatus.OK if body.dry_run else HTTPStatus.ACCEPTED, out)
