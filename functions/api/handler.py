"""API Gateway (REST, proxy integration) -> the HTTP API."""

from typing import Any

from jobrunner.api.app import handle
from jobrunner.observability import logger, metrics, tracer
from jobrunner.wiring import load_adapters

load_adapters(store=True)  # the drivers load at init, not on the first call


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
@tracer.capture_lambda_handler(capture_response=False)  # an answer may hold a webhook secret
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, context)
