"""Deployment settings, read from CDK context (``cdk.json``, or ``cdk deploy -c key=value``).

- ``context``: every key with its default and meaning (``CONTEXT_DEFAULTS``), and ``-c`` values read as JSON
- ``deployment``: ``DeploymentConfig``, the model that checks a stage's options once
- ``runtime``: the options the functions read too, checked by the runtime's ``Settings``
- ``levers``: the cost levers: a stage sized from ``expected_executions_per_day``, and what it pays for at rest
- ``stages``, ``tenancy``, ``parts``, ``types``: a stage's placement, the rules about tenants, composite values,
  and the field types with the reasons they give
"""

from __future__ import annotations

from infra.config.context import CONTEXT_DEFAULTS, cli_context, read_context, stack_name_of, stage_region
from infra.config.deployment import (
    API_AUTH,
    ARCHITECTURES,
    CLOUDFRONT_CERTIFICATE_REGION,
    LOG_RETENTION_DAYS,
    UNRESERVED_STAGES,
    UNWATCHED_STAGES,
    WAF_LIMITS,
    WAF_WINDOW_SECONDS,
    DeploymentConfig,
    scan_concurrency,
)
from infra.config.errors import ConfigError
from infra.config.levers import (
    MAX_SEGMENTS,
    PITR_TABLES,
    RESULTS_PER_PARTITION_S,
    XRAY_MODES,
    busy_minute_rate,
    partitions_for,
    segments_for,
)
from infra.config.parts import (
    STORAGE_GIB,
    ZONE_IDS,
    CustomDomain,
    ExistingCassandra,
    KafkaClientVpc,
    ProvisionedKafka,
    is_zone_id,
)
from infra.config.stages import PROTECTED_STAGES
from infra.config.tenancy import OPEN_ACCOUNT_STAGES, is_account, tenant_spread

__all__ = [
    "API_AUTH", "ARCHITECTURES", "CLOUDFRONT_CERTIFICATE_REGION", "CONTEXT_DEFAULTS", "LOG_RETENTION_DAYS",
    "MAX_SEGMENTS", "OPEN_ACCOUNT_STAGES", "PITR_TABLES", "PROTECTED_STAGES", "RESULTS_PER_PARTITION_S",
    "STORAGE_GIB", "UNRESERVED_STAGES", "UNWATCHED_STAGES", "WAF_LIMITS", "WAF_WINDOW_SECONDS", "XRAY_MODES",
    "ZONE_IDS", "ConfigError", "CustomDomain", "DeploymentConfig", "ExistingCassandra", "KafkaClientVpc",
    "ProvisionedKafka", "busy_minute_rate", "cli_context", "is_account", "is_zone_id", "partitions_for",
    "read_context", "scan_concurrency", "segments_for", "stack_name_of", "stage_region", "tenant_spread",
]
