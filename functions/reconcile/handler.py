"""EventBridge rule (every minute or few) -> walk the jobs and re-plan every execution found lost (the safety net)."""

from typing import Any

from jobrunner.entrypoints import run_reconcile
from jobrunner.observability import logger, metrics, tracer
from jobrunner.wiring import load_adapters

load_adapters(store=True)  # the drivers load at init, not on the first call


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return run_reconcile(event, context.get_remaining_time_in_millis())
