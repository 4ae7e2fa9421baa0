"""Powertools logger, tracer and metrics: created once here, used by every entry point.

Locally the tracer is disabled (``POWERTOOLS_TRACE_DISABLED``) and metrics go to stdout as EMF.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = "jobrunner"
NAMESPACE = "JobRunner"

logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
