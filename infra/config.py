"""Deployment settings, read from CDK context (``cdk.json``, or ``cdk deploy -c key=value``).

Every key, its default and its meaning are in ``CONTEXT_DEFAULTS`` and ``docs/deploy.md``;
``cdk.json`` carries the same defaults (a test keeps the three in step). Values given with ``-c``
arrive as strings, so each one is parsed: numbers, ``true``/``false``, ``null``, and JSON for lists
and objects.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobrunner.domain.limits import DEFAULT_MAX_PAYLOAD_BYTES, TenantLimits
from jobrunner.domain.topics import EVERY_OTHER_TENANT

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
    # expected_executions_per_day (segments_for), 16 when that is null.
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
    # expected_executions_per_day (partitions_for), 3 when that is null.
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
    # Cost levers (issue #33; docs/scaling.md, "Cost levers"), each parsed by its own function below.
    # Executions a day the stage is sized for: segments and kafka_partitions "auto" derive from it; null: unknown.
    "expected_executions_per_day": None,
    # The results trigger's provisioned pollers (at most one per partition): "auto" (none when one on-demand poller
    # keeps up with the stage's busy minute, else kafka_partitions), a number, or 0 (on-demand mode: nothing billed
    # at rest, but no bounded retries: a batch that keeps failing holds its partition until it succeeds).
    "results_pollers": "auto",
    # Share of the results function's invocations that log at INFO (its line per execution); the others log
    # warnings and errors only. 1: every invocation (as before issue #33).
    "results_log_sample_rate": 0.01,
    # X-Ray: "active" (every function), "sampled" (the tick and the reconciler actively; the scan, results and API
    # functions only when their caller's trace is sampled), or "off" (no tracing and no X-Ray endpoint).
    "xray_tracing": "sampled",
    # Keyspaces tables with point-in-time recovery: "auto" (those whose rows cannot be rebuilt) or a list of names.
    "point_in_time_recovery": "auto",
    # Keyspaces capacity: "auto" (provisioned with auto scaling on a protected stage, else on-demand), "on-demand"
    # or "provisioned" (sized from expected_executions_per_day, which it needs).
    "keyspaces_capacity": "auto",
}

ARCHITECTURES = ("arm64", "x86_64")
#: Region -> the two zones the VPC uses by default, by zone ID. A zone *name* (us-east-1a) maps to a
#: different physical zone in each account, so "the region's first two" differ from account to account;
#: an ID names the same zone everywhere, and services list the zones they support by ID. Each pair keeps
#: to the region's long-established zones and avoids those known to be refused or closed to new accounts
#: (use1-az3, usw1-az2, apne1-az3). It is a judgement, not an AWS table: ``make preflight`` checks the
#: Keyspaces endpoint is offered in both zones, and the ``availability_zones`` context key overrides it.
ZONE_IDS: dict[str, tuple[str, str]] = {
    "us-east-1": ("use1-az1", "use1-az2"),
    "us-east-2": ("use2-az1", "use2-az2"),
    "us-west-1": ("usw1-az1", "usw1-az3"),
    "us-west-2": ("usw2-az1", "usw2-az2"),
    "ca-central-1": ("cac1-az1", "cac1-az2"),
    "eu-west-1": ("euw1-az1", "euw1-az2"),
    "eu-west-2": ("euw2-az1", "euw2-az2"),
    "eu-west-3": ("euw3-az1", "euw3-az2"),
    "eu-central-1": ("euc1-az1", "euc1-az2"),
    "eu-north-1": ("eun1-az1", "eun1-az2"),
    "ap-northeast-1": ("apne1-az1", "apne1-az4"),
    "ap-northeast-2": ("apne2-az1", "apne2-az3"),
    "ap-southeast-1": ("apse1-az1", "apse1-az2"),
    "ap-southeast-2": ("apse2-az1", "apse2-az2"),
    "ap-south-1": ("aps1-az1", "aps1-az3"),
    "sa-east-1": ("sae1-az1", "sae1-az3"),
}
_ZONE_ID = re.compile(r"^[a-z]{2,}[0-9]+-az[0-9]+$")
_ZONE_NAME = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]+[a-z]$")
API_AUTH = ("iam", "cognito")
_STAGE = re.compile(r"^[a-z][a-z0-9-]{0,15}$")
_ACCOUNT = re.compile(r"^[0-9]{12}$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]$")
#: Stages that are protected whatever ``stages`` says.
PROTECTED_STAGES = frozenset({"prod"})
#: What a ``stages`` entry may hold besides the context keys it overrides.
_STAGE_SETTINGS = frozenset({"account", "region", "protected"})
_KEYSPACE = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
#: The retentions CloudWatch Logs accepts, in days, with their name in ``aws_logs.RetentionDays``.
LOG_RETENTION_DAYS = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
    60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS",
    365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS", 1096: "THREE_YEARS",
    1827: "FIVE_YEARS", 2192: "SIX_YEARS", 2557: "SEVEN_YEARS", 2922: "EIGHT_YEARS", 3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}


class ConfigError(ValueError):
    """A context value is missing, malformed or out of range."""


@dataclass(frozen=True)
class ExistingCassandra:
    """A Cassandra cluster the functions reach from the VPC (peering, Transit Gateway...)."""

    contact_points: tuple[str, ...]
    port: int = 9042
    secret_arn: str | None = None


@dataclass(frozen=True)
class KafkaClientVpc:
    """A VPC of the user's whose clients reach the MSK Serverless cluster (the cluster gets endpoints there)."""

    subnet_ids: tuple[str, ...]
    security_group_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProvisionedKafka:
    """The brokers of a provisioned MSK cluster (Standard brokers, EBS storage), used instead of MSK Serverless."""

    instance_type: str = "kafka.t3.small"
    brokers_per_zone: int = 1
    storage_gib: int = 10
    #: MSK's recommended version when this was written (its "Supported Apache Kafka versions" page).
    kafka_version: str = "3.8.x"


