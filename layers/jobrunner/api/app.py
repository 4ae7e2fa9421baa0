"""Routes of the HTTP API. Each route is: who is calling, one service call, the response model."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from http import HTTPStatus
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from pydantic import BaseModel

from jobrunner import telemetry
from jobrunner.api import body_limits, errors
from jobrunner.api.cursors import (
    MAX_CURSOR_LENGTH,
    decode_change_cursor,
    decode_execution_cursor,
    decode_fire_cursor,
    encode_change_cursor,
    encode_execution_cursor,
    encode_fire_cursor,
)
from jobrunner.api.resolver import Resolver
from jobrunner.api.schemas import (
    PAYLOAD_LIMIT,
    BackfillIn,
    BackfillOut,
    BatchItemOut,
    BulkFailure,
    BulkIn,
    BulkOut,
    CalendarIn,
    CalendarOut,
    CalendarsOut,
    ChangeOut,
    ChangesOut,
    ErrorOut,
    ExecutionOut,
    ExecutionsOut,
    FireOut,
    FiresOut,
    JobIn,
    JobOut,
    JobPatchIn,
    JobsBatchIn,
    JobsBatchOut,
    JobsOut,
    ResumeIn,
    RunOut,
    SegmentOut,
    SegmentsOut,
)
from jobrunner.domain.errors import DomainError, Forbidden
from jobrunner.domain.jobs import Job, JobStatus
from jobrunner.domain.ledger import MAX_FIRES_PER_PAGE
from jobrunner.domain.policies import CatchUp, Overlap
from jobrunner.domain.schedules import parse_instant
from jobrunner.domain.tags import JobFilter
from jobrunner.domain.time import rfc3339
from jobrunner.domain.tracing import new_traceparent, parse_traceparent
from jobrunner.services.jobs import JobChanges, NewJob
from jobrunner.wiring import container

app = Resolver()
errors.register(app)

JobId = Annotated[str, Path(min_length=1, max_length=64)]
PUBLIC_PATHS = frozenset({"/health", "/openapi.json"})


class Unauthenticated(DomainError):
    pass


def _tenant() -> str:
    tenant = container().tenancy.tenant_of(app.current_event.raw_event)
    if tenant is None:  # handle() refuses these first; this keeps the type honest
        raise Unauthenticated
    return tenant


def _actor() -> str | None:
    """Who makes the request, for the change log: the caller's principal (``api/tenancy.py``)."""
    return container().tenancy.identify(app.current_event.raw_event).principal


def _one(job: Job) -> JobOut:
    """A job answered alone (not in a list): with the fires it has left (``JobService.fires_left``)."""
    return JobOut.of(job, remaining=container().jobs.fires_left(job))


def _json(status: HTTPStatus, body: BaseModel) -> Response[Any]:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body.model_dump_json())


@app.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


@app.get("/openapi.json", include_in_schema=False)
def openapi() -> Response[Any]:
    """The OpenAPI document, generated from the routes and models in this package."""
    return Response(status_code=HTTPStatus.OK, content_type=content_types.APPLICATION_JSON,
                    body=app.get_openapi_json_schema(title="Distributed Job Runner", version="1"))


#: The 429 every request that may take from a tenant's limits documents (``domain/limits.py``).
_OVER_A_LIMIT = ("over one of the tenant's limits, named in the body (submissions_per_second, jobs_held, "
                 "executions_per_minute); see Retry-After")


@app.post("/jobs", responses={201: {"description": "created"}, 200: {"description": "idempotent repeat"},
                              403: {"description": "the topic is not granted to this tenant"},
                              429: {"description": _OVER_A_LIMIT}})
def submit_job(body: Annotated[JobIn, Body()]) -> Response[Any]:
    tenant = _tenant()
    job, created = container().jobs.submit(tenant, _new_job(body), body.idempotency_key, actor=_actor())
    telemetry.current_span().set_attribute("jobrunner.job_id", job.job_id)
    return _json(HTTPStatus.CREATED if created else HTTPStatus.OK, _one(job))


@app.post("/jobs/batch", responses={
    201: {"description": "created (every job, or some; the others were idempotent repeats)"},
    200: {"description": "every job an idempotent repeat"},
    403: {"description": "a job's topic is not granted to this tenant (nothing created)"},
    422: {"description": "jobs wrong: each wrong field named by its item, nothing created"},
    429: {"description": _OVER_A_LIMIT + "; the rate counts every job of the batch"}})
