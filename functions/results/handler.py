"""MSK trigger on `job-results` -> record outcomes, retry failures with backoff, dead-letter the rest."""

from typing import Any

from jobrunner.entrypoints import run_results
from jobrunner.observability import logger, metrics, tracer
from jobrunner.wiring import load_adapters

load_adapters(store=True, publisher=True)  # the drivers load at init, not on the first call


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return run_results(event)
