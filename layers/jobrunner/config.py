"""Settings from the environment: the same variables configure Lambda and the local stack.

| variable | default | meaning |
|---|---|---|
| JOBRUNNER_SEGMENTS | 16 | number of segments (parallel scans per minute) |
| JOBRUNNER_INITIAL_LOOKBACK_MINUTES | 10 | how far back a segment never scanned before starts |
| JOBRUNNER_TOPIC | jobs | default topic of executions |
| JOBRUNNER_ALLOWED_TOPICS | the default topic | comma-separated topics a job may name |
| JOBRUNNER_TENANT_TOPICS | (none: all may name any) | JSON: tenant (or ``*``) -> its topics (``domain/topics.py``) |
| JOBRUNNER_TENANT_MAP | (none) | JSON: principal -> the tenant it acts as (``api/tenancy.py``) |
| JOBRUNNER_TENANT_LIMITS | (none: no limits) | JSON: tenant (or ``*``) -> its limits (``domain/limits.py``) |
| QUOTA_TABLE | HEARTBEAT_TABLE + ``-quotas`` | DynamoDB table of the tenants' quota counters |
| JOBRUNNER_OPERATORS | (none) | comma-separated tenants that may read the operator views (``GET /segments``) |
| JOBRUNNER_RESULTS_TOPIC | job-results | where workers report |
| JOBRUNNER_DLQ_TOPIC | job-dlq | where exhausted executions go |
| JOBRUNNER_MAX_PAYLOAD_BYTES | 65536 | largest payload accepted, serialized |
| CASSANDRA_CONTACT_POINTS | 127.0.0.1 | comma-separated hosts |
| CASSANDRA_PORT | 9042 | CQL port (9142 for Keyspaces) |
| CASSANDRA_KEYSPACE | jobrunner | keyspace |
| CASSANDRA_MODE | cassandra | cassandra, or keyspaces (TLS + SigV4) |
| CASSANDRA_LOCAL_DC | (none) | a cluster's local datacenter: token-aware routing to its nodes (``session.py``) |
| CASSANDRA_REPLICATION_FACTOR | 1 | replicas of the keyspace the migration creates (in CASSANDRA_LOCAL_DC when named) |
| CASSANDRA_SPECULATIVE_DELAY_MS | 0 (off) | a read not answered within this is also sent to the next node |
| CASSANDRA_SECRET_ARN | (none) | existing cluster: Secrets Manager secret with username and password |
| CASSANDRA_TLS | false | existing cluster: connect over TLS (CASSANDRA_CA_BUNDLE to pin a CA) |
| KAFKA_BOOTSTRAP | 127.0.0.1:9092 | bootstrap servers |
| KAFKA_SECURITY | plaintext | plaintext, or msk-iam |
| KAFKA_TOPIC_REPLICATION | 1 | replicas of the topics the local stack creates (AWS: the CDK app creates them) |
| HEARTBEAT_TABLE | jobrunner-heartbeats | DynamoDB table of leases and watermarks |
| DYNAMODB_ENDPOINT | (AWS) | endpoint override, e.g. moto's server locally |
| SCAN_FUNCTION_NAME | jobrunner-scan | function the tick invokes (and the writers that wake scans) |
| JOBRUNNER_WAKE_SCANS | false | writers of late rows wake their scans, so scans with nothing to do end early |
| JOBRUNNER_CHANGE_LOG | true | keep each job's change log (``GET /jobs/{id}/changes``; one write per change) |
| AWS_REGION | us-east-1 | region |
| JOBRUNNER_RESULT_KEY | (none) | the key that signs result tokens (local use; see ``adapters/secrets.py``) |
| JOBRUNNER_RESULT_KEY_SECRET_ARN | (none) | AWS: a Secrets Manager secret holding that key |
| JOBRUNNER_ACCEPT_UNSIGNED_RESULTS | false | also apply results without a token (during the upgrade that adds them) |
| JOBRUNNER_OTEL_EXPORTER | none | local stack: export spans to console, file or otlp (``telemetry.py``) |
| JOBRUNNER_OTEL_FILE | .local/logs/traces.jsonl | local stack: where the file exporter appends |
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobrunner.adapters.publishers.kafka import KafkaSettings
from jobrunner.adapters.stores.session import CassandraSettings
from jobrunner.domain.limits import DEFAULT_MAX_PAYLOAD_BYTES, TenantLimits
from jobrunner.domain.topics import TopicGrants

if TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass(frozen=True)
class Settings:
    segments: int
    initial_lookback_minutes: int
    topic: str
    results_topic: str
    dead_letter_topic: str
    allowed_topics: frozenset[str]
    max_payload_bytes: int
    cassandra: CassandraSettings
    kafka: KafkaSettings
    heartbeat_table: str
    dynamodb_endpoint: str | None
    scan_function: str
    region: str
    #: OpenTelemetry exporter of the local stack (none, console, file, otlp); AWS uses X-Ray instead.
    otel_exporter: str = "none"
    #: Writers of LATE rows invoke the scan function for the partition (``services.wake``), and scans with
    #: nothing to do end early (``ScanRules.idle_end``). The stack turns it on where it grants the invoke.
    wake_scans: bool = False
    #: Keep each job's change log (one Cassandra write per change that lands, none per execution).
    change_log: bool = True
    otel_file: str | None = None
    #: The key that signs result tokens, or the secret that holds it (``adapters/secrets.py``).
    result_key: str | None = None
    result_key_secret_arn: str | None = None
    accept_unsigned_results: bool = False
    #: tenant (or ``*``) -> the topics its jobs may name; empty: every tenant may name every allowed topic.
    tenant_topics: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)
    #: principal -> the tenant it acts as (``api/tenancy.py``); a principal not listed is its own tenant.
    tenant_map: Mapping[str, str] = field(default_factory=dict, compare=False)
    #: Tenants that may read the operator views (every segment's progress).
    operators: frozenset[str] = frozenset()
    #: Per-tenant limits, and the DynamoDB table that counts submissions against them.
    tenant_limits: TenantLimits = field(default_factory=TenantLimits)
    quota_table: str = "jobrunner-heartbeats-quotas"

    @property
    def topic_grants(self) -> TopicGrants:
        return TopicGrants(self.topic, self.allowed_topics, self.tenant_topics)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        region = env.get("AWS_REGION", env.get("AWS_DEFAULT_REGION", "us-east-1"))
        topic = env.get("JOBRUNNER_TOPIC", "jobs")
        allowed = {t.strip() for t in env.get("JOBRUNNER_ALLOWED_TOPICS", topic).split(",") if t.strip()}
        tenant_topics = _tenant_topics(env.get("JOBRUNNER_TENANT_TOPICS", ""))
        max_payload_bytes = int(env.get("JOBRUNNER_MAX_PAYLOAD_BYTES", str(DEFAULT_MAX_PAYLOAD_BYTES)))
        heartbeat_table = env.get("HEARTBEAT_TABLE", "jobrunner-heartbeats")
        return cls(
            segments=int(env.get("JOBRUNNER_SEGMENTS", "16")),
            initial_lookback_minutes=int(env.get("JOBRUNNER_INITIAL_LOOKBACK_MINUTES", "10")),
            topic=topic,
            results_topic=env.get("JOBRUNNER_RESULTS_TOPIC", "job-results"),
            dead_letter_topic=env.get("JOBRUNNER_DLQ_TOPIC", "job-dlq"),
            allowed_topics=frozenset(allowed | {topic} | {t for ts in tenant_topics.values() for t in ts}),
            tenant_topics=tenant_topics,
            tenant_map=_tenant_map(env.get("JOBRUNNER_TENANT_MAP", "")),
            operators=frozenset(t.strip() for t in env.get("JOBRUNNER_OPERATORS", "").split(",") if t.strip()),
            tenant_limits=_tenant_limits(env.get("JOBRUNNER_TENANT_LIMITS", ""), max_payload_bytes),
            quota_table=env.get("QUOTA_TABLE") or f"{heartbeat_table}-quotas",
            max_payload_bytes=max_payload_bytes,
            cassandra=CassandraSettings(
                contact_points=tuple(env.get("CASSANDRA_CONTACT_POINTS", "127.0.0.1").split(",")),
                port=int(env.get("CASSANDRA_PORT", "9042")),
                keyspace=env.get("CASSANDRA_KEYSPACE", "jobrunner"),
                mode=env.get("CASSANDRA_MODE", "cassandra"),
                region=region,
                ca_bundle=env.get("CASSANDRA_CA_BUNDLE"),
                secret_arn=env.get("CASSANDRA_SECRET_ARN") or None,
                tls=env.get("CASSANDRA_TLS", "").lower() in ("1", "true", "yes"),
                local_dc=env.get("CASSANDRA_LOCAL_DC") or None,
                replication_factor=_whole(env, "CASSANDRA_REPLICATION_FACTOR", 1),
                speculative_delay_ms=_whole(env, "CASSANDRA_SPECULATIVE_DELAY_MS", 0, least=0),
            ),
            kafka=KafkaSettings(
                bootstrap=env.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"),
                security=env.get("KAFKA_SECURITY", "plaintext"),
                region=region,
                topic_replication=_whole(env, "KAFKA_TOPIC_REPLICATION", 1),
            ),
            heartbeat_table=heartbeat_table,
            dynamodb_endpoint=env.get("DYNAMODB_ENDPOINT") or None,
            scan_function=env.get("SCAN_FUNCTION_NAME", "jobrunner-scan"),
            region=region,
            otel_exporter=env.get("JOBRUNNER_OTEL_EXPORTER", "none").strip().lower() or "none",
            otel_file=env.get("JOBRUNNER_OTEL_FILE") or None,
            result_key=env.get("JOBRUNNER_RESULT_KEY") or None,
            result_key_secret_arn=env.get("JOBRUNNER_RESULT_KEY_SECRET_ARN") or None,
            accept_unsigned_results=env.get("JOBRUNNER_ACCEPT_UNSIGNED_RESULTS", "").lower() in ("1", "true", "yes"),
            wake_scans=env.get("JOBRUNNER_WAKE_SCANS", "").lower() in ("1", "true", "yes"),
            change_log=env.get("JOBRUNNER_CHANGE_LOG", "true").lower() not in ("0", "false", "no", "off"),
        )


def _whole(env: Mapping[str, str], name: str, default: int, *, least: int = 1) -> int:
    """``env[name]`` as a whole number of at least ``least`` (``default`` when unset or empty)."""
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise ValueError(f"{name}: expected a whole number of at least {least}, got {text!r}")
    return value


def _json_object(name: str, text: str) -> dict[str, object]:
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name}: not JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{name}: expected a JSON object, got {type(value).__name__}")
    return value


def _tenant_topics(text: str) -> dict[str, tuple[str, ...]]:
    """``{"payments": ["payments", "jobs"], "*": ["jobs"]}``: a granted topic is allowed by that alone."""
    out: dict[str, tuple[str, ...]] = {}
    for tenant, topics in _json_object("JOBRUNNER_TENANT_TOPICS", text).items():
        if not isinstance(topics, list) or not all(isinstance(t, str) and t.strip() for t in topics):
            raise ValueError(f"JOBRUNNER_TENANT_TOPICS: tenant {tenant!r}: expected a list of topic names")
        out[tenant] = tuple(dict.fromkeys(t.strip() for t in topics))
    return out


def _tenant_map(text: str) -> dict[str, str]:
    """``{"arn:aws:iam::123456789012:role/payments-ci": "payments"}``."""
    out: dict[str, str] = {}
    for principal, tenant in _json_object("JOBRUNNER_TENANT_MAP", text).items():
        if not isinstance(tenant, str) or not tenant.strip():
            raise ValueError(f"JOBRUNNER_TENANT_MAP: principal {principal!r}: expected a tenant name")
        out[principal] = tenant.strip()
    return out


def _tenant_limits(text: str, max_payload_bytes: int) -> TenantLimits:
    """``{"*": {"submissions_per_second": 20}, "payments": {"submissions_per_second": 200}}``."""
    try:
        return TenantLimits.parse(_json_object("JOBRUNNER_TENANT_LIMITS", text), max_payload_bytes)
    except ValueError as exc:
        if str(exc).startswith("JOBRUNNER_TENANT_LIMITS"):
            raise
        raise ValueError(f"JOBRUNNER_TENANT_LIMITS: {exc}") from exc
