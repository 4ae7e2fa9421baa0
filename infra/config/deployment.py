"""``DeploymentConfig``: a stage's context, checked once, as one frozen pydantic model.

Options the functions also read (``infra.config.runtime.RUNTIME``) are checked by the runtime's ``Settings`` and
held there (``settings``); every other option is a field below, whose type and validator say what it accepts.
Fields are validated in the order declared, so a rule that reads another option comes after it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import ConfigDict, ValidationError, ValidationInfo, field_validator, model_validator

from infra.config import tenancy
from infra.config.context import read_context, stack_name_of
from infra.config.errors import Refusal, refused
from infra.config.levers import (
    KEYSPACES_CAPACITY,
    MAX_PARTITIONS,
    MAX_SEGMENTS,
    PITR_TABLES,
    XRAY_MODES,
    Sizing,
    one_poller_keeps_up,
    sized_partitions,
    sized_segments,
)
from infra.config.parts import CustomDomain, ExistingCassandra, KafkaClientVpc, ProvisionedKafka, Targets, zones
from infra.config.runtime import CASSANDRA, RUNTIME, TARGETS, runtime_settings
from infra.config.stages import stage_values
from infra.config.types import Flag, OptionalText, Text, a_match, a_whole, names, one_of, share, whole
from jobrunner.config import Settings
from jobrunner.domain.topics import EVERY_OTHER_TENANT, is_topic_name

if TYPE_CHECKING:
    from collections.abc import Callable

ARCHITECTURES = ("arm64", "x86_64")
API_AUTH = ("iam", "cognito")
#: The retentions CloudWatch Logs accepts, in days, with their name in ``aws_logs.RetentionDays``.
LOG_RETENTION_DAYS = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
    60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS",
    365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS", 1096: "THREE_YEARS",
    1827: "FIVE_YEARS", 2192: "SIX_YEARS", 2557: "SEVEN_YEARS", 2922: "EIGHT_YEARS", 3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}
#: Requests per source IP per 5 minutes that "auto" allows: half the stage's throttle over the window, as
#: ``tenant_limits`` keeps one tenant to half of it.
WAF_WINDOW_SECONDS = 300
#: WAF's bounds of a rate-based rule's limit.
WAF_LIMITS = (10, 2_000_000_000)
#: CloudFront takes certificates from this region only.
CLOUDFRONT_CERTIFICATE_REGION = "us-east-1"
#: Stages whose "auto" reserves nothing: a new account's quota (as low as 10) cannot hold a reservation,
#: since Lambda keeps 100 unreserved; ``python -m infra.preflight`` checks the rest.
UNRESERVED_STAGES = frozenset({"dev"})
#: Stages whose alarms may notify nobody: a developer's own stage, watched on its dashboard if at all.
UNWATCHED_STAGES = frozenset({"dev"})
#: A keyspace's or a table's name.
_NAME = r"^[a-z][a-z0-9_]{0,47}$"
_EMAIL = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"
_URL = r"^https://[^\s/#?]+\.[^\s/#?]+(/[^\s#]*)?$"


def scan_concurrency(segments: int) -> int:
    """Reserved concurrency of the scan function for ``segments``.

    Per segment, two scans run at once in steady state: the one publishing minute M and the one the
    tick started ahead for M+1. Headroom (a quarter of the segments, at least 4) covers the seconds
    where a third overlaps at a minute edge, catch-up scans and retried invocations; an async event
    that is throttled anyway waits in Lambda's queue (up to the maximum event age), it is not lost.
    """
    return 2 * segments + max(4, segments // 4)


class DeploymentConfig(Sizing):
    """A stage's options; build it with ``from_context`` (the defaults live in ``CONTEXT_DEFAULTS``). The options
    a stage is sized from (``expected_executions_per_day``, ``scan_memory_mb``) come first, from ``Sizing``.

    Adding an option: its default and meaning in ``CONTEXT_DEFAULTS`` (and ``cdk.json``, ``docs/deploy.md``), then
    one field here (its type says what it accepts; a ``field_validator`` for a rule that reads other options), or,
    for a runtime setting, one line in ``RUNTIME`` and a property reading it from ``settings``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The runtime settings the context gives every function (``RUNTIME``), as the functions read them.
    settings: Settings
    stage: str
    #: The stack's environment, from ``stages``; None: where the credentials point (env-agnostic template).
    account: str | None
    region: str | None
    #: Termination protection on the stack, deletion protection on the resources that offer it.
    protected: bool
    lambda_architecture: Annotated[str, one_of(*ARCHITECTURES)]
    api_auth: Annotated[str, one_of(*API_AUTH)]
    #: Account IDs and IAM role or user ARNs the API's resource policy admits; empty: the deploying account
    #: (stage dev only) or api_auth cognito (the user pool admits).
    api_principals: tuple[str, ...]
    api_rate_limit: Annotated[int, whole(1, 10_000)]
    api_burst_limit: Annotated[int, whole(1, 5_000)]
    #: Requests per source IP in any 5 minutes, above which the web ACL blocks; None: no web ACL.
    waf_rate_limit: int | None
    api_domain: CustomDomain | None
    web_dashboard: Flag
    dashboard_domain: CustomDomain | None
    keyspace: str
    existing_cassandra: ExistingCassandra | None
    #: The targets jobs may name, and so the delivery function; None: none (no delivery function).
    targets: Targets | None
    #: The keyspace and its tables exist already: used, not created (nor deleted with the stack).
    adopt_keyspace: Flag
    #: A stage admitting more than one tenant may leave tenant_topics empty (its tenants then share ``jobs``).
    shared_worker_topics: Flag
    kafka_partitions: Annotated[int, whole(1, MAX_PARTITIONS)]
    scan_reserved_concurrency: int | None
    reconcile_interval_minutes: Annotated[int, whole(1, 15)]
    alarm_email: str | None
    monthly_budget_usd: int | None
    #: The runbooks page's https URL; None: the web dashboard's copy.
    runbook_url: str | None
    log_retention_days: Annotated[int, whole(1, 3653)]
    retain_data: Flag
    vpc_cidr: Text
    availability_zones: Annotated[tuple[str, ...], names("zones")]
    keyspaces_ca_bundle: OptionalText
    worker_groups: Annotated[tuple[str, ...], names("consumer group names", accepts=is_topic_name)]
    kafka_client_vpcs: tuple[KafkaClientVpc, ...]
    kafka_provisioned: ProvisionedKafka | None
    endpoint_zones: int | None
    dependency_layer_dir: OptionalText
    build_cache_dir: Text
    # Cost levers (issue #33; infra.config.levers).
    #: The results trigger's maximum provisioned pollers; 0: on-demand mode (no bounded retries).
    results_pollers: int
    #: Share of the results function's invocations that log at INFO.
    results_log_sample_rate: Annotated[float, share()]
    xray_tracing: Annotated[str, one_of(*XRAY_MODES)]
    #: The Keyspaces tables with point-in-time recovery.
    point_in_time_recovery: Annotated[tuple[str, ...], names("table names", accepts=lambda t: bool(
        re.match(_NAME, t)))]
    keyspaces_capacity: Annotated[str, one_of(*KEYSPACES_CAPACITY)]

    @classmethod
    def from_context(cls, get: Callable[[str], Any]) -> DeploymentConfig:
        """``get`` is ``node.try_get_context``; keys it doesn't know take their defaults. A value refused raises
        ``ConfigError`` naming the stage, the key and the reason."""
        stage, values = stage_values(read_context(get))
        try:
            sizing = Sizing.model_validate({key: values[key] for key in Sizing.model_fields})
            # "auto" segments made a number here: they are a runtime setting, which ``Settings`` checks.
            segments = sized_segments(values["segments"], sizing.expected_executions_per_day, sizing.scan_memory_mb)
            settings = runtime_settings({**values, "segments": segments}, stage)
            options = {key: value for key, value in values.items() if key not in RUNTIME}
            return cls.model_validate({**options, "settings": settings})
        except ValidationError as exc:
            raise refused(exc, stage) from None

    # The runtime settings, by the context's names.
    @property
    def segments(self) -> int:
        return self.settings.segments

    @property
    def one_time_rows_expire(self) -> bool:
        return self.settings.one_time_rows_expire

    @property
    def allowed_topics(self) -> tuple[str, ...]:
        """``jobs``, the topics named, then those granted to tenants."""
        return self.settings.allowed_topics

    @property
    def tenant_topics(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """(tenant, its topics) in the context's order; empty: no per-tenant grants."""
        return tuple(self.settings.tenant_topics.items())

    @property
    def tenant_map(self) -> tuple[tuple[str, str], ...]:
        return tuple(self.settings.tenant_map.items())

    @property
    def tenant_limits(self) -> dict[str, Any]:
        """As the context gives it (validated by ``jobrunner.domain.limits``); passed to the functions as JSON."""
        return self.settings.tenant_limit_table

    @property
    def operators(self) -> tuple[str, ...]:
        return self.settings.operators

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
    def nat_gateways(self) -> int:
        """NAT gateways for the delivery function's HTTPS targets: none without them; one per zone on a protected
        stage (a zone's outage then stops no other zone's deliveries), else one (a zone's outage fails the
        deliveries through it, retried under each job's policy). Priced in ``bench/cost``."""
        if self.targets is None or not self.targets.https:
            return 0
        return (len(self.availability_zones) or 2) if self.protected else 1

    @property
    def shared_topics(self) -> tuple[str, ...]:
        """The allowed topics no named tenant has to itself (granted to ``*``, or to no tenant): what the stack's
        ``WorkerPolicy`` reads. A topic granted to named tenants only is read by their own worker policies."""
        named = {t for tenant, topics in self.tenant_topics if tenant != EVERY_OTHER_TENANT for t in topics}
        everyone = {t for tenant, topics in self.tenant_topics if tenant == EVERY_OTHER_TENANT for t in topics}
        return tuple(t for t in self.allowed_topics if t not in named - everyone)

    @field_validator("api_principals", mode="before")
    @classmethod
    def _principals(cls, value: Any, info: ValidationInfo) -> tuple[str, ...]:
        settings: Settings = info.data["settings"]
        return tenancy.api_principals(value, info.data["stage"], api_auth=info.data.get("api_auth", "iam"),
                                      tenant_map=settings.tenant_map)

    @field_validator("waf_rate_limit", mode="before")
    @classmethod
    def _waf(cls, value: Any, info: ValidationInfo) -> int | None:
        """"auto": on for a protected stage at half its throttle over the window; a number; 0 or null: none."""
        if value == "auto":
            return info.data.get("api_rate_limit", 0) * WAF_WINDOW_SECONDS // 2 if info.data["protected"] else None
        if value is None or value == 0:
            return None
        low, high = WAF_LIMITS
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"expected \"auto\", 0 (no web ACL) or requests per source IP per 5 minutes in "
                             f"[{low}, {high}], got {value!r}")
        return value

    @field_validator("api_domain")
    @classmethod
    def _api_certificate(cls, value: CustomDomain | None, info: ValidationInfo) -> CustomDomain | None:
        """The API is regional: its certificate is of the stack's region (when pinned)."""
        region = info.data["region"]
        if value is not None and region is not None and value.certificate_region != region:
            raise Refusal("api_domain.certificate_arn", f"the certificate is in {value.certificate_region}; the "
                                                        f"API is regional and takes a certificate of its own region, "
                                                        f"{region}")
        return value

    @field_validator("dashboard_domain")
    @classmethod
    def _dashboard_certificate(cls, value: CustomDomain | None, info: ValidationInfo) -> CustomDomain | None:
        if value is None:
            return None
        if value.certificate_region != CLOUDFRONT_CERTIFICATE_REGION:
            raise Refusal("dashboard_domain.certificate_arn", f"the certificate is in {value.certificate_region}; "
                                                              f"CloudFront takes certificates from "
                                                              f"{CLOUDFRONT_CERTIFICATE_REGION} only")
        if info.data.get("web_dashboard") is False:
            raise ValueError("with web_dashboard false there is no distribution to put on it")
        return value

    @field_validator("keyspace", mode="before")
    @classmethod
    def _keyspace(cls, value: Any, info: ValidationInfo) -> Any:
        """null: ``jobrunner_<stage>``."""
        value = value or f"jobrunner_{info.data['stage'].replace('-', '_')}"
        return a_match(value, _NAME, "1-48 lowercase letters, digits or underscores")

    @field_validator("existing_cassandra", mode="before")
    @classmethod
    def _cluster(cls, value: Any, info: ValidationInfo) -> Any:
        """The cluster's contact points, port and secret as ``Settings`` read them (``runtime_settings``)."""
        if not isinstance(value, dict):
            return value
        settings: Settings = info.data["settings"]
        read = {key: getattr(settings, attribute) for key, attribute in CASSANDRA.items()}
        return {key: read[key] if key in read and value[key] not in (None, "", [], ()) else given
                for key, given in value.items()}

    @field_validator("targets", mode="before")
    @classmethod
    def _targets(cls, value: Any, info: ValidationInfo) -> Any:
        """The kinds and allow-lists as ``Settings`` read them (``runtime_settings``); no kinds as given (``Settings``
        would read none as its default, every kind), for ``Targets`` to refuse."""
        if not isinstance(value, dict):
            return value
        settings: Settings = info.data["settings"]
        return {key: getattr(settings, TARGETS[key]) if key in TARGETS and given not in (None, "", [], ()) else given
                for key, given in value.items()}

    @field_validator("adopt_keyspace")
    @classmethod
    def _adopted(cls, value: bool, info: ValidationInfo) -> bool:
        if value and info.data.get("existing_cassandra") is not None:
            raise ValueError("a keyspace to adopt is an Amazon Keyspaces one; with existing_cassandra the stack "
                             "creates no keyspace anyway")
        return value

    @field_validator("kafka_partitions", mode="before")
    @classmethod
    def _partitions(cls, value: Any, info: ValidationInfo) -> Any:
        """"auto": sized from ``expected_executions_per_day`` (``levers.sized_partitions``); or a number."""
        return sized_partitions(value, info.data.get("expected_executions_per_day"))

    @field_validator("scan_reserved_concurrency", mode="before")
    @classmethod
    def _reserved(cls, value: Any, info: ValidationInfo) -> int | None:
        """"auto": none for dev, else ``scan_concurrency``; a number; 0: none."""
        if value == "auto":
            stage, segments = info.data["stage"], info.data["settings"].segments
            return None if stage in UNRESERVED_STAGES else scan_concurrency(segments)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10_000:
            raise ValueError(f"expected \"auto\" or an integer >= 0, got {value!r}")
        return value or None

    @field_validator("alarm_email", mode="before")
    @classmethod
    def _subscriber(cls, value: Any, info: ValidationInfo) -> str | None:
        """The alarm topic's subscriber; a stage other than dev without one would raise alarms nobody receives."""
        stage = info.data["stage"]
        if value is None or value == "":
            if stage in UNWATCHED_STAGES:
                return None
            raise ValueError(f"stage {stage} would send its alarms to a topic nobody reads; set "
                             f"stages.{stage}.alarm_email in cdk.json (or -c alarm_email=oncall@example.com)")
        return a_match(value, _EMAIL, "an email address")

    @field_validator("monthly_budget_usd", mode="before")
    @classmethod
    def _budget(cls, value: Any) -> int | None:
        """null or 0: no budget."""
        return None if value is None else a_whole(value, 0, 10_000_000) or None

    @field_validator("runbook_url", mode="before")
    @classmethod
    def _runbooks(cls, value: Any, info: ValidationInfo) -> str | None:
        """Where the alarms' e-mails link the runbooks: an address a person opens, not a path in the checkout."""
        if value is None or value == "":
            if info.data.get("web_dashboard") is False:
                raise ValueError("with web_dashboard false the stack serves no copy of the runbooks; set runbook_url "
                                 "to the https URL of docs/runbooks.md in your repository (e.g. "
                                 "https://github.com/<owner>/<repo>/blob/main/docs/runbooks.md)")
            return None
        return a_match(value, _URL, "the https URL of docs/runbooks.md as a browser shows it, without a #fragment "
                                    "(each alarm adds its own)")

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(f"{value} is not a CloudWatch Logs retention; use one of {sorted(LOG_RETENTION_DAYS)}")
        return value

    @field_validator("availability_zones")
    @classmethod
    def _zones(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return zones(value)

    @field_validator("kafka_client_vpcs", mode="before")
    @classmethod
    def _client_vpcs(cls, value: Any) -> Any:
        if not isinstance(value, list | tuple) or len(value) > 4:
            raise ValueError(f"expected a list of at most 4 VPCs (MSK Serverless takes 5 with the stack's own), "
                             f"got {value!r}")
        return value

    @field_validator("kafka_provisioned", mode="before")
    @classmethod
    def _provisioned(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return None
        if info.data.get("kafka_client_vpcs"):
            raise ValueError("kafka_client_vpcs (endpoints of the cluster in other VPCs) is an MSK Serverless "
                             "feature; set one of the two, not both")
        if len(info.data.get("availability_zones", ())) > 3:
            raise ValueError(f"a provisioned MSK cluster takes two or three zones, availability_zones lists "
                             f"{len(info.data['availability_zones'])}")
        return value

    @field_validator("endpoint_zones", mode="before")
    @classmethod
    def _endpoint_zones(cls, value: Any, info: ValidationInfo) -> int | None:
        """null: every zone of the VPC; N: the first N."""
        if value is None:
            return None
        count = len(info.data.get("availability_zones", ())) or 2  # empty: the two zones ZONE_IDS lists
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= count:
            raise ValueError(f"expected null (every zone) or an integer in [1, {count}] (the VPC's zones), "
                             f"got {value!r}")
        return value

    @field_validator("results_pollers", mode="before")
    @classmethod
    def _pollers(cls, value: Any, info: ValidationInfo) -> int:
        """"auto": none (on-demand mode) when one poller keeps up with the stage's busy minute, else one per
        partition; or a number, at most ``kafka_partitions``."""
        partitions = info.data.get("kafka_partitions", MAX_PARTITIONS)
        if value == "auto":
            return 0 if one_poller_keeps_up(info.data.get("expected_executions_per_day")) else partitions
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= partitions:
            raise ValueError(f"expected \"auto\", 0 (on-demand) or at most kafka_partitions ({partitions}) "
                             f"provisioned pollers, got {value!r}")
        return value

    @field_validator("point_in_time_recovery", mode="before")
    @classmethod
    def _pitr(cls, value: Any) -> Any:
        """"auto": the tables nothing rebuilds (``levers.PITR_TABLES``); or a list of table names."""
        return PITR_TABLES if value == "auto" else value

    @field_validator("keyspaces_capacity", mode="before")
    @classmethod
    def _capacity(cls, value: Any, info: ValidationInfo) -> Any:
        """"auto": provisioned on a protected stage that says its rate, else on-demand; provisioned capacity is
        sized from ``expected_executions_per_day``, which it needs."""
        expected = info.data.get("expected_executions_per_day")
        if value == "auto":
            return "provisioned" if info.data["protected"] and expected is not None else "on-demand"
        if value == "provisioned" and expected is None:
            raise ValueError("provisioned capacity is sized from expected_executions_per_day; set it too")
        return value

    @model_validator(mode="after")
    def _stage_wide(self) -> DeploymentConfig:
        """The rules that span options: what one stack runs, and who reads whose topics."""
        if self.segments > MAX_SEGMENTS:
            raise Refusal("segments", f"at most {MAX_SEGMENTS} in one stack, got {self.segments}")
        tenancy.refuse_shared_topics(self)
        return self
