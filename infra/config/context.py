"""The context: ``cdk.json``'s keys with their defaults, and values given on the command line (``-c key=value``).

Every key, its default and its meaning are in ``CONTEXT_DEFAULTS`` and ``docs/deploy.md``; ``cdk.json`` carries the
same defaults (a test keeps the three in step). Values given with ``-c`` arrive as strings, so each one is read as
JSON when it looks like it (numbers, ``true``/``false``, ``null``, lists and objects).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from infra.config.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

#: Context key -> default. ``None`` means "not set".
CONTEXT_DEFAULTS: dict[str, Any] = {
    # Names the stack (JobRunner-<stage>) and prefixes resource names; lowercase, digits, hyphens.
    "stage": "dev",
    # Per-stage settings: stage -> {"account": "123456789012", "region": "eu-west-1", "protected": true,
    # <any other key>: <its value for that stage>}. The account and region pin the stack's environment; a
    # protected stage (prod always is) must pin both and gets termination and deletion protection. A stage
    # not listed deploys where the credentials point, unprotected, with the keys above.
    # prod's account, region, alarm_email and api_principals are left to fill in before its first deploy.
    # small: the small tier (docs/scaling.md, "The small tier"), its alarm_email and api_principals likewise.
    "stages": {"small": {"alarm_email": None, "api_principals": [], "expected_executions_per_day": 1_000_000,
                         "kafka_provisioned": {"instance_type": "kafka.t3.small", "brokers_per_zone": 1},
                         "endpoint_zones": 1, "xray_tracing": "off"},
               "prod": {"account": None, "region": None, "protected": True, "alarm_email": None,
                        "api_principals": [], "expected_executions_per_day": 50_000_000,
                        "kafka_provisioned": {"instance_type": "kafka.m7g.large", "brokers_per_zone": 1}}},
    # Segments: parallel scans per minute (JOBRUNNER_SEGMENTS of every function). "auto": sized from
    # expected_executions_per_day (infra.config.levers.segments_for), 16 when that is null.
    "segments": "auto",
    # Lambda CPU architecture of every function and of the dependency layer: arm64 or x86_64.
    "lambda_architecture": "arm64",
    # API authorization: "iam" (SigV4) or "cognito" (a user pool is created; tenant = the user's sub).
    "api_auth": "iam",
    # Who may call the API with api_auth iam (its resource policy allows them and denies everyone else): account
    # IDs ("123456789012": any principal of that account its own IAM policies allow) and IAM role or user ARNs
    # ("arn:aws:iam::123456789012:role/payments-ci": that one, its sessions included). Empty: for stage dev, the
    # deploying account; every other stage must list them (docs/deploy.md, "Admitting tenants").
    "api_principals": [],
    # API stage throttling (requests per second, burst).
    "api_rate_limit": 50,
    "api_burst_limit": 100,
    # A WAF web ACL on the API stage with one rate-based rule: at most this many requests per source IP in any
    # 5 minutes. "auto": on for a protected stage (prod), at half the stage's api_rate_limit over 5 minutes,
    # off elsewhere; a number; or 0 (none). About $6 a month and $0.60 per million requests (docs/deploy.md).
    "waf_rate_limit": "auto",
    # The API on a domain of yours, TLS 1.2 only: {"domain_name": "api.example.com", "certificate_arn":
    # "arn:aws:acm:<the stack's region>:...:certificate/..."}; point a CNAME at the ApiDomainTarget output. null: none.
    "api_domain": None,
    # The web dashboard: its files in S3 behind a CloudFront distribution (the DashboardUrl output). false: no
    # bucket, no distribution (an account CloudFront has not verified yet refuses to create one; docs/deploy.md).
    "web_dashboard": True,
    # The dashboard's distribution on a domain of yours, TLS 1.2 only (TLSv1.2_2021; CloudFront's default certificate
    # also accepts TLS 1.0): {"domain_name": "jobs.example.com", "certificate_arn": "arn:aws:acm:us-east-1:..."}
    # (CloudFront takes certificates from us-east-1 only); point a CNAME at the DashboardDomainTarget output.
    "dashboard_domain": None,
    # Keyspace name; null means jobrunner_<stage>.
    "keyspace": None,
    # true: the keyspace exists already (kept by retain_data when an earlier stack was destroyed): the stack creates
    # neither it nor its tables, and uses them by name; `python -m cql.migrate` keeps them in step with cql/.
    "adopt_keyspace": False,
    # null: Amazon Keyspaces (created here, tables derived from cql/). Or an existing Cassandra cluster:
    # {"contact_points": ["10.0.0.10", ...], "port": 9042, "secret_arn": "arn:aws:secretsmanager:..."}.
    "existing_cassandra": None,
    # Targets (issue 35; docs/targets.md, docs/deploy.md "Targets"): null, jobs name none and no delivery function is
    # deployed. Or {"kinds": ["https", "lambda", "sqs"] (some of them), "lambda_allow": [...], "sqs_allow": [...],
    # "address_allow": [...], "allow_any": false}: the delivery function, granted exactly the functions (ARNs, or
    # account ids) and queues (URLs, or account ids) listed; "*" only with "allow_any": true. With https, a NAT
    # gateway (one per zone on a protected stage) gives it the internet; address_allow: networks (CIDRs) a webhook
    # may reach despite the address rules.
    "targets": None,
    # Topics a job may name (the scan may publish to them); "jobs" is always included.
    "allowed_topics": ["jobs"],
    # Topics granted per tenant (JOBRUNNER_TENANT_TOPICS): {"<tenant>": ["topic", ...], "*": [...]} ("*": every
    # tenant not named; a granted topic is allowed and created). Each tenant named gets a worker policy of its
    # own (outputs TenantWorkerPolicy<N>Arn). {}: every tenant may name every allowed topic.
    "tenant_topics": {},
    # true: a stage admitting more than one tenant may deploy with tenant_topics {} (every tenant's payloads and
    # result tokens on the shared topics, readable by any holder of WorkerPolicy). false: it refuses to synth.
    "shared_worker_topics": False,
    # principal -> tenant (JOBRUNNER_TENANT_MAP), e.g. {"arn:aws:iam::123456789012:role/payments-ci": "payments"}:
    # roles acting as one tenant, or a federated user (refused unless mapped).
    "tenant_map": {},
    # Per-tenant limits (JOBRUNNER_TENANT_LIMITS): "*" for every tenant, overrides per tenant, each with
    # submissions_per_second, jobs_held, executions_per_minute (each null: none) and payload_bytes. The
    # default keeps any one tenant to half of the stage's api_rate_limit and to 100,000 recurring jobs;
    # executions_per_minute costs two more DynamoDB writes per one-time job, so it is off by default.
    "tenant_limits": {"*": {"submissions_per_second": 25, "jobs_held": 100_000}},
    # Tenants that may read the operator view GET /segments (JOBRUNNER_OPERATORS).
    "operators": [],
    # Partitions of each topic the app creates (MSK Serverless bills per partition-hour). "auto": sized from
    # expected_executions_per_day (infra.config.levers.partitions_for), 3 when that is null.
    "kafka_partitions": "auto",
    # Reserved concurrency of the scan function: "auto" (none for stage dev, whose account may have a
    # concurrency quota of 10; else 2 x segments + headroom), a number, or 0 (none).
    "scan_reserved_concurrency": "auto",
    # Memory of the scan function in MB (also its CPU share); scans dominate the Lambda bill.
    "scan_memory_mb": 512,
    # Minutes between two runs of the reconciler (1 to 15; each run lasts at most that long).
    "reconcile_interval_minutes": 1,
    # Email subscribed to the alarm topic: required for every stage but dev (whose alarms may go unread).
    "alarm_email": None,
    # A monthly AWS Budgets cost budget (USD, the account's whole cost) notifying the alarm topic at 80% of
    # actual and 100% of forecast spend; null or 0: none.
    "monthly_budget_usd": 1500,
    # The https URL of docs/runbooks.md as a browser shows it (your repository's, or docs site's, page); each alarm's
    # description links <runbook_url>#<alarm name in lowercase>. null: the copy the web dashboard serves at
    # /ui/runbooks (so a stage with web_dashboard false must name one).
    "runbook_url": None,
    # Retention of every log group, in days (a value CloudWatch Logs accepts).
    "log_retention_days": 30,
    # Keep the Keyspaces tables, the heartbeat table and the result key secret when the stack is deleted.
    "retain_data": True,
    # VPC address range and, optionally, the availability zones to use: two or more zone IDs (use1-az1) or
    # zone names (us-east-1a). Empty: the two zone IDs ZONE_IDS lists for the region.
    "vpc_cidr": "10.40.0.0/16",
    "availability_zones": [],
    # Consumer groups the stack's WorkerPolicy lets workers use (examples/worker.py: example-workers).
    "worker_groups": ["jobrunner-workers", "example-workers"],
    # Other VPCs whose workers reach the cluster directly (MSK Serverless: up to 4 besides the stack's):
    # [{"subnet_ids": ["subnet-..."], "security_group_ids": ["sg-..."]}].
    "kafka_client_vpcs": [],
    # null: an MSK Serverless cluster. Or a provisioned MSK cluster, cheaper at zero load (a dev stage):
    # {"instance_type": "kafka.t3.small", "brokers_per_zone": 1, "storage_gib": 10, "kafka_version": "3.8.x"}
    # (omitted fields take these values; {} takes them all). Not with kafka_client_vpcs (serverless only).
    "kafka_provisioned": None,
    # Zones that hold each interface VPC endpoint: null, every zone of the VPC; or N, the first N only
    # (cheaper; the other zones' functions reach them across zones, and lose them with their zone).
    "endpoint_zones": None,
    # A local PEM file shipped in the code layer as the Keyspaces CA bundle; null: infra/certs/keyspaces-bundle.pem
    # (the roots AWS documents for Keyspaces: Amazon Root CA 1-4 and Starfield Class 2).
    "keyspaces_ca_bundle": None,
    # A prebuilt dependency layer directory (holding python/); null: built with pip at synth.
    "dependency_layer_dir": None,
    # Where synth caches the built layers (git-ignored).
    "build_cache_dir": ".local/cdk",
    # Cost levers (issue #33; docs/scaling.md, "Cost levers"), checked by DeploymentConfig (infra.config.levers).
    # Executions a day the stage is sized for: segments and kafka_partitions "auto" derive from it; null: unknown.
    "expected_executions_per_day": None,
    # The results trigger's provisioned pollers (at most one per partition): "auto" (none when one on-demand poller
    # keeps up with the stage's busy minute, else kafka_partitions), a number, or 0 (on-demand mode: nothing billed
    # at rest, but no bounded retries: a batch that keeps failing holds its partition until it succeeds).
    "results_pollers": "auto",
    # Share of the results function's invocations that log at INFO (its line per execution); the others log
    # warnings and errors only. 1: every invocation (as before issue #33).
    "results_log_sample_rate": 0.01,
    # One-time jobs' rows expire by themselves once their last execution and its history are gone
    # (layers/jobrunner/domain/expiry.py; a TTL delete each, no write). false: kept until deleted (before issue #33).
    "one_time_rows_expire": True,
    # X-Ray: "active" (every function), "sampled" (the tick and the reconciler actively; the scan, results and API
    # functions only when their caller's trace is sampled), or "off" (no tracing and no X-Ray endpoint).
    "xray_tracing": "sampled",
    # Keyspaces tables with point-in-time recovery: "auto" (those whose rows cannot be rebuilt) or a list of names.
    "point_in_time_recovery": "auto",
    # Keyspaces capacity: "auto" (provisioned with auto scaling on a protected stage that sets
    # expected_executions_per_day, else on-demand), "on-demand" or "provisioned" (sized from
    # expected_executions_per_day, which it needs).
    "keyspaces_capacity": "auto",
}


def read_context(get: Callable[[str], Any]) -> dict[str, Any]:
    """Every key's value (``get`` is ``node.try_get_context``; a key it does not know takes its default)."""
    return {key: parse(value) if (value := get(key)) is not None else default
            for key, default in CONTEXT_DEFAULTS.items()}


