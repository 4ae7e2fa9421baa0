"""Errors -> HTTP responses, in one place, and how the OpenAPI document lists them. Every error body is
``ErrorOut`` JSON.

A request body is validated once, by its Pydantic model (``schemas.py``), which collects every wrong field:
``invalid_request`` answers them all together, each named by its dotted path."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from jobrunner.api.schedules import TAGS
from jobrunner.api.schemas import ErrorDetail, ErrorOut
from jobrunner.api.schemas.targets import RULE_ERROR, TARGET_TAGS
from jobrunner.domain.errors import (
    Conflict,
    Forbidden,
    InvalidField,
    InvalidFields,
    JobNotFound,
    LimitReached,
    NotFound,
    Unavailable,
)
from jobrunner.domain.schedules.parsing import not_allowed

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from aws_lambda_powertools.event_handler.exceptions import NotFoundError
    from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

    from jobrunner.api.resolver import Resolver, RouteTable

log = logging.getLogger(__name__)

#: What each refusal means, as the OpenAPI document says it where a route says nothing more.
REFUSALS: dict[int, str] = {
    400: "malformed_json: the body cannot be read (not UTF-8, or not strict JSON)",
    401: "unauthenticated: no authenticated tenant",
    403: "forbidden: not allowed to this tenant",
    404: "not_found: no such job, or no such route",
    409: "conflict: the job's state does not allow it (cancelled, or changed by others meanwhile)",
    413: "payload_too_large: the body is larger than the api takes",
    415: "unsupported_media_type: a body that is not application/json in UTF-8",
    422: "validation_error: a parameter or a field is wrong; each is named in errors",
    429: ("limit_reached: over one of the tenant's limits, named in the body (submissions_per_second, jobs_held, "
          "executions_per_minute); see Retry-After"),
    503: "unavailable: a backing service is unavailable; retry later, with an idempotency_key to be safe",
}


def refusal(description: str) -> OpenAPIResponse:
    """A refusal as the OpenAPI document lists it: its meaning, and an ``ErrorOut`` body."""
    return {"description": description, "content": {content_types.APPLICATION_JSON: {"model": ErrorOut}}}


def refusals(statuses: Iterable[int]) -> dict[int, OpenAPIResponse]:
    """``statuses``, each a refusal as ``REFUSALS`` describes it."""
    return {status: refusal(REFUSALS[status]) for status in statuses}


def error_response(
    status: HTTPStatus, error: str, message: str, errors: list[ErrorDetail] | None = None
) -> Response[Any]:
    body = ErrorOut(error=error, message=message, errors=errors or [])
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body.model_dump_json())


def _detail(error: Mapping[str, Any]) -> ErrorDetail:
    """One of Pydantic's errors as the api names it: the field's dotted path (without ``body``, nor the tag
    of the schedule kind that was tried) and the reason."""
    loc = [part for part in error.get("loc", ()) if part not in ("body", "[key]") and part not in TARGET_TAGS]
    tags = [index for index, part in enumerate(loc) if part in TAGS]
    if error.get("type") == RULE_ERROR and error.get("ctx", {}).get("field"):  # a target's rule names its field
        loc = [*loc, error["ctx"]["field"]]
    path = ".".join(str(part) for part in loc if part not in TAGS) or "body"
    reason = str(error.get("msg", "invalid"))
    if error.get("type") == "extra_forbidden":
        # A key right under a schedule's kind is another kind's (or no kind's): say which kind refuses it.
        kind_refuses = tags and tags[-1] == len(loc) - 2
        reason = not_allowed(TAGS[str(loc[tags[-1]])], str(loc[-1])) if kind_refuses else "unknown field"
    return ErrorDetail(field=path, reason=reason)


def invalid_request(exc: RequestValidationError) -> Response[Any]:
    """Every wrong field of the request, as Pydantic collected them in one pass (422); JSON that does not
    parse is 400."""
    if any(error.get("type") == "json_invalid" for error in exc.errors()):
        return error_response(HTTPStatus.BAD_REQUEST, "malformed_json", "the body is not valid JSON",
                              [ErrorDetail(field="body", reason="not valid JSON")])
    details = [_detail(error) for error in exc.errors()]
    return _invalid(details)


def _invalid(details: list[ErrorDetail]) -> Response[Any]:
    summary = "; ".join(f"{d.field}: {d.reason}" for d in details)
    return error_response(HTTPStatus.UNPROCESSABLE_ENTITY, "validation_error", summary, details)


def invalid_field(exc: InvalidField) -> Response[Any]:
    return _invalid([ErrorDetail(field=exc.field, reason=exc.reason)])


def invalid_fields(exc: InvalidFields) -> Response[Any]:
    return _invalid([ErrorDetail(field=e.field, reason=e.reason) for e in exc.errors])


def forbidden(exc: Forbidden) -> Response[Any]:
    return error_response(HTTPStatus.FORBIDDEN, "forbidden", str(exc),
                          [ErrorDetail(field=exc.field, reason=exc.reason)])


def limit_reached(exc: LimitReached) -> Response[Any]:
    body = ErrorOut(error="limit_reached", message=str(exc), errors=[ErrorDetail(field=exc.limit, reason=exc.reason)])
    return Response(status_code=HTTPStatus.TOO_MANY_REQUESTS, content_type=content_types.APPLICATION_JSON,
                    body=body.model_dump_json(), headers={"Retry-After": str(exc.retry_after_s)})


def not_found(exc: NotFound) -> Response[Any]:
    what = f"job {exc}" if isinstance(exc, JobNotFound) else str(exc)
    return error_response(HTTPStatus.NOT_FOUND, "not_found", f"no {what}")


def conflict(exc: Conflict) -> Response[Any]:
    return error_response(HTTPStatus.CONFLICT, "conflict", str(exc))


def unavailable(exc: Unavailable) -> Response[Any]:
    log.warning("answering 503: %s", exc)  # the client is told to retry; the operator needs the cause
    return error_response(HTTPStatus.SERVICE_UNAVAILABLE, "unavailable",
                          "a backing service is unavailable; retry later (with an idempotency_key to be safe)")


def no_route(app: Resolver) -> Callable[[NotFoundError], Response[Any]]:
    """Powertools' not-found hook: ``unrouted``."""
    def answer(_: NotFoundError) -> Response[Any]:
        return unrouted(app.routes, app.current_event.http_method.upper(), app.current_event.path)

    return answer