@dataclass(frozen=True)
class CustomDomain:
    """A domain name of the user's and the ACM certificate that covers it (the DNS record is the user's to make)."""

    domain_name: str
    certificate_arn: str

    @property
    def certificate_region(self) -> str:
        return self.certificate_arn.split(":")[3]


@dataclass(frozen=True)
class DeploymentConfig:
    """The parsed context; build it with ``from_context`` (the defaults live in ``CONTEXT_DEFAULTS``)."""

    stage: str
    segments: int
    lambda_architecture: str
    api_auth: str
    #: Account IDs and IAM role or user ARNs the API's resource policy admits; empty: the deploying account
    #: (stage dev only) or api_auth cognito (the user pool admits).
    api_principals: tuple[str, ...]
    api_rate_limit: int
    api_burst_limit: int
    #: Requests per source IP in any 5 minutes, above which the web ACL blocks; None: no web ACL.
    waf_rate_limit: int | None
    api_domain: CustomDomain | None
    web_dashboard: bool
    dashboard_domain: CustomDomain | None
    keyspace: str
    #: The keyspace and its tables exist already: used, not created (nor deleted with the stack).
    adopt_keyspace: bool
    existing_cassandra: ExistingCassandra | None
    allowed_topics: tuple[str, ...]
    #: (tenant, its topics) in the context's order; empty: no per-tenant grants.
    tenant_topics: tuple[tuple[str, tuple[str, ...]], ...]
    #: A stage admitting more than one tenant may leave tenant_topics empty (its tenants then share ``jobs``).
    shared_worker_topics: bool
    tenant_map: tuple[tuple[str, str], ...]
    operators: tuple[str, ...]
    #: As the context gives it (validated by ``jobrunner.domain.limits``); passed to the functions as JSON.
    tenant_limits: dict[str, Any]
    kafka_partitions: int
    scan_reserved_concurrency: int | None
    scan_memory_mb: int
    reconcile_interval_minutes: int
    alarm_email: str | None
    monthly_budget_usd: int | None
    #: The runbooks page's https URL; None: the web dashboard's copy.
    runbook_url: str | None
    log_retention_days: int
    retain_data: bool
    vpc_cidr: str
    availability_zones: tuple[str, ...]
    keyspaces_ca_bundle: str | None
    worker_groups: tuple[str, ...]
    kafka_client_vpcs: tuple[KafkaClientVpc, ...]
    kafka_provisioned: ProvisionedKafka | None
    endpoint_zones: int | None
    dependency_layer_dir: str | None
    build_cache_dir: str
    #: The stack's environment, from ``stages``; None: where the credentials point (env-agnostic template).
    account: str | None = None
    region: str | None = None
    #: Termination protection on the stack, deletion protection on the resources that offer it.
    protected: bool = False
    # Cost levers (issue #33), parsed by ``_cost_levers``.
    #: Executions a day the stage is sized for; None: unknown (segments 16, 3 partitions, as before).
    expected_executions_per_day: int | None = None
    #: The results trigger's maximum provisioned pollers; 0: on-demand mode (no bounded retries).
    results_pollers: int = 3
    results_log_sample_rate: float = 1.0
    xray_tracing: str = "active"
    #: The Keyspaces tables with point-in-time recovery; None: every table.
    pitr_tables: tuple[str, ...] | None = None
    keyspaces_capacity: str = "on-demand"

    @property
    def stack_name(self) -> str:
        return stack_name_of(self.stage)

    @property
    def log_retention_name(self) -> str:
        """The ``aws_logs.RetentionDays`` member name of ``log_retention_days``."""
        return LOG_RETENTION_DAYS[self.log_retention_days]

    @property
    def uses_keyspaces(self) -> bool:
        return self.existing_cassandra is None

    @property
    def shared_topics(self) -> tuple[str, ...]:
        """The allowed topics no named tenant has to itself (granted to ``*``, or to no tenant): what the stack's
        ``WorkerPolicy`` reads. A topic granted to named tenants only is read by their own worker policies."""
        named = {t for tenant, topics in self.tenant_topics if tenant != EVERY_OTHER_TENANT for t in topics}
        everyone = {t for tenant, topics in self.tenant_topics if tenant == EVERY_OTHER_TENANT for t in topics}
        return tuple(t for t in self.allowed_topics if t not in named - everyone)

    @classmethod
    def from_context(cls, get: Callable[[str], Any]) -> DeploymentConfig:
        """``get`` is ``node.try_get_context``; keys it doesn't know take their defaults."""
        raw = {key: _parse(value) if (value := get(key)) is not None else default
               for key, default in CONTEXT_DEFAULTS.items()}
        stage = _text(raw, "stage")
        if not _STAGE.match(stage):
            raise ConfigError(f"stage {stage!r}: 1-16 lowercase letters, digits or hyphens, starting with a letter")
        settings = _stage_settings(raw, stage)
        segments = _segments(raw)
        keyspace = raw["keyspace"] or f"jobrunner_{stage.replace('-', '_')}"
        if not _KEYSPACE.match(keyspace):
            raise ConfigError(f"keyspace {keyspace!r}: 1-48 lowercase letters, digits or underscores")
        zones = _zones(raw)
        client_vpcs = _client_vpcs(raw["kafka_client_vpcs"])
        kafka_provisioned = _provisioned(raw["kafka_provisioned"], zones, client_vpcs)
        tenant_topics = _tenant_topics(raw["tenant_topics"])
        alarm_email = _alarm_email(raw["alarm_email"], stage)
        api_auth = _choice(raw, "api_auth", API_AUTH)
        tenant_map = _tenant_map(raw["tenant_map"])
        api_principals = _api_principals(raw["api_principals"], stage, api_auth=api_auth, tenant_map=tenant_map)
        api_rate_limit = _int(raw, "api_rate_limit", 1, 10_000)
        web_dashboard = _bool(raw, "web_dashboard")
        config = cls(
            stage=stage,
            segments=segments,
            lambda_architecture=_choice(raw, "lambda_architecture", ARCHITECTURES),
            api_auth=api_auth,
            api_principals=api_principals,
            api_rate_limit=api_rate_limit,
            api_burst_limit=_int(raw, "api_burst_limit", 1, 5_000),
            waf_rate_limit=_waf_rate_limit(raw["waf_rate_limit"], api_rate_limit, protected=settings["protected"]),
            api_domain=_domain(raw["api_domain"], "api_domain", region=settings["region"]),
            web_dashboard=web_dashboard,
            dashboard_domain=_dashboard_domain(raw["dashboard_domain"], web_dashboard=web_dashboard),
            keyspace=keyspace,
            adopt_keyspace=_adopt_keyspace(raw),
            existing_cassandra=_existing_cassandra(raw["existing_cassandra"]),
            allowed_topics=_topics(raw["allowed_topics"], *(t for _, ts in tenant_topics for t in ts)),
            tenant_topics=tenant_topics,
            shared_worker_topics=_bool(raw, "shared_worker_topics"),
            tenant_map=tenant_map,
            operators=_names(raw["operators"], "operators"),
            tenant_limits=_tenant_limits(raw["tenant_limits"]),
            kafka_partitions=_kafka_partitions(raw),
            scan_reserved_concurrency=_reserved(raw["scan_reserved_concurrency"], segments, stage),
            scan_memory_mb=_int(raw, "scan_memory_mb", 128, 10_240),
            reconcile_interval_minutes=_int(raw, "reconcile_interval_minutes", 1, 15),
            alarm_email=alarm_email,
            monthly_budget_usd=_int(raw, "monthly_budget_usd", 0, 10_000_000) or None
            if raw["monthly_budget_usd"] is not None else None,
            runbook_url=_runbook_url(raw["runbook_url"], web_dashboard=raw["web_dashboard"]),
            log_retention_days=_log_retention(raw),
            retain_data=_bool(raw, "retain_data"),
            vpc_cidr=_text(raw, "vpc_cidr"),
            availability_zones=zones,
            keyspaces_ca_bundle=raw["keyspaces_ca_bundle"] or None,
            worker_groups=_groups(raw["worker_groups"]),
            kafka_client_vpcs=client_vpcs,
            kafka_provisioned=kafka_provisioned,
            endpoint_zones=_endpoint_zones(raw["endpoint_zones"], zones),
            dependency_layer_dir=raw["dependency_layer_dir"] or None,
            build_cache_dir=_text(raw, "build_cache_dir"),
            **settings,
            **_cost_levers(raw, protected=settings["protected"]),
        )
        _refuse_shared_topics(config)
        return config