def parse(value: Any) -> Any:
    """A command-line string read as JSON when it looks like a number, a flag, null, a list or an object."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text in ("true", "false", "null") or text[:1] in "[{" or re.fullmatch(r"-?\d+(\.\d+)?", text):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"cannot parse context value {value!r}: {exc}") from exc
    return value


def cli_context(cdk_json: Path, argv: Sequence[str]) -> dict[str, Any]:
    """``cdk.json``'s context with ``-c key=value`` (or ``--context``) arguments applied, as the cdk CLI does."""
    context: dict[str, Any] = json.loads(cdk_json.read_text())["context"]
    args = list(argv)
    while args:
        flag = args.pop(0)
        if flag in ("-c", "--context") and args:
            key, _, value = args.pop(0).partition("=")
            context[key] = value
    return context


def stack_name_of(stage: str) -> str:
    """The CloudFormation stack of ``stage`` (what ``cdk deploy`` creates, and the smoke test looks up)."""
    return f"JobRunner-{stage}"


def stage_region(context: dict[str, Any], stage: str) -> str | None:
    """The region ``stages`` pins ``stage`` to in ``context`` (``cdk.json``'s), or None: where the credentials point."""
    entry = (context.get("stages") or {}).get(stage) or {}
    region = entry.get("region") if isinstance(entry, dict) else None
    return str(region) if region else None
