"""Event -> service call -> plain result, for the tick and scan functions (and the local stack).

Kept apart from ``functions/`` so the handlers stay a few lines and the local stack calls the very
same code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from jobrunner.domain.schedules import parse_instant
from jobrunner.observability import logger, metrics
from jobrunner.ports import ScanRequest
from jobrunner.wiring import container

if TYPE_CHECKING:
    from datetime import datetime


def run_tick(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` is an EventBridge scheduled event; its ``time`` names the minute, not the clock."""
    services = container()
    event_time: datetime = parse_instant(str(event["time"]), "time")
    report = services.ticks.tick(event_time, services.clock.now())
    metrics.add_metric(name="ScansDispatched", unit=MetricUnit.Count, value=len(report.dispatched))
    logger.info("tick", extra={"target": report.target.isoformat(), "dispatched": len(report.dispatched)})
    return {"target": report.target.isoformat(), "dispatched": len(report.dispatched)}


def run_scan(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` is ``{"segment": int, "minute": RFC 3339}`` from the tick."""
    services = container()
    request = ScanRequest(segment=int(event["segment"]), bucket=parse_instant(str(event["minute"]), "minute"))
    report = services.scans.scan(request)
    metrics.add_metric(name="ExecutionsPublished", unit=MetricUnit.Count, value=report.published)
    if report.lateness_ms:
        metrics.add_metric(name="MaxLatenessMs", unit=MetricUnit.Milliseconds, value=max(report.lateness_ms))
    result = {
        "segment": report.segment, "minute": report.bucket.isoformat(), "acquired": report.acquired,
        "finished": report.finished, "lost_lease": report.lost_lease, "published": report.published,
        "dropped": report.dropped, "errors": report.errors,
    }
    logger.info("scan", extra=result)
    return result
