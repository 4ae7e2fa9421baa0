"""The HTTP API: one resolver, the routes of each resource included from ``api/routes/``, and the entry point.

Each route is: who is calling, one service call, the response model.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response, content_types

from jobrunner import telemetry
from jobrunner.api import body_limits, errors
from jobrunner.api.resolver import Resolver
from jobrunner.api.routes import calendars, changes, executions, fires, jobs, segments, webhook_secrets
from jobrunner.api.routes.common import _header, _json, documented
from jobrunner.api.schemas import PAYLOAD_LIMIT, ErrorOut, HealthOut
from jobrunner.wiring import container

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

PUBLIC_PATHS = frozenset({"/health", "/openapi.json"})


def edge_refusals(method: str, rule: str) -> dict[int, OpenAPIResponse]:
    """What ``handle`` may answer a route with, whatever the route does (``_respond``): a body the edge
    refuses (400, 413; 415 for a method whose body the api reads, ``body_limits.py``), a parameter or body the
    resolver refuses (422); and, outside ``PUBLIC_PATHS``, no tenant (401) or a backing service down (503)."""
    statuses = [400, 413, 422]
    if method in body_limits.BODY_METHODS:
        statuses.append(415)
    if rule not in PUBLIC_PATHS:
        statuses += [401, 503]
    return errors.refusals(statuses)


app = Resolver(refusals=edge_refusals)
errors.register(app)


@app.get("/health", responses=documented({200: HealthOut}))
def health() -> Response[Any]:
    return _json(HTTPStatus.OK, HealthOut(status="ok"))


@app.get("/openapi.json", include_in_schema=False)
def openapi() -> Response[Any]:
    """The OpenAPI document, generated from the routes and models in this package."""
    return Response(status_code=HTTPStatus.OK, content_type=content_types.APPLICATION_JSON,
                    body=app.get_openapi_json_schema(title="Distributed Job Runner", version="1"))


# In this order: the order of the OpenAPI document's paths.
app.include_router(jobs.router)
app.include_router(changes.router)
app.include_router(fires.router)
app.include_router(executions.router)
app.include_router(calendars.router)
app.include_router(webhook_secrets.router)
app.include_router(segments.router)


#: Sent with every response: browsers then reach the API over HTTPS only, for a year (the gateway's own answers and
#: the CloudFront paths send the same, ``infra/constructs/api.py`` and ``dashboard.py``).
TRANSPORT_HEADERS = {"Strict-Transport-Security": "max-age=31536000"}


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Entry point shared by the Lambda function and the local HTTP server.

    Each request is one SERVER span when tracing is on (``telemetry.py``), a child of the caller's
    ``traceparent``; a job submitted in it keeps that span as the parent of its executions. Every response,
    refusals included, carries ``TRANSPORT_HEADERS``.
    """
    name, attributes = _request_span(event) if telemetry.enabled() else ("", {})
    with telemetry.span(name, parent=_header(event.get("headers"), "traceparent"), kind="server",
                        attributes=attributes) as span:
        response = _respond(event, context)
        response["headers"] = {**(response.get("headers") or {}), **TRANSPORT_HEADERS}
        status = int(response.get("statusCode") or 500)
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            span.fail(f"HTTP {status}")
        return response


def _respond(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Authentication is checked before anything else, so an anonymous caller learns nothing, not
    even whether its body would have been valid. Then, for a request some route serves, the limits on
    its body (``body_limits.py``): too large 413, wrong Content-Type 415, not strict JSON 400. A request no
    route serves is answered before: an unknown route 404 or a wrong method 405 (``errors.unrouted``). The
    resolver does the rest: the route's model validates the body in one pass (422 naming every wrong field).
    """
    caller = container().tenancy.identify(event)
    if event.get("path") not in PUBLIC_PATHS and caller.tenant is None:
        body = ErrorOut(error="unauthenticated", message=caller.refusal).model_dump_json()
        return {"statusCode": 401, "headers": {"Content-Type": "application/json"}, "body": body,
                "isBase64Encoded": False}
    method, path = str(event.get("httpMethod") or "").upper(), str(event.get("path") or "")
    if app.routes.find(method, path) is None:
        # Answered from the route table, which gives a path a static route names (/jobs/batch) to that route
        # only: resolved, GET /jobs/batch would look for the job "batch"
        unrouted = errors.unrouted(app.routes, method, path)
        return {"statusCode": unrouted.status_code, "headers": dict(unrouted.headers), "body": unrouted.body,
                "isBase64Encoded": False}
    rejection = body_limits.check(event)
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