def submit_jobs(body: Annotated[JobsBatchIn, Body()]) -> Response[Any]:
    """Up to 100 jobs in one request: what loading many one-time jobs should use (one request, and writes
    made together). A 503 may leave the jobs before the failure created: give each an idempotency_key to
    retry safely."""
    items = [(_new_job(job), job.idempotency_key) for job in body.jobs]
    results = container().jobs.submit_many(_tenant(), items, actor=_actor())
    out = JobsBatchOut(items=[BatchItemOut(created=created, job=_one(job)) for job, created in results])
    return _json(HTTPStatus.CREATED if any(created for _, created in results) else HTTPStatus.OK, out)


def _new_job(body: JobIn) -> NewJob:
    """The job ``body`` asks for, from what its model validated (nothing is parsed again)."""
    schedule = body.schedule.schedule()
    # The job's trace: this request's span when tracing is on, else the caller's traceparent, else a new one.
    trace = (telemetry.current_traceparent() or parse_traceparent(_header(app.current_event.headers, "traceparent"))
             or new_traceparent())
    return NewJob(schedule=schedule, payload=body.payload, topic=body.topic, retry=body.retry_policy(),
                  timeout_s=body.timeout_s, trace_parent=trace, jitter_s=body.jitter_s, tags=body.tags or {},
                  calendar=body.calendar, delete_after_last=body.delete_after_last, overlap=Overlap(body.overlap),
                  catch_up=body.catch_up.policy() if body.catch_up else CatchUp())


@app.get("/jobs")
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


@app.post("/jobs/bulk", responses={200: {"description": "what was done to each job selected"}})
def bulk_change(body: Annotated[BulkIn, Body()]) -> Response[Any]:
    where = JobFilter.of(body.status, body.kind, body.tag)
    result, cursor = container().jobs.bulk(_tenant(), body.action, where, body.limit, body.cursor, actor=_actor())
    failed = [BulkFailure(job_id=job_id, reason=reason) for job_id, reason in result.failed]
    return _json(HTTPStatus.OK, BulkOut(changed=result.changed, unchanged=result.unchanged, failed=failed,
                                        next_cursor=cursor))


@app.get("/jobs/<job_id>")
def get_job(job_id: JobId, preview: Annotated[int, Query(ge=0, le=50)] = 0) -> Response[Any]:
    services = container()
    job = services.jobs.get(_tenant(), job_id)
    remaining = services.jobs.fires_left(job)
    if not preview:
        return _json(HTTPStatus.OK, JobOut.of(job, remaining=remaining))  # (as _one)
    fires = services.jobs.preview(job, preview)
    return _json(HTTPStatus.OK, JobOut.of(job, fires, services.jobs.excluded(job, fires), remaining))


@app.patch("/jobs/<job_id>", responses={403: {"description": "the topic is not granted to this tenant"},
                                       429: {"description": _OVER_A_LIMIT}})
def change_job(job_id: JobId, body: Annotated[JobPatchIn, Body()]) -> Response[Any]:
    services = container()
    tenant = _tenant()
    current = services.jobs.get(tenant, job_id)
    changes = JobChanges(
        schedule=body.schedule.schedule() if body.schedule else None,
        payload=body.payload, payload_set="payload" in body.model_fields_set, topic=body.topic,
        retry=body.retry_policy(current.retry), timeout_s=body.timeout_s,
        timeout_set="timeout_s" in body.model_fields_set,
        jitter_s=body.jitter_s, jitter_set="jitter_s" in body.model_fields_set, tags=body.tags,
        calendar=body.calendar, calendar_set="calendar" in body.model_fields_set,
        delete_after_last=body.delete_after_last, overlap=Overlap(body.overlap) if body.overlap else None,
        catch_up=body.catch_up.policy() if body.catch_up is not None else None,
    )
    return _json(HTTPStatus.OK, _one(services.jobs.change(tenant, job_id, changes, actor=_actor())))


@app.delete("/jobs/<job_id>")
def cancel_job(job_id: JobId) -> Response[Any]:
    return _json(HTTPStatus.OK, _one(container().jobs.cancel(_tenant(), job_id, actor=_actor())))


@app.post("/jobs/<job_id>/pause")
def pause_job(job_id: JobId) -> Response[Any]:
    return _json(HTTPStatus.OK, _one(container().jobs.pause(_tenant(), job_id, actor=_actor())))


@app.post("/jobs/<job_id>/resume")
def resume_job(job_id: JobId, body: Annotated[ResumeIn | None, Body()] = None) -> Response[Any]:
    catch_up = body.catch_up if body is not None else False
    return _json(HTTPStatus.OK, _one(container().jobs.resume(_tenant(), job_id, catch_up, actor=_actor())))


