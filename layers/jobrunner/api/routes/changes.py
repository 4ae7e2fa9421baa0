"""/jobs/<job_id>/changes: a job's change log."""

from __future__ import annotations

from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from jobrunner.api.cursors import MAX_CURSOR_LENGTH, decode_change_cursor, encode_change_cursor
from jobrunner.api.routes.common import JobId, _json, _tenant, documented
from jobrunner.api.schemas import ChangeOut, ChangesOut
from jobrunner.wiring import container

router = Router()


@router.get("/jobs/<job_id>/changes", responses=documented({200: ChangesOut}, 404),
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
