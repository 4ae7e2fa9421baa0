"""Powertools logger, tracer and metrics: created once here, used by every entry point.

Locally the tracer is disabled (``POWERTOOLS_TRACE_DISABLED``) and metrics go to stdout as EMF.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

SERVICE = "jobrunner"
NAMESPACE = "JobRunner"

logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)

# The core logs through the standard library (it imports no Powertools); give its loggers the same
# structured JSON output, so their ``extra`` fields (job_id, execution_id) are searchable.
copy_config_to_registered_loggers(source_logger=logger, include={"jobrunner"})