@app.post("/jobs/<job_id>/run", responses={429: {"description": _OVER_A_LIMIT}})
def run_job(job_id: JobId) -> Response[Any]:
    row = container().jobs.run_now(_tenant(), job_id, actor=_actor())
    out = RunOut(execution_id=row.execution_id, job_id=row.job_id, due_at=rfc3339(row.due_at),
                 trigger=row.trigger.value)
    return _json(HTTPStatus.ACCEPTED, out)


@app.post("/jobs/<job_id>/backfill", responses={429: {"description": _OVER_A_LIMIT}})
def backfill_job(job_id: JobId, body: Annotated[BackfillIn, Body()]) -> Response[Any]:
    start, end = parse_instant(body.start, "from"), parse_instant(body.end, "to")
    done = container().jobs.backfill(_tenant(), job_id, start, end, body.dry_run, actor=_actor())
    out = BackfillOut(fires=[rfc3339(f) for f in done.fires], dry_run=body.dry_run, queued=len(done.queued))
    return _json(HTTPStatus.OK if body.dry_run else HTTPStatus.ACCEPTED, out)


@app.get("/jobs/<job_id>/changes",
         description="The job's change log, newest first: who (the caller's principal) asked for each change "
                     "that landed, what, and when; kept as long as its history (history_days).")
def list_changes(
    job_id: JobId,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=MAX_CURSOR_LENGTH)] = None,
) -> Response[Any]:
    before = decode_change_cursor(cursor) if cursor else None
    entries = container().jobs.changes(_tenant(), job_id, limit, before)
    last = entries[-1] if len(entries) == limit else None
    next_cursor = encode_change_cursor(last.changed_at, last.change_id) if last else None
    return _json(HTTPStatus.OK, ChangesOut(items=[ChangeOut.of(e) for e in entries], next_cursor=next_cursor))


@app.get("/jobs/<job_id>/fires",
         responses={200: {"description": "a page of the ledger",
                          "content": {"application/json": {"model": FiresOut}}}},
         description="The job's firing ledger: each fire its schedule called for in [from, to] (oldest first) and "
                     "what became of it: published (with its lateness), caught up, skipped, held, dropped, excluded, "
                     "paused, cancelled, replaced, backfilled, due, upcoming, expired, or missing when nothing "
                     "explains it. Computed from the schedule, the history and the change log (docs/schedules.md).")
def list_fires(
    job_id: JobId,
    start: Annotated[str | None, Query(alias="from", max_length=64,
                                       description="RFC 3339; default: a day before to")] = None,
    end: Annotated[str | None, Query(alias="to", max_length=64, description="RFC 3339; default: now")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_FIRES_PER_PAGE)] = 100,
    cursor: Annotated[str | None, Query(max_length=64)] = None,
) -> Response[Any]:
    services = container()
    high = parse_instant(end, "to") if end else services.clock.now()
    low = parse_instant(start, "from") if start else high - timedelta(days=1)
    after = decode_fire_cursor(cursor) if cursor else None
    page = services.jobs.fires(_tenant(), job_id, low, high, limit, after)
    out = FiresOut(items=[FireOut.of(f) for f in page.fires], summary=page.summary, unaccounted=page.unaccounted,
                   notes=list(page.notes),
                   next_cursor=encode_fire_cursor(page.more_after) if page.more_after is not None else None)
    return _json(HTTPStatus.OK, out)


@app.get("/jobs/<job_id>/executions",
         description="The job's execution history, newest first. Each record is kept 30 days from its last write "
                     "(its result, for a finished execution), or the tenant's history_days (domain/limits.py).")
def list_executions(
    job_id: JobId,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=MAX_CURSOR_LENGTH)] = None,
) -> Response[Any]:
    before = decode_execution_cursor(cursor) if cursor else None
    records = container().jobs.executions(_tenant(), job_id, limit, before)
    next_cursor = encode_execution_cursor(records[-1]) if len(records) == limit else None
    return _json(HTTPStatus.OK, ExecutionsOut(items=[ExecutionOut.of(r) for r in records], next_cursor=next_cursor))


CalendarName = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]


@app.put("/calendars/<name>", responses={201: {"description": "created"}, 200: {"description": "replaced"}},
         description="Create or replace one of the tenant's calendars of excluded dates and ranges. A change applies "
                     "to every fire not yet published (the scans read it again within 10 s); docs/schedules.md.")
def put_calendar(name: CalendarName, body: Annotated[CalendarIn, Body()]) -> Response[Any]:
    calendar, created = container().calendar_admin.put(_tenant(), name, body.as_dict())
    return _json(HTTPStatus.CREATED if created else HTTPStatus.OK, CalendarOut.of(calendar))


