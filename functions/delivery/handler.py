"""MSK trigger on `job-deliveries` -> call each execution's target, report the outcome to `job-results`."""

from typing import Any

from jobrunner.entrypoints import run_delivery
from jobrunner.observability import logger, metrics, tracer
from jobrunner.wiring import load_adapters

load_adapters(publisher=True)  # the Kafka driver loads at init, not on the first call


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return run_delivery(event, context.get_remaining_time_in_millis())
