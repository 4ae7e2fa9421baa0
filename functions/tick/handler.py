"""EventBridge minute rule -> dispatch the scans of the next minute (and any catch-up)."""

from typing import Any

from jobrunner.entrypoints import run_tick
from jobrunner.observability import logger, metrics, tracer


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return run_tick(event)