@app.get("/calendars/<name>")
def get_calendar(name: CalendarName) -> Response[Any]:
    return _json(HTTPStatus.OK, CalendarOut.of(container().calendar_admin.get(_tenant(), name)))


@app.get("/calendars")
def list_calendars(
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    cursor: Annotated[str | None, Query(max_length=64)] = None,
) -> Response[Any]:
    calendars, next_cursor = container().calendar_admin.list(_tenant(), limit, cursor or None)
    return _json(HTTPStatus.OK, CalendarsOut(items=[CalendarOut.of(c) for c in calendars], next_cursor=next_cursor))


@app.delete("/calendars/<name>", responses={204: {"description": "deleted"},
                                           409: {"description": "a job that is not cancelled still names it"}})
def delete_calendar(name: CalendarName) -> Response[Any]:
    container().calendar_admin.delete(_tenant(), name)
    return Response(status_code=HTTPStatus.NO_CONTENT, content_type=content_types.APPLICATION_JSON, body="")


@app.get("/segments", responses={403: {"description": "the caller is not an operator"}})
def list_segments() -> Response[Any]:
    """Every segment's progress, across all tenants: an operator view (``JOBRUNNER_OPERATORS``)."""
    if not container().tenancy.is_operator(_tenant()):
        raise Forbidden("segments", "an operator view, and this tenant is not an operator")
    items = [
        SegmentOut(
            segment=h.segment, watermark=rfc3339(h.watermark) if h.watermark else None, lag_s=h.lag_s,
            last_heartbeat=rfc3339(h.last_heartbeat) if h.last_heartbeat else None, last_owner=h.last_owner,
            published_total=h.published_total, healthy=h.healthy, retired=h.retired, parked=h.parked,
        )
        for h in container().segments.health()
    ]
    return _json(HTTPStatus.OK, SegmentsOut(items=items))


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Entry point shared by the Lambda function and the local HTTP server.

    Each request is one SERVER span when tracing is on (``telemetry.py``), a child of the caller's
    ``traceparent``; a job submitted in it keeps that span as the parent of its executions.
    """
    name, attributes = _request_span(event) if telemetry.enabled() else ("", {})
    with telemetry.span(name, parent=_header(event.get("headers"), "traceparent"), kind="server",
                        attributes=attributes) as span:
        response = _respond(event, context)
        status = int(response.get("statusCode") or 500)
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            span.fail(f"HTTP {status}")
        return response


def _respond(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Authentication is checked before anything else, so an anonymous caller learns nothing, not
    even whether its body would have been valid. Then, for a request some route serves, the limits on
    its body (``body_limits.py``): too large 413, wrong Content-Type 415, not strict JSON 400. The resolver
    does the rest: an unknown route 404 or a wrong method 405 (``errors.no_route``), then the route's
    model validates the body in one pass (422 naming every wrong field).
    """
    caller = container().tenancy.identify(event)
    if event.get("path") not in PUBLIC_PATHS and caller.tenant is None:
        body = ErrorOut(error="unauthenticated", message=caller.refusal).model_dump_json()
        return {"statusCode": 401, "headers": {"Content-Type": "application/json"}, "body": body,
                "isBase64Encoded": False}
    routed = app.routes.find(str(event.get("httpMethod") or "").upper(), str(event.get("path") or ""))
    rejection = body_limits.check(event) if routed is not None else None
    if rejection is not None:
        return rejection.response()
    tenant = caller.tenant
    limit = PAYLOAD_LIMIT.set((lambda: container().jobs.payload_limit(tenant)) if tenant else PAYLOAD_LIMIT.get())
    try:
        return app.resolve(body_limits.normalized(event), context)
    finally:
        PAYLOAD_LIMIT.reset(limit)


def _request_span(event: dict[str, Any]) -> tuple[str, dict[str, telemetry.AttributeValue]]:
    """The name ("POST /jobs/<job_id>/run", the route's template) and attributes of a request's span."""
    method, path = str(event.get("httpMethod") or ""), str(event.get("path") or "")
    attributes: dict[str, telemetry.AttributeValue] = {"http.request.method": method, "url.path": path}
    if (tenant := container().tenancy.tenant_of(event)) is not None:
        attributes["jobrunner.tenant"] = tenant
    route = app.routes.find(method, path)
    if route is None:
        return method, attributes
    template, parameters = route
    attributes["http.route"] = template
    if "job_id" in parameters:
        attributes["jobrunner.job_id"] = parameters["job_id"]
    return f"{method} {template}", attributes


def _header(headers: Mapping[str, Any] | None, name: str) -> str | None:
    return next((str(v) for k, v in (headers or {}).items() if k.lower() == name), None)
