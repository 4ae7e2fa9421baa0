"""/jobs/<job_id>/fires: a job's firing ledger."""

from __future__ import annotations

from datetime import timedelta
from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from jobrunner.api.cursors import decode_fire_cursor, encode_fire_cursor
from jobrunner.api.routes.common import JobId, _json, _tenant, documented
from jobrunner.api.schemas import FireOut, FiresOut
from jobrunner.domain.ledger import MAX_FIRES_PER_PAGE
from jobrunner.domain.schedules import parse_instant
from jobrunner.wiring import container

router = Router()


@router.get(
    "/jobs/<job_id>/fires",
    responses=documented({200: (FiresOut, "a page of the ledger")}, 404),
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
