"""Routes of the HTTP API. Each route is: who is calling, one service call, the response model."""

from __future__ import annotations

from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from jobrunner.api import errors
from jobrunner.api.schemas import ErrorOut, ExecutionOut, ExecutionsOut, JobIn, JobOut
from jobrunner.api.tenancy import tenant_of
from jobrunner.domain.schedules import schedule_from_dict
from jobrunner.domain.time import rfc3339
from jobrunner.services.jobs import NewJob
from jobrunner.wiring import container

app = APIGatewayRestResolver(enable_validation=True)
errors.register(app)


class Unauthenticated(Exception):
    pass


@app.exception_handler(Unauthenticated)
def _unauthenticated(_: Unauthenticated) -> Response[Any]:
    return errors.error_response(HTTPStatus.UNAUTHORIZED, "unauthenticated", "no authenticated tenant")


def _tenant() -> str:
    tenant = tenant_of(app.current_event.raw_event)
    if tenant is None:
        raise Unauthenticated
    return tenant


def _json(status: HTTPStatus, body: Any) -> Response[Any]:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body.model_dump_json())


@app.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


@app.get("/openapi.json", include_in_schema=False)
def openapi() -> Response[Any]:
    """The OpenAPI document, generated from the routes and models above."""
    return Response(status_code=HTTPStatus.OK, content_type=content_types.APPLICATION_JSON,
                    body=app.get_openapi_json_schema(title="Distributed Job Runner", version="1"))


@app.post("/jobs")
def submit_job(body: Annotated[JobIn, Body()]) -> Response[Any]:
    tenant = _tenant()
    schedule = schedule_from_dict(body.schedule.model_dump(exclude_none=True))
    new = NewJob(schedule=schedule, payload=body.payload, topic=body.topic, retry=body.retry_policy())
    job = container().jobs.submit(tenant, new)
    return _json(HTTPStatus.CREATED, JobOut.of(job))


@app.get("/jobs/<job_id>")
def get_job(job_id: Annotated[str, Path(max_length=64)]) -> Response[Any]:
    return _json(HTTPStatus.OK, JobOut.of(container().jobs.get(_tenant(), job_id)))


@app.get("/jobs/<job_id>/executions")
def list_executions(
    job_id: Annotated[str, Path(max_length=64)], limit: Annotated[int, Query(ge=1, le=500)] = 50
) -> Response[Any]:
    records = container().jobs.executions(_tenant(), job_id, limit)
    items = [
        ExecutionOut(
            execution_id=r.execution_id, scheduled_at=rfc3339(r.scheduled_at), attempt=r.attempt,
            status=r.status.value, trigger=r.trigger.value, due_at=rfc3339(r.due_at),
            published_at=rfc3339(r.published_at) if r.published_at else None,
            finished_at=rfc3339(r.finished_at) if r.finished_at else None, error=r.error,
        )
        for r in records
    ]
    return _json(HTTPStatus.OK, ExecutionsOut(items=items))


PUBLIC_PATHS = frozenset({"/health", "/openapi.json"})


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Entry point shared by the Lambda function and the local HTTP server.

    Authentication is checked before anything else, so an anonymous caller learns nothing, not
    even whether its body would have been valid.
    """
    if event.get("path") not in PUBLIC_PATHS and tenant_of(event) is None:
        body = ErrorOut(error="unauthenticated", message="no authenticated tenant").model_dump_json()
        return {"statusCode": 401, "headers": {"Content-Type": "application/json"}, "body": body,
                "isBase64Encoded": False}
    return app.resolve(event, context)