def _stage_settings(raw: dict[str, Any], stage: str) -> dict[str, Any]:
    """Apply ``stages[stage]``'s overrides to ``raw`` (in place); return its account, region and protection.

    A key both overridden there and given another value on the command line (or at the top of
    ``cdk.json``) is refused rather than silently resolved: which one a deploy used would depend on
    knowing the precedence, and ``cdk diff`` would show the surprise only if someone read it.
    """
    entry = _stage_entry(raw["stages"], stage)
    for key, value in entry.items():
        if key in _STAGE_SETTINGS:
            continue
        value = _parse(value)
        if raw[key] != CONTEXT_DEFAULTS[key] and raw[key] != value:
            raise ConfigError(f"{key}: stages.{stage} sets {value!r}, the context {raw[key]!r}; change it in one "
                              f"place (stages.{stage} in cdk.json for this stage)")
        raw[key] = value
    return _stage_placement(entry, stage, retain_data=raw["retain_data"])


def _stage_entry(stages: Any, stage: str) -> dict[str, Any]:
    """``stages[stage]`` (empty when not there), once ``stages`` and its keys are known good."""
    if not isinstance(stages, dict) or not all(isinstance(v, dict) for v in stages.values()):
        raise ConfigError(f"stages: expected an object of stage -> settings, got {stages!r}")
    entry: dict[str, Any] = stages.get(stage, {})
    unknown = set(entry) - _STAGE_SETTINGS - (set(CONTEXT_DEFAULTS) - {"stage", "stages"})
    if unknown:
        raise ConfigError(f"stages.{stage}: unknown keys {sorted(unknown)} (account, region, protected, or a "
                          f"context key)")
    return entry


