"""Errors -> HTTP responses, in one place. Every error body is ``ErrorOut`` JSON."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from jobrunner.api.schemas import ErrorDetail, ErrorOut
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

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import APIGatewayRestResolver

log = logging.getLogger(__name__)


def error_response(
    status: HTTPStatus, error: str, message: str, errors: list[ErrorDetail] | None = None
) -> Response[Any]:
    body = ErrorOut(error=error, message=message, errors=errors or [])
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body.model_dump_json())


def _field_path(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body",)]
    return ".".join(parts) or "body"


def register(app: APIGatewayRestResolver) -> None:
    @app.exception_handler(RequestValidationError)
    def invalid_request(exc: RequestValidationError) -> Response[Any]:
        details = []
        malformed = False
        for err in exc.errors():
            if err.get("type") == "json_invalid":
                malformed = True
            reason = str(err.get("msg", "invalid"))
            if err.get("type") == "extra_forbidden":
                reason = "unknown field"
            details.append(ErrorDetail(field=_field_path(tuple(err.get("loc", ()))), reason=reason))
        if malformed:
            return error_response(HTTPStatus.BAD_REQUEST, "malformed_json", "the body is not valid JSON",
                                  [ErrorDetail(field="body", reason="not valid JSON")])
        summary = "; ".join(f"{d.field}: {d.reason}" for d in details)
        return error_response(HTTPStatus.UNPROCESSABLE_ENTITY, "validation_error", summary, details)

    @app.exception_handler(InvalidField)
    def invalid_field(exc: InvalidField) -> Response[Any]:
        return error_response(HTTPStatus.UNPROCESSABLE_ENTITY, "validation_error", str(exc),
                              [ErrorDetail(field=exc.field, reason=exc.reason)])

    @app.exception_handler(InvalidFields)
    def invalid_fields(exc: InvalidFields) -> Response[Any]:
        return error_response(HTTPStatus.UNPROCESSABLE_ENTITY, "validation_error", str(exc),
                              [ErrorDetail(field=e.field, reason=e.reason) for e in exc.errors])

    @app.exception_handler(Forbidden)
    def forbidden(exc: Forbidden) -> Response[Any]:
        return error_response(HTTPStatus.FORBIDDEN, "forbidden", str(exc),
                              [ErrorDetail(field=exc.field, reason=exc.reason)])

    @app.exception_handler(LimitReached)
    def limit_reached(exc: LimitReached) -> Response[Any]:
        body = ErrorOut(error="limit_reached", message=str(exc),
                        errors=[ErrorDetail(field=exc.limit, reason=exc.reason)])
        return Response(status_code=HTTPStatus.TOO_MANY_REQUESTS, content_type=content_types.APPLICATION_JSON,
                        body=body.model_dump_json(), headers={"Retry-After": str(exc.retry_after_s)})

    @app.exception_handler(NotFound)
    def not_found(exc: NotFound) -> Response[Any]:
        what = f"job {exc}" if isinstance(exc, JobNotFound) else str(exc)
        return error_response(HTTPStatus.NOT_FOUND, "not_found", f"no {what}")

    @app.exception_handler(Conflict)
    def conflict(exc: Conflict) -> Response[Any]:
        return error_response(HTTPStatus.CONFLICT, "conflict", str(exc))

    @app.exception_handler(Unavailable)
    def unavailable(exc: Unavailable) -> Response[Any]:
        log.warning("answering 503: %s", exc)  # the client is told to retry; the operator needs the cause
        return error_response(HTTPStatus.SERVICE_UNAVAILABLE, "unavailable",
                              "a backing service is unavailable; retry later (with an idempotency_key to be safe)")