def unrouted(routes: RouteTable, method: str, path: str) -> Response[Any]:
    """No route serves (``method``, ``path``): no route for the path is 404; a route, but not for this method,
    405 with ``Allow`` (the resolver's own routes tell which: ``Resolver.routes``)."""
    allowed = routes.allowed(path)
    if not allowed or method in allowed:
        return error_response(HTTPStatus.NOT_FOUND, "not_found", f"no route {shorten(path)}")
    response = error_response(HTTPStatus.METHOD_NOT_ALLOWED, "method_not_allowed",
                              f"{shorten(method, 16)} is not allowed here; allowed: {', '.join(allowed)}")
    response.headers["Allow"] = ", ".join(allowed)
    return response


#: Which handler answers each error the routes (or Powertools) raise.
HANDLERS: dict[type[Exception], Callable[[Any], Response[Any]]] = {
    RequestValidationError: invalid_request, InvalidField: invalid_field, InvalidFields: invalid_fields,
    Forbidden: forbidden, LimitReached: limit_reached, NotFound: not_found, Conflict: conflict,
    Unavailable: unavailable,
}


def register(app: Resolver) -> None:
    for error, handler in HANDLERS.items():
        app.exception_handler(error)(handler)
    app.not_found(no_route(app))


def shorten(text: str | None, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters, safe to put in a JSON error (a lone surrogate is escaped)."""
    text = (text or "").encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[: limit - 1] + "…"