def _stage_placement(entry: dict[str, Any], stage: str, *, retain_data: Any) -> dict[str, Any]:
    """The stage's account, region and protection; a protected stage names both and keeps its data."""
    account, region, protected = entry.get("account"), entry.get("region"), entry.get("protected")
    if account is not None and not (isinstance(account, str) and _ACCOUNT.match(account)):
        raise ConfigError(f"stages.{stage}.account: expected 12 digits as a string, got {account!r}")
    if region is not None and not (isinstance(region, str) and _REGION.match(region)):
        raise ConfigError(f"stages.{stage}.region: expected a region such as eu-west-1, got {region!r}")
    if protected is not None and not isinstance(protected, bool):
        raise ConfigError(f"stages.{stage}.protected: expected true or false, got {protected!r}")
    if stage in PROTECTED_STAGES:
        if protected is False:
            raise ConfigError(f"stages.{stage}.protected: stage {stage} is always protected")
        protected = True
    if protected:
        if account is None or region is None:
            raise ConfigError(f"stage {stage} is protected: set stages.{stage}.account and stages.{stage}.region "
                              f"in cdk.json, so that it deploys to that account and region only")
        if retain_data is not True:
            raise ConfigError(f"stage {stage} is protected: its data is kept (retain_data must be true)")
    return {"account": account, "region": region, "protected": bool(protected)}


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


