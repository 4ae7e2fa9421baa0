"""Settings from the environment: the same variables configure Lambda and the local stack.

``Settings`` declares each variable once (its name, type, default, bounds and meaning); it reads them
(``Settings.from_env``) and writes them back (``Settings.to_environment``) for the CDK stack, the local stack,
the fault suite and the benchmark, so no other module spells a variable's name. ``python -m jobrunner.config``
prints the table of variables.

Kept cheap to import (Lambda cold starts): the Cassandra and Kafka adapters, whose settings ``cassandra`` and
``kafka`` build, are imported only when those are first read.
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AliasChoices, BeforeValidator, Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from jobrunner.adapters.stores.cassandra_settings import CassandraSettings
from jobrunner.domain.limits import DEFAULT_DELIVERY_TENANT_RATE, DEFAULT_MAX_PAYLOAD_BYTES, DeliveryRates, TenantLimits
from jobrunner.domain.target_grants import TARGET_KINDS, TargetGrants, check_allow_entry
from jobrunner.domain.targets import parse_allow_list
from jobrunner.domain.topics import TopicGrants, is_topic_name

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic_core import ErrorDetails

    from jobrunner.adapters.publishers.kafka import KafkaSettings


def _names(value: object) -> object:
    """``"a, b,,c"`` -> ``("a", "b", "c")``: a comma-separated list, blanks dropped."""
    if isinstance(value, str):
        return tuple(name.strip() for name in value.split(",") if name.strip())
    return value


def _json_object(value: object) -> object:
    """A JSON object given as text (as the environment holds it), or already parsed."""
    if not isinstance(value, str):
        return value
    if not value.strip():
        return {}
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from exc
    if not isinstance(parsed, dict):
        raise ValueError(f"expected a JSON object, got {type(parsed).__name__}")
    return parsed


def _topic_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """``names``, each one Kafka accepts for a topic (a topic it refuses could be neither created nor published to)."""
    for name in names:
        if not is_topic_name(name):
            raise ValueError(f"{name!r} is not a Kafka topic name (1-249 letters, digits, '.', '_' or '-')")
    return names


class SettingsError(ValueError):
    """Settings refused: ``problems`` holds (attribute, reason) for each wrong value; the text names the variables."""

    def __init__(self, message: str, problems: tuple[tuple[str, str], ...]) -> None:
        super().__init__(message)
        self.problems = problems

    def __reduce__(self) -> tuple[type[SettingsError], tuple[str, tuple[tuple[str, str], ...]]]:
        return type(self), (str(self), self.problems)


def _lowered(value: object) -> object:
    return value.strip().lower() or "none" if isinstance(value, str) else value


Names = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_names)]
JsonObject = Annotated[dict[str, Any], NoDecode, BeforeValidator(_json_object)]


def _var(name: str, default: Any, description: str, **bounds: Any) -> Any:
    """A field read from (and written to) the variable ``name``."""
    return Field(default, alias=name, description=description, **bounds)


class Settings(BaseSettings):
    """Every variable the runtime reads; attributes by meaning, the variable's name as the alias."""

    model_config = SettingsConfigDict(frozen=True, case_sensitive=True, env_ignore_empty=True,
                                      populate_by_name=True, extra="ignore")

    segments: int = _var("JOBRUNNER_SEGMENTS", 16, "number of segments (parallel scans per minute)", ge=1)
    initial_lookback_minutes: int = _var("JOBRUNNER_INITIAL_LOOKBACK_MINUTES", 10,
                                         "how far back a segment never scanned before starts", ge=0)
    topic: str = _var("JOBRUNNER_TOPIC", "jobs", "default topic of executions", min_length=1)
    tenant_topics: JsonObject = _var("JOBRUNNER_TENANT_TOPICS", {},
                                     "JSON: tenant (or ``*``) -> its topics (``domain/topics.py``); none: all may "
                                     "name any allowed topic")
    #: The topics named, then the default topic and every granted one (a granted topic is allowed by that alone).
    allowed_topics: Names = Field((), alias="JOBRUNNER_ALLOWED_TOPICS", validate_default=True,
                                  description="comma-separated topics a job may name (besides the default topic)")
    delivery_topic: str = _var("JOBRUNNER_DELIVERY_TOPIC", "job-deliveries",
                               "where the executions of jobs with a target go, for the delivery function (not a "
                               "topic a job may name)", min_length=1)
    target_kinds: Names = _var("JOBRUNNER_TARGET_KINDS", TARGET_KINDS,
                               "comma-separated kinds of target a job may name (https, lambda, sqs), or none")
    target_lambda_allow: Names = _var("JOBRUNNER_TARGET_LAMBDA_ALLOW", (),
                                      "comma-separated Lambda functions a target may name: * (any), an account id, "
                                      "or a function ARN (``domain/target_grants.py``); none: no function")
    target_sqs_allow: Names = _var("JOBRUNNER_TARGET_SQS_ALLOW", (),
                                   "comma-separated SQS queues a target may name: * (any), an account id, or a "
                                   "queue URL (``domain/target_grants.py``); none: no queue")
    target_address_allow: Names = _var("JOBRUNNER_TARGET_ADDRESS_ALLOW", (),
                                       "comma-separated networks (CIDRs) an HTTPS delivery may reach despite the "
                                       "address rules (private, loopback...: ``domain/targets/addresses.py``)")
    target_ca_bundle: str | None = _var("JOBRUNNER_TARGET_CA_BUNDLE", None,
                                        "local stacks and tests: a CA bundle HTTPS targets are also trusted by, "
                                        "besides the system's CAs (certificates are always checked)")
    target_aws_endpoint: str | None = _var("JOBRUNNER_TARGET_AWS_ENDPOINT", None,
                                           "local use: the endpoint the Lambda and SQS targets are called at "
                                           "(moto's server on the local stack); AWS leaves it empty")
    tenant_map: JsonObject = _var("JOBRUNNER_TENANT_MAP", {},
                                  "JSON: principal -> the tenant it acts as (``api/tenancy.py``)")
    operators: Names = _var("JOBRUNNER_OPERATORS", (),
                            "comma-separated tenants that may read the operator views (``GET /segments``)")
    max_payload_bytes: int = _var("JOBRUNNER_MAX_PAYLOAD_BYTES", DEFAULT_MAX_PAYLOAD_BYTES,
                                  "largest payload accepted, serialized", ge=1)
    tenant_limit_table: JsonObject = _var("JOBRUNNER_TENANT_LIMITS", {},
                                          "JSON: tenant (or ``*``) -> its limits (``domain/limits.py``); "
                                          "none: no limits")
    results_topic: str = _var("JOBRUNNER_RESULTS_TOPIC", "job-results", "where workers report", min_length=1)
    dead_letter_topic: str = _var("JOBRUNNER_DLQ_TOPIC", "job-dlq", "where exhausted executions go", min_length=1)
    webhook_secret_prefix: str = _var("JOBRUNNER_WEBHOOK_SECRET_PREFIX", "jobrunner/webhooks/",
                                      "AWS: name prefix of each tenant's Secrets Manager secret of webhook signing "
                                      "secrets (``adapters/webhook_secrets``)", min_length=1)
    webhook_secrets: JsonObject = _var("JOBRUNNER_WEBHOOK_SECRETS", {},
                                       "tests: JSON tenant -> its first whsec_ secrets, newest first, instead of "
                                       "new ones (none: each tenant's created on its first use)")
    webhook_secret_cache_s: float = _var("JOBRUNNER_WEBHOOK_SECRET_CACHE_S", 60.0,
                                         "how long a delivery reuses a tenant's webhook secrets before reading "
                                         "them again: a rotation reaches the deliveries within it", ge=0, le=3600)
    secrets_endpoint: str | None = _var("SECRETSMANAGER_ENDPOINT", None,
                                        "local use: Secrets Manager's endpoint (moto's server on the local stack), "
                                        "where the webhook secrets are then kept; none: in Lambda, AWS's own, "
                                        "elsewhere in memory")
    delivery_tenant_concurrency: int = _var("JOBRUNNER_DELIVERY_TENANT_CONCURRENCY", 4,
                                            "deliveries of one tenant in flight at once, per batch", ge=1)
    delivery_concurrency: int = _var("JOBRUNNER_DELIVERY_CONCURRENCY", 16,
                                     "deliveries in flight at once, per batch", ge=1)
    delivery_tenant_rate: int = _var("JOBRUNNER_DELIVERY_TENANT_RATE", DEFAULT_DELIVERY_TENANT_RATE,
                                     "deliveries of one tenant started a second, per delivery function instance "
                                     "(one per partition of the delivery topic); 0: no rate; a tenant's own: "
                                     "deliveries_per_second in JOBRUNNER_TENANT_LIMITS", ge=0)

    contact_points: Names = _var("CASSANDRA_CONTACT_POINTS", ("127.0.0.1",), "comma-separated Cassandra hosts")
    cassandra_port: int = _var("CASSANDRA_PORT", 9042, "CQL port (9142 for Keyspaces)", ge=1, le=65535)
    keyspace: str = _var("CASSANDRA_KEYSPACE", "jobrunner", "keyspace", min_length=1)
    cassandra_mode: Literal["cassandra", "keyspaces"] = _var("CASSANDRA_MODE", "cassandra",
                                                             "cassandra, or keyspaces (TLS + SigV4)")
    ca_bundle: str | None = _var("CASSANDRA_CA_BUNDLE", None, "a CA bundle to verify the cluster's TLS with")
    local_dc: str | None = _var("CASSANDRA_LOCAL_DC", None,
                                "a cluster's local datacenter: token-aware routing to its nodes (``session.py``)")
    replication_factor: int = _var("CASSANDRA_REPLICATION_FACTOR", 1,
                                   "replicas of the keyspace the migration creates (in the local datacenter "
                                   "when named)", ge=1)
    speculative_delay_ms: int = _var("CASSANDRA_SPECULATIVE_DELAY_MS", 0,
                                     "a read not answered within this is also sent to the next node (0: off)", ge=0)
    cassandra_secret_arn: str | None = _var("CASSANDRA_SECRET_ARN", None,
                                            "existing cluster: Secrets Manager secret with username and password")
    cassandra_tls: bool = _var("CASSANDRA_TLS", False, "existing cluster: connect over TLS")
    cassandra_tls_server_name: str | None = _var(
        "CASSANDRA_TLS_SERVER_NAME", None, "existing cluster over TLS: the name every node's certificate carries, "
        "when it is not the address the node is reached at (``session.py``)")

    kafka_bootstrap: str = _var("KAFKA_BOOTSTRAP", "127.0.0.1:9092", "bootstrap servers", min_length=1)
    kafka_security: Literal["plaintext", "msk-iam"] = _var("KAFKA_SECURITY", "plaintext",
                                                           "plaintext, or msk-iam")
    topic_replication: int = _var("KAFKA_TOPIC_REPLICATION", 1, "replicas of the topics the local stack creates "
                                  "(AWS: the CDK app creates them)", ge=1)

    heartbeat_table: str = _var("HEARTBEAT_TABLE", "jobrunner-heartbeats",
                                "DynamoDB table of leases and watermarks", min_length=1)
    quota_table: str = Field("", alias="QUOTA_TABLE", validate_default=True,
                             description="DynamoDB table of the tenants' quota counters (default: the heartbeat "
                                         "table's name + ``-quotas``)")
    dynamodb_endpoint: str | None = _var("DYNAMODB_ENDPOINT", None, "endpoint override, e.g. moto's server locally")
    scan_function: str = _var("SCAN_FUNCTION_NAME", "jobrunner-scan",
                              "function the tick invokes (and the writers that wake scans)", min_length=1)
    wake_scans: bool = _var("JOBRUNNER_WAKE_SCANS", False,
                            "writers of late rows wake their scans, so scans with nothing to do end early")
    change_log: bool = _var("JOBRUNNER_CHANGE_LOG", True,
                            "keep each job's change log (``GET /jobs/{id}/changes``; one write per change)")
    one_time_rows_expire: bool = _var("JOBRUNNER_ONE_TIME_ROWS_EXPIRE", True,
                                      "one-time jobs' rows expire after their last run's history (domain.expiry)")
    reconcile_interval_s: int = _var("JOBRUNNER_RECONCILE_INTERVAL_S", 60,
                                     "how often the reconciler runs (AWS: its rule's rate, whole minutes)", ge=10)
    reconcile_grace_s: int = _var("JOBRUNNER_RECONCILE_GRACE_S", 120,
                                  "how long overdue an execution must be before the reconciler looks at it", ge=0)
    reconcile_page_size: int = _var("JOBRUNNER_RECONCILE_PAGE_SIZE", 500, "jobs per page of the reconciler's walk",
                                    ge=1, le=5000)
    reconcile_rate: int = _var("JOBRUNNER_RECONCILE_ROWS_PER_S", 2000,
                               "jobs the reconciler walks per second, at most", ge=1)
    region: str = Field("us-east-1", validation_alias=AliasChoices("AWS_REGION", "AWS_DEFAULT_REGION"),
                        alias="AWS_REGION", description="region (Lambda sets it)")
    result_key: str | None = _var("JOBRUNNER_RESULT_KEY", None,
                                  "the key that signs result tokens (local use; see ``adapters/secrets.py``)")
    result_key_secret_arn: str | None = _var("JOBRUNNER_RESULT_KEY_SECRET_ARN", None,
                                             "AWS: a Secrets Manager secret holding that key")
    accept_unsigned_results: bool = _var("JOBRUNNER_ACCEPT_UNSIGNED_RESULTS", False,
                                         "also apply results without a token (during the upgrade that adds them)")
    accept_v1_result_tokens: bool = _var("JOBRUNNER_ACCEPT_V1_RESULT_TOKENS", True,
                                         "also accept result tokens of the first scheme, which older scans signed "
                                         "(during the upgrade to the second; ``domain/receipts.py``)")
    otel_exporter: Annotated[str, BeforeValidator(_lowered)] = _var(
        "JOBRUNNER_OTEL_EXPORTER", "none", "local stack: export spans to none, console, file or otlp "
        "(``telemetry.py``); AWS uses X-Ray instead")
    otel_file: str | None = _var("JOBRUNNER_OTEL_FILE", None,
                                 "local stack: where the file exporter appends (default .local/logs/traces.jsonl)")

    @field_validator("tenant_topics")
    @classmethod
    def _tenant_topics(cls, value: dict[str, Any]) -> dict[str, tuple[str, ...]]:
        """``{"payments": ["payments", "jobs"], "*": ["jobs"]}``."""
        out: dict[str, tuple[str, ...]] = {}
        for tenant, topics in value.items():
            if not tenant.strip():
                raise ValueError(f"tenant {tenant!r}: expected a tenant name")
            if not isinstance(topics, list | tuple) or not all(isinstance(t, str) and t.strip() for t in topics):
                raise ValueError(f"tenant {tenant!r}: expected a list of topic names")
            try:
                out[tenant] = _topic_names(tuple(dict.fromkeys(t.strip() for t in topics)))
            except ValueError as exc:
                raise ValueError(f"tenant {tenant!r}: {exc}") from None
        return out

    @field_validator("allowed_topics")
    @classmethod
    def _with_default_and_granted(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        granted = [t for ts in info.data.get("tenant_topics", {}).values() for t in ts]
        return _topic_names(tuple(dict.fromkeys([*value, info.data.get("topic", "jobs"), *granted])))

    @field_validator("delivery_topic")
    @classmethod
    def _delivery_topic_of_its_own(cls, value: str, info: ValidationInfo) -> str:
        """A topic no job may name: a message on it is a delivery the delivery function makes."""
        _topic_names((value,))
        if value in info.data.get("allowed_topics", ()):
            raise ValueError(f"{value!r} is a topic jobs may name; the delivery topic must be another")
        return value

    @field_validator("target_kinds")
    @classmethod
    def _known_kinds(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """``none`` is kept as written, so that it is written back (an empty list would read as the default)."""
        if value == ("none",):
            return value
        if unknown := sorted(set(value) - set(TARGET_KINDS)):
            raise ValueError(f"not a kind of target: {', '.join(unknown)} (expected {', '.join(TARGET_KINDS)} "
                             "or none)")
        return tuple(dict.fromkeys(value))

    @field_validator("target_lambda_allow", "target_sqs_allow")
    @classmethod
    def _allow_entries(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        kind = "lambda" if info.field_name == "target_lambda_allow" else "sqs"
        return tuple(check_allow_entry(entry, kind) for entry in value)

    @field_validator("target_address_allow")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        parse_allow_list(value)
        return value

    @field_validator("tenant_map")
    @classmethod
    def _tenant_map(cls, value: dict[str, Any]) -> dict[str, str]:
        """``{"arn:aws:iam::123456789012:role/payments-ci": "payments"}``."""
        out: dict[str, str] = {}
        for principal, tenant in value.items():
            if not principal.strip():
                raise ValueError(f"principal {principal!r}: expected a principal's ARN or name")
            if not isinstance(tenant, str) or not tenant.strip():
                raise ValueError(f"principal {principal!r}: expected a tenant name")
            out[principal] = tenant.strip()
        return out

    @field_validator("tenant_limit_table")
    @classmethod
    def _limits_parse(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        """``{"*": {"submissions_per_second": 20}, "payments": {"submissions_per_second": 200}}``."""
        TenantLimits.parse(value, info.data.get("max_payload_bytes", DEFAULT_MAX_PAYLOAD_BYTES))
        return value

    @field_validator("quota_table")
    @classmethod
    def _quota_table_beside_heartbeats(cls, value: str, info: ValidationInfo) -> str:
        return value or f"{info.data.get('heartbeat_table', 'jobrunner-heartbeats')}-quotas"

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Only the values given: ``from_env`` reads the environment it is handed, and ``of`` none, so the CDK
        stack's rendering never picks up the deploying shell's variables (its ``AWS_REGION``, say)."""
        return (init_settings,)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """The settings ``env`` (default: this process's environment) gives; a bad value raises ``ValueError``
        naming its variable and what it expects."""
        source = EnvSettingsSource(cls)
        # A blank variable is an unset one (pydantic-settings drops blanks only from the environment it loads).
        source.env_vars = {name: value for name, value in (source.env_vars if env is None else env).items()
                           if value and value.strip()}
        return cls._validated(source())

    @classmethod
    def of(cls, **values: Any) -> Settings:
        """Settings from attribute values (not the environment); those not given keep their defaults."""
        return cls._validated(values)

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` (attribute names), checked as a reading would check them."""
        values = {name: getattr(self, name) for name in type(self).model_fields if name in self.model_fields_set}
        return type(self)._validated({**values, **changes})

    @classmethod
    def _validated(cls, values: Mapping[str, Any]) -> Settings:
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = tuple(_explain(cls, error) for error in exc.errors())
            raise SettingsError("; ".join(f"{cls.variable(name)}: {reason}" if name in cls.model_fields else
                                          f"{name}: {reason}" for name, reason in problems), problems) from None

    def to_environment(self, *, given_only: bool = False) -> dict[str, str]:
        """The variables that read back as these settings: every one with a value, or (``given_only``) only those
        given when these settings were made (the CDK stack writes no more than it means to set)."""
        out: dict[str, str] = {}
        for name, info in type(self).model_fields.items():
            if given_only and name not in self.model_fields_set:
                continue
            text = _text(getattr(self, name))
            if text is not None and info.alias is not None:
                out[info.alias] = text
        return out

    @classmethod
    def variables(cls) -> dict[str, str]:
        """Each variable's name -> its attribute."""
        return {info.alias: name for name, info in cls.model_fields.items() if info.alias is not None}

    @classmethod
    def variable(cls, attribute: str) -> str:
        """The name of the variable ``attribute`` is read from."""
        alias = cls.model_fields[attribute].alias
        assert alias is not None
        return alias

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.to_environment().items())))

    @property
    def topic_grants(self) -> TopicGrants:
        return TopicGrants(self.topic, frozenset(self.allowed_topics), self.tenant_topics)

    @property
    def target_grants(self) -> TargetGrants:
        return TargetGrants(frozenset(self.target_kinds) - {"none"}, self.target_lambda_allow, self.target_sqs_allow)

    @cached_property
    def tenant_limits(self) -> TenantLimits:
        return TenantLimits.parse(self.tenant_limit_table, self.max_payload_bytes)

    @cached_property
    def delivery_rates(self) -> DeliveryRates:
        """Each tenant's delivery rate: its own ``deliveries_per_second``, else the stage's."""
        return DeliveryRates.of_stage(self.delivery_tenant_rate, self.tenant_limits)

    @cached_property
    def cassandra(self) -> CassandraSettings:
        return CassandraSettings(
            contact_points=self.contact_points, port=self.cassandra_port, keyspace=self.keyspace,
            mode=self.cassandra_mode, region=self.region, ca_bundle=self.ca_bundle,
            secret_arn=self.cassandra_secret_arn, tls=self.cassandra_tls,
            tls_server_name=self.cassandra_tls_server_name, local_dc=self.local_dc,
            replication_factor=self.replication_factor, speculative_delay_ms=self.speculative_delay_ms)

    @cached_property
    def kafka(self) -> KafkaSettings:
        from jobrunner.adapters.publishers.kafka import KafkaSettings

        return KafkaSettings(bootstrap=self.kafka_bootstrap, security=self.kafka_security, region=self.region,
                             topic_replication=self.topic_replication)


def _text(value: object) -> str | None:
    """A value as its variable holds it (None: no variable)."""
    if value is None or value in ((), {}):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, dict):
        return json.dumps({key: list(item) if isinstance(item, tuple) else item for key, item in value.items()})
    return str(value)


def _explain(settings: type[Settings], error: ErrorDetails) -> tuple[str, str]:
    """One wrong value in plain words: (its attribute, ``expected ..., got '...'``)."""
    where = str(error["loc"][0]) if error["loc"] else ""
    attribute = settings.variables().get(where, where)
    ctx = error.get("ctx", {})
    got = error.get("input")
    if error["type"] == "value_error":
        return attribute, str(ctx.get("error", error["msg"]))
    field = settings.model_fields.get(attribute)
    if error["type"] in ("int_parsing", "int_from_float", "greater_than_equal", "less_than_equal") and field:
        bounds = {key: getattr(m, key) for m in field.metadata for key in ("ge", "le") if hasattr(m, key)}
        least = f" of at least {bounds['ge']}" if "ge" in bounds else ""
        most = f" and at most {bounds['le']}" if "le" in bounds else ""
        return attribute, f"expected a whole number{least}{most}, got {got!r}"
    if error["type"] == "bool_parsing":
        return attribute, f"expected true or false, got {got!r}"
    return attribute, f"{error['msg'][0].lower()}{error['msg'][1:]}, got {got!r}"


def table() -> str:
    """The variables as a Markdown table (name, default, meaning)."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for info in Settings.model_fields.values():
        default = _text(info.default) if info.default not in ((), {}, "") else None
        rows.append(f"| {info.alias} | {default or '(none)'} | {info.description} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
