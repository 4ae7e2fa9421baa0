"""/segments: every segment's progress, an operator view."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from jobrunner.api.routes.common import _json, _tenant, documented
from jobrunner.api.schemas import SegmentOut, SegmentsOut
from jobrunner.domain.errors import Forbidden
from jobrunner.domain.time import rfc3339
from jobrunner.wiring import container

router = Router()


@router.get("/segments", responses=documented({200: SegmentsOut, 403: "forbidden: the caller is not an operator"}))
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
