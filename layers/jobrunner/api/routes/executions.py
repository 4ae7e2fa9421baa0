"""/jobs/<job_id>/executions: a job's execution history."""

from __future__ import annotations

from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from jobrunner.api.cursors import MAX_CURSOR_LENGTH, decode_execution_cursor, encode_execution_cursor
from jobrunner.api.routes.common import JobId, _json, _tenant, documented
from jobrunner.api.schemas import ExecutionOut, ExecutionsOut
from jobrunner.wiring import container

router = Router()


@router.get("/jobs/<job_id>/executions", responses=documented({200: ExecutionsOut}, 404),
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