def scan_concurrency(segments: int) -> int:
    """Reserved concurrency of the scan function for ``segments``.

    Per segment, two scans run at once in steady state: the one publishing minute M and the one the
    tick started ahead for M+1. Headroom (a quarter of the segments, at least 4) covers the seconds
    where a third overlaps at a minute edge, catch-up scans and retried invocations; an async event
    that is throttled anyway waits in Lambda's queue (up to the maximum event age), it is not lost.
    """
    return 2 * segments + max(4, segments // 4)


def _parse(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text in ("true", "false", "null") or text[:1] in "[{" or re.fullmatch(r"-?\d+", text):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"cannot parse context value {value!r}: {exc}") from exc
    return value


def _text(raw: dict[str, Any], key: str) -> str:
    value = raw[key]
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{key}: expected a non-empty string, got {value!r}")
    return value


def _int(raw: dict[str, Any], key: str, low: int, high: int) -> int:
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{key}: expected an integer in [{low}, {high}], got {value!r}")
    return value


def _bool(raw: dict[str, Any], key: str) -> bool:
    value = raw[key]
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    return value


def _list(raw: dict[str, Any], key: str) -> list[str]:
    value = raw[key]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{key}: expected a list of strings, got {value!r}")
    return value


def is_zone_id(zone: str) -> bool:
    """``use1-az1`` (a zone ID, the same physical zone in every account), not ``us-east-1a`` (a name)."""
    return bool(_ZONE_ID.match(zone))


def _zones(raw: dict[str, Any]) -> tuple[str, ...]:
    zones = _list(raw, "availability_zones")
    if not zones:
        return ()
    if len(zones) < 2 or len(set(zones)) != len(zones):
        raise ConfigError(f"availability_zones: expected two or more different zones, got {zones!r}")
    if not (all(_ZONE_ID.match(z) for z in zones) or all(_ZONE_NAME.match(z) for z in zones)):
        raise ConfigError(f"availability_zones: expected all zone IDs (use1-az1) or all zone names (us-east-1a), "
                          f"got {zones!r}")
    return tuple(zones)


def _choice(raw: dict[str, Any], key: str, choices: tuple[str, ...]) -> str:
    value = raw[key]
    if value not in choices:
        raise ConfigError(f"{key}: expected one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _topics(value: Any, *granted: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [t.strip() for t in value.split(",") if t.strip()]
    if not isinstance(value, list) or not all(isinstance(t, str) and _TOPIC.match(t) for t in value):
        raise ConfigError(f"allowed_topics: expected a list of Kafka topic names, got {value!r}")
    return tuple(dict.fromkeys(["jobs", *value, *granted]))


def _tenant_topics(value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise ConfigError(f"tenant_topics: expected an object of tenant -> list of topics, got {value!r}")
    out = []
    for tenant, topics in value.items():
        if not tenant or not isinstance(topics, list) or not all(isinstance(t, str) and _TOPIC.match(t)
                                                                 for t in topics):
            raise ConfigError(f"tenant_topics: tenant {tenant!r}: expected a list of Kafka topic names, got {topics!r}")
        out.append((tenant, tuple(dict.fromkeys(topics))))
    return tuple(out)


def _tenant_map(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(isinstance(t, str) and t and p for p, t in value.items()):
        raise ConfigError(f"tenant_map: expected an object of principal -> tenant name, got {value!r}")
    return tuple(value.items())


_IAM_ARN = re.compile(r"^arn:(?P<partition>aws[a-z-]*):iam::(?P<account>[0-9]{12}):"
                      r"(?P<kind>root|role|user)(?P<path>/(?:[^/]+/)*)?(?P<name>[^/]*)$")
#: Stages whose API admits the deploying account when ``api_principals`` is empty: a developer's own stage.
OPEN_ACCOUNT_STAGES = frozenset({"dev"})


def is_account(principal: str) -> bool:
    """An ``api_principals`` entry naming a whole account (12 digits), not one role or user."""
    return bool(_ACCOUNT.match(principal))


def _api_principals(value: Any, stage: str, *, api_auth: str,
                    tenant_map: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """Account IDs and role or user ARNs, in the context's order (an account's ``:root`` ARN becomes its ID)."""
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"api_principals: expected a list of account IDs and IAM role or user ARNs, got {value!r}")
    principals = []
    for entry in value:
        match = _IAM_ARN.match(entry)
        if is_account(entry) or (match and match["kind"] == "root" and not match["path"]):
            principals.append(match["account"] if match else entry)
        elif match and match["kind"] != "root" and match["name"]:
            principals.append(entry)
        else:
            raise ConfigError(f"api_principals: {entry!r} is neither an account ID (12 digits) nor an IAM role or user "
                              f"ARN (arn:aws:iam::123456789012:role/<name>; a role, not a session of it)")
    principals = list(dict.fromkeys(principals))
    if api_auth != "iam":
        if principals:
            raise ConfigError("api_principals: with api_auth cognito the user pool admits the tenants (an "
                              "administrator creates each user); drop api_principals or use api_auth iam")
        return ()
    if not principals and stage not in OPEN_ACCOUNT_STAGES:
        raise ConfigError(f"api_principals: stage {stage} would admit every principal of its account as a tenant; "
                          f"list the accounts or roles that may call its API in stages.{stage}.api_principals in "
                          f"cdk.json (e.g. [\"arn:aws:iam::123456789012:role/payments-ci\"], or the account ID to "
                          f"admit all of its principals); docs/deploy.md, 'Admitting tenants'")
    if principals:
        for mapped, _tenant in tenant_map:
            if not _admits(principals, mapped):
                raise ConfigError(f"api_principals: tenant_map maps {mapped!r}, which api_principals does not admit "
                                  f"(the API would refuse it); add it, or its account, to api_principals")
    return tuple(principals)


def _admits(principals: Sequence[str], principal: str) -> bool:
    """Whether the allow-list admits a ``tenant_map`` key: its account, or the same role or user (a role's ARN in
    ``tenant_map`` has no path, as ``jobrunner.api.tenancy`` names it); a key that is no IAM ARN is not checked."""
    account = re.match(r"^arn:[a-z-]+:(?:iam|sts)::([0-9]{12}):", principal)
    if account is None:
        return True
    if account[1] in principals:
        return True
    match = _IAM_ARN.match(principal)
    if match is None:
        return False
    wanted = (match["account"], match["kind"], match["name"])
    return any((m := _IAM_ARN.match(p)) is not None and (m["account"], m["kind"], m["name"]) == wanted
               for p in principals)


def _tenant_of_principal(principal: str, tenant_map: dict[str, str]) -> str:
    """The tenant an ``api_principals`` ARN acts as: a role by its ARN without path (as ``jobrunner.api.tenancy``
    names it), then mapped."""
    match = _IAM_ARN.match(principal)
    if match and match["kind"] == "role":
        principal = f"arn:{match['partition']}:iam::{match['account']}:role/{match['name']}"
    return tenant_map.get(principal, principal)


def tenant_spread(config: DeploymentConfig) -> str | None:
    """Why the stage admits more than one tenant, or None when it admits one (or only dev's own account)."""
    if config.api_auth == "cognito":
        return "api_auth cognito: every user of the pool is a tenant"
    accounts = [p for p in config.api_principals if is_account(p)]
    if accounts:
        return f"api_principals admits account {accounts[0]}, each of whose roles and users is a tenant"
    tenant_map = dict(config.tenant_map)
    named = {_tenant_of_principal(p, tenant_map) for p in config.api_principals}
    named |= set(tenant_map.values()) | (set(config.tenant_limits) - {"*"}) | set(config.operators)
    if len(named) > 1:
        return f"api_principals, tenant_map, tenant_limits and operators name {len(named)} tenants"
    return None


def _refuse_shared_topics(config: DeploymentConfig) -> None:
    """A stage of several tenants deploys with per-tenant topics, or says it accepts shared ones."""
    spread = tenant_spread(config)
    if spread is None or config.tenant_topics or config.shared_worker_topics:
        return
    raise ConfigError(f"tenant_topics: stage {config.stage} admits more than one tenant ({spread}), and with "
                      f"tenant_topics empty every tenant's executions (payloads and result tokens) go to the shared "
                      f"jobs topic, which any holder of WorkerPolicy reads. Give the tenants topics of their own in "
                      f"stages.{config.stage}.tenant_topics in cdk.json (each named tenant gets its own worker "
                      f"policy), or set stages.{config.stage}.shared_worker_topics to true to accept shared topics "
                      f"(docs/deploy.md, 'Admitting tenants')")


#: Requests per source IP per 5 minutes that "auto" allows: half the stage's throttle over the window, as
#: ``tenant_limits`` keeps one tenant to half of it.
WAF_WINDOW_SECONDS = 300
#: WAF's bounds of a rate-based rule's limit.
WAF_LIMITS = (10, 2_000_000_000)


def _waf_rate_limit(value: Any, api_rate_limit: int, *, protected: bool) -> int | None:
    if value == "auto":
        return api_rate_limit * WAF_WINDOW_SECONDS // 2 if protected else None
    if value is None or value == 0:
        return None
    low, high = WAF_LIMITS
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"waf_rate_limit: expected \"auto\", 0 (no web ACL) or requests per source IP per 5 "
                          f"minutes in [{low}, {high}], got {value!r}")
    return value


_DOMAIN = re.compile(r"^(?=.{4,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
_CERTIFICATE = re.compile(r"^arn:aws[a-z-]*:acm:[a-z]{2}(-[a-z]+)+-[0-9]:[0-9]{12}:certificate/[0-9a-f-]{36}$")


def _domain(value: Any, key: str, *, region: str | None) -> CustomDomain | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"domain_name", "certificate_arn"}:
        raise ConfigError(f"{key}: expected null or {{\"domain_name\": \"jobs.example.com\", \"certificate_arn\": "
                          f"\"arn:aws:acm:...\"}}, got {value!r}")
    name, certificate = value["domain_name"], value["certificate_arn"]
    if not isinstance(name, str) or not _DOMAIN.match(name):
        raise ConfigError(f"{key}.domain_name: expected a lowercase domain name such as jobs.example.com, got {name!r}")
    if not isinstance(certificate, str) or not _CERTIFICATE.match(certificate):
        raise ConfigError(f"{key}.certificate_arn: expected an ACM certificate ARN, got {certificate!r}")
    domain = CustomDomain(domain_name=name, certificate_arn=certificate)
    if region is not None and domain.certificate_region != region:
        raise ConfigError(f"{key}.certificate_arn: the certificate is in {domain.certificate_region}; the API is "
                          f"regional and takes a certificate of its own region, {region}")
    return domain


#: CloudFront takes certificates from this region only.
CLOUDFRONT_CERTIFICATE_REGION = "us-east-1"


def _dashboard_domain(value: Any, *, web_dashboard: bool) -> CustomDomain | None:
    domain = _domain(value, "dashboard_domain", region=CLOUDFRONT_CERTIFICATE_REGION)
    if domain is not None and not web_dashboard:
        raise ConfigError("dashboard_domain: with web_dashboard false there is no distribution to put on it")
    return domain


def _tenant_limits(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"tenant_limits: expected an object of tenant -> limits, got {value!r}")
    try:
        TenantLimits.parse(value, max_payload_bytes=DEFAULT_MAX_PAYLOAD_BYTES)
    except ValueError as exc:
        raise ConfigError(f"tenant_limits: {exc}") from exc
    return dict(value)


def _names(value: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{key}: expected a list of tenant names, got {value!r}")
    return tuple(dict.fromkeys(value))


#: Stages whose "auto" reserves nothing: a new account's quota (as low as 10) cannot hold a reservation,
#: since Lambda keeps 100 unreserved; ``python -m infra.preflight`` checks the rest.
UNRESERVED_STAGES = frozenset({"dev"})


def _reserved(value: Any, segments: int, stage: str) -> int | None:
    if value == "auto":
        return None if stage in UNRESERVED_STAGES else scan_concurrency(segments)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10_000:
        raise ConfigError(f"scan_reserved_concurrency: expected \"auto\" or an integer >= 0, got {value!r}")
    return value or None


#: Stages whose alarms may notify nobody: a developer's own stage, watched on its dashboard if at all.
UNWATCHED_STAGES = frozenset({"dev"})
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def _alarm_email(value: Any, stage: str) -> str | None:
    """The alarm topic's subscriber; a stage other than dev without one would raise alarms nobody receives."""
    if value is None or value == "":
        if stage in UNWATCHED_STAGES:
            return None
        raise ConfigError(f"alarm_email: stage {stage} would send its alarms to a topic nobody reads; set "
                          f"stages.{stage}.alarm_email in cdk.json (or -c alarm_email=oncall@example.com)")
    if not isinstance(value, str) or not _EMAIL.match(value):
        raise ConfigError(f"alarm_email: expected an email address, got {value!r}")
    return value


_URL = re.compile(r"^https://[^\s/#?]+\.[^\s/#?]+(/[^\s#]*)?$")


def _runbook_url(value: Any, *, web_dashboard: Any) -> str | None:
    """Where the alarms' e-mails link the runbooks: an address a person opens, not a path in the checkout."""
    if value is None or value == "":
        if web_dashboard is False:
            raise ConfigError("runbook_url: with web_dashboard false the stack serves no copy of the runbooks; set "
                              "runbook_url to the https URL of docs/runbooks.md in your repository (e.g. "
                              "https://github.com/<owner>/<repo>/blob/main/docs/runbooks.md)")
        return None
    if not isinstance(value, str) or not _URL.match(value):
        raise ConfigError(f"runbook_url: expected the https URL of docs/runbooks.md as a browser shows it, without "
                          f"a #fragment (each alarm adds its own), got {value!r}")
    return value


def _log_retention(raw: dict[str, Any]) -> int:
    value = _int(raw, "log_retention_days", 1, 3653)
    if value not in LOG_RETENTION_DAYS:
        raise ConfigError(f"log_retention_days: {value} is not a CloudWatch Logs retention; use one of "
                          f"{sorted(LOG_RETENTION_DAYS)}")
    return value


def _adopt_keyspace(raw: dict[str, Any]) -> bool:
    adopt = _bool(raw, "adopt_keyspace")
    if adopt and raw["existing_cassandra"] is not None:
        raise ConfigError("adopt_keyspace: a keyspace to adopt is an Amazon Keyspaces one; with existing_cassandra "
                          "the stack creates no keyspace anyway")
    return adopt


def _existing_cassandra(value: Any) -> ExistingCassandra | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError(f"existing_cassandra: expected null or an object, got {value!r}")
    unknown = set(value) - {"contact_points", "port", "secret_arn"}
    if unknown:
        raise ConfigError(f"existing_cassandra: unknown keys {sorted(unknown)}")
    points = value.get("contact_points")
    if isinstance(points, str):
        points = [p.strip() for p in points.split(",") if p.strip()]
    if not isinstance(points, list) or not points or not all(isinstance(p, str) and p for p in points):
        raise ConfigError("existing_cassandra.contact_points: expected a non-empty list of hosts")
    port = value.get("port", 9042)
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ConfigError(f"existing_cassandra.port: expected a TCP port, got {port!r}")
    secret = value.get("secret_arn")
    if secret is not None and not (isinstance(secret, str) and secret.startswith("arn:")):
        raise ConfigError(f"existing_cassandra.secret_arn: expected a Secrets Manager ARN, got {secret!r}")
    return ExistingCassandra(contact_points=tuple(points), port=port, secret_arn=secret)


def _groups(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [g.strip() for g in value.split(",") if g.strip()]
    if not isinstance(value, list) or not all(isinstance(g, str) and _TOPIC.match(g) for g in value):
        raise ConfigError(f"worker_groups: expected a list of consumer group names, got {value!r}")
    return tuple(dict.fromkeys(value))


def _client_vpcs(value: Any) -> tuple[KafkaClientVpc, ...]:
    if not isinstance(value, list) or len(value) > 4:
        raise ConfigError(f"kafka_client_vpcs: expected a list of at most 4 VPCs (MSK Serverless takes 5 with the "
                          f"stack's own), got {value!r}")
    vpcs = []
    for entry in value:
        if not isinstance(entry, dict) or set(entry) - {"subnet_ids", "security_group_ids"}:
            raise ConfigError(f"kafka_client_vpcs: expected {{\"subnet_ids\": [...], \"security_group_ids\": [...]}}, "
                              f"got {entry!r}")
        subnets, groups = entry.get("subnet_ids"), entry.get("security_group_ids", [])
        if (not isinstance(subnets, list) or len(subnets) < 2
                or not all(isinstance(s, str) and s.startswith("subnet-") for s in subnets)):
            raise ConfigError(f"kafka_client_vpcs: subnet_ids needs two or more subnet-... ids in different zones, "
                              f"got {subnets!r}")
        if not isinstance(groups, list) or not all(isinstance(g, str) and g.startswith("sg-") for g in groups):
            raise ConfigError(f"kafka_client_vpcs: security_group_ids must be sg-... ids, got {groups!r}")
        vpcs.append(KafkaClientVpc(subnet_ids=tuple(subnets), security_group_ids=tuple(groups)))
    return tuple(vpcs)


#: What ``kafka_provisioned`` may hold, with the values its omitted fields take.
_PROVISIONED_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(ProvisionedKafka)}
_INSTANCE_TYPE = re.compile(r"^kafka\.[a-z0-9]+\.[a-z0-9]+$")
_KAFKA_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.([0-9]+|x)(\.[a-z]+)?$")
#: MSK's bounds of a Standard broker's EBS storage, in GiB (its quota page).
STORAGE_GIB = (1, 16384)


def _provisioned(value: Any, zones: tuple[str, ...],
                 client_vpcs: tuple[KafkaClientVpc, ...]) -> ProvisionedKafka | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError(f"kafka_provisioned: expected null or an object such as {{\"instance_type\": "
                          f"\"kafka.t3.small\", \"brokers_per_zone\": 1}}, got {value!r}")
    if client_vpcs:
        raise ConfigError("kafka_provisioned: kafka_client_vpcs (endpoints of the cluster in other VPCs) is an MSK "
                          "Serverless feature; set one of the two, not both")
    if len(zones) > 3:
        raise ConfigError(f"kafka_provisioned: a provisioned MSK cluster takes two or three zones, "
                          f"availability_zones lists {len(zones)}")
    unknown = set(value) - set(_PROVISIONED_DEFAULTS)
    if unknown:
        raise ConfigError(f"kafka_provisioned: unknown keys {sorted(unknown)} (known: "
                          f"{', '.join(_PROVISIONED_DEFAULTS)})")
    given = {**_PROVISIONED_DEFAULTS, **value}
    instance_type, brokers, storage, version = (
        given["instance_type"], given["brokers_per_zone"], given["storage_gib"], given["kafka_version"])
    if not (isinstance(instance_type, str) and _INSTANCE_TYPE.match(instance_type)):
        raise ConfigError(f"kafka_provisioned.instance_type: expected an MSK Standard broker type such as "
                          f"kafka.t3.small or kafka.m7g.large, got {instance_type!r}")
    if isinstance(brokers, bool) or not isinstance(brokers, int) or not 1 <= brokers <= 10:
        raise ConfigError(f"kafka_provisioned.brokers_per_zone: expected an integer in [1, 10], got {brokers!r}")
    low, high = STORAGE_GIB
    if isinstance(storage, bool) or not isinstance(storage, int) or not low <= storage <= high:
        raise ConfigError(f"kafka_provisioned.storage_gib: expected an integer in [{low}, {high}] (MSK's bounds per "
                          f"broker), got {storage!r}")
    if not (isinstance(version, str) and _KAFKA_VERSION.match(version)):
        raise ConfigError(f"kafka_provisioned.kafka_version: expected an MSK version such as 3.8.x or 3.6.0, "
                          f"got {version!r}")
    return ProvisionedKafka(instance_type=instance_type, brokers_per_zone=brokers, storage_gib=storage,
                            kafka_version=version)


def _endpoint_zones(value: Any, zones: tuple[str, ...]) -> int | None:
    if value is None:
        return None
    count = len(zones) or 2  # empty: the two zones ZONE_IDS lists for the region
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= count:
        raise ConfigError(f"endpoint_zones: expected null (every zone) or an integer in [1, {count}] (the VPC's "
                          f"zones), got {value!r}")
    return value


# Cost levers (issue #33; docs/scaling.md, "Cost levers"): sizing from the expected rate, one parse per option.
#: A busy minute: all of a minute's executions due at its first second, published and answered within this.
BUSY_MINUTE_DRAIN_S = 15
#: Executions a second one scan publishes per vCPU (CPU-bound: ≈ 0.44 ms of CPU an execution, docs/benchmarks.md;
#: ≈ 640/s at 512 MB), and results one results invocation applies (one per Kafka partition; issue #33).
SCAN_EXECUTIONS_PER_VCPU_S = 2_270
RESULTS_PER_PARTITION_S = 667
#: Lambda's whole vCPU is 1,769 MB; capacity is sized this much above a busy minute's need.
FULL_VCPU_MB = 1769
SIZING_HEADROOM = 1.25
#: What "auto" gives a stage that does not say its rate (the values before issue #33), and the fewest
#: partitions a topic gets (the workers of a group consume in parallel up to one per partition).
UNSIZED_SEGMENTS = 16
UNSIZED_PARTITIONS = 3
MIN_PARTITIONS = 3
#: Tables whose rows nothing rebuilds: jobs and calendars (what users declared), the history (the only record of
#: each execution: what ran, its outcome, the RUNNING record the results and the watchdog read) and the change log
#: (the audit trail). Not task_schedule_v2, an index the reconciler rebuilds from jobs and history, nor
#: job_idempotency (a day's submit keys, stale by the time a restore lands).
PITR_TABLES = ("job_table_v2", "calendars", "task_history_v2", "job_changes")
XRAY_MODES = ("active", "sampled", "off")
KEYSPACES_CAPACITY = ("on-demand", "provisioned")


def busy_minute_rate(executions_per_day: float) -> float:
    """Executions a second a busy minute asks for: a minute's share of the day, due at once, out in 15 s."""
    return executions_per_day / 1440 / BUSY_MINUTE_DRAIN_S


def segments_for(executions_per_day: float, scan_memory_mb: int) -> int:
    """The fewest segments whose scans publish a busy minute (with headroom), as a power of two: a divisor or a
    multiple of the job table's 16 shards, so a scan reads each tenant's jobs of a page from as few shards as it can."""
    per_scan = min(scan_memory_mb / FULL_VCPU_MB, 1.0) * SCAN_EXECUTIONS_PER_VCPU_S
    needed = max(1, math.ceil(busy_minute_rate(executions_per_day) * SIZING_HEADROOM / per_scan))
    return 1 << (needed - 1).bit_length()


def partitions_for(executions_per_day: float) -> int:
    """Partitions for the results function (one invocation each) to apply a busy minute's results, with headroom."""
    needed = math.ceil(busy_minute_rate(executions_per_day) * SIZING_HEADROOM / RESULTS_PER_PARTITION_S)
    return max(MIN_PARTITIONS, needed)


def _expected(raw: dict[str, Any]) -> int | None:
    value = raw["expected_executions_per_day"]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100_000_000_000:
        raise ConfigError(f"expected_executions_per_day: expected null or a whole number of executions a day, "
                          f"got {value!r}")
    return value


def _segments(raw: dict[str, Any]) -> int:
    if raw["segments"] != "auto":
        return _int(raw, "segments", 1, 1024)
    expected = _expected(raw)
    memory = _int(raw, "scan_memory_mb", 128, 10_240)
    return UNSIZED_SEGMENTS if expected is None else min(segments_for(expected, memory), 1024)


def _kafka_partitions(raw: dict[str, Any]) -> int:
    if raw["kafka_partitions"] != "auto":
        return _int(raw, "kafka_partitions", 1, 200)
    expected = _expected(raw)
    return UNSIZED_PARTITIONS if expected is None else min(partitions_for(expected), 200)


def _results_pollers(raw: dict[str, Any], partitions: int, expected: int | None) -> int:
    value = raw["results_pollers"]
    if value == "auto":
        one_keeps_up = expected is not None and busy_minute_rate(expected) <= RESULTS_PER_PARTITION_S
        return 0 if one_keeps_up else partitions
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= partitions:
        raise ConfigError(f"results_pollers: expected \"auto\", 0 (on-demand) or at most kafka_partitions "
                          f"({partitions}) provisioned pollers, got {value!r}")
    return value


def _log_sample_rate(raw: dict[str, Any]) -> float:
    value = raw["results_log_sample_rate"]
    if isinstance(value, str) and re.fullmatch(r"[0-9]*\.?[0-9]+", value):  # -c gives "0.05" as a string
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ConfigError(f"results_log_sample_rate: expected a share in [0, 1], got {value!r}")
    return float(value)


def _pitr_tables(value: Any) -> tuple[str, ...]:
    if value == "auto":
        return PITR_TABLES
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and _KEYSPACE.match(v) for v in value):
        raise ConfigError(f"point_in_time_recovery: expected \"auto\" or a list of table names, got {value!r}")
    return tuple(dict.fromkeys(value))


def _keyspaces_capacity(raw: dict[str, Any], expected: int | None, *, protected: bool) -> str:
    value = raw["keyspaces_capacity"]
    if value == "auto":
        return "provisioned" if protected and expected is not None else "on-demand"
    if value not in KEYSPACES_CAPACITY:
        raise ConfigError(f"keyspaces_capacity: expected \"auto\", \"on-demand\" or \"provisioned\", got {value!r}")
    if value == "provisioned" and expected is None:
        raise ConfigError("keyspaces_capacity: provisioned capacity is sized from expected_executions_per_day; "
                          "set it too")
    return str(value)


def _cost_levers(raw: dict[str, Any], *, protected: bool) -> dict[str, Any]:
    expected = _expected(raw)
    return {
        "expected_executions_per_day": expected,
        "results_pollers": _results_pollers(raw, _kafka_partitions(raw), expected),
        "results_log_sample_rate": _log_sample_rate(raw),
        "xray_tracing": _choice(raw, "xray_tracing", XRAY_MODES),
        "pitr_tables": _pitr_tables(raw["point_in_time_recovery"]),
        "keyspaces_capacity": _keyspaces_capacity(raw, expected, protected=protected),
    }
