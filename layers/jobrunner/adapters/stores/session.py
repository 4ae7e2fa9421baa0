"""Connecting the driver: plain Cassandra locally; Amazon Keyspaces (TLS + SigV4) in AWS.

``connect`` is the only place that builds a ``Cluster``; adapters take the ``Session`` it returns.
"""

from __future__ import annotations

import json
import ssl
from dataclasses import dataclass

from cassandra import ConsistencyLevel
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, Session
from cassandra.policies import DCAwareRoundRobinPolicy, ExponentialReconnectionPolicy, RoundRobinPolicy

from jobrunner.adapters.stores.rows import CachedRowFactory


@dataclass(frozen=True)
class CassandraSettings:
    contact_points: tuple[str, ...] = ("127.0.0.1",)
    port: int = 9042
    keyspace: str = "jobrunner"
    #: "cassandra" (plain, local or self-managed) or "keyspaces" (Amazon Keyspaces).
    mode: str = "cassandra"
    region: str = "us-east-1"
    ca_bundle: str | None = None
    local_dc: str | None = None
    request_timeout_s: float = 10.0
    #: Opening a connection (the driver's default is 5 s; a busy node can take longer).
    connect_timeout_s: float = 15.0
    #: An existing cluster: a Secrets Manager secret holding {"username": ..., "password": ...}.
    secret_arn: str | None = None
    #: TLS to an existing cluster (verified against ``ca_bundle`` when given, else the system store).
    tls: bool = False


def connect(settings: CassandraSettings, *, keyspace: bool = True) -> Session:
    """A session with LOCAL_QUORUM as the default consistency; ``keyspace=False`` for migrations."""
    if settings.mode == "keyspaces":
        from jobrunner.adapters.stores.keyspaces import keyspaces_cluster

        cluster = keyspaces_cluster(settings)
    else:
        policy = DCAwareRoundRobinPolicy(settings.local_dc) if settings.local_dc else RoundRobinPolicy()
        profile = ExecutionProfile(
            consistency_level=ConsistencyLevel.LOCAL_QUORUM,
            load_balancing_policy=policy,
            request_timeout=settings.request_timeout_s,
            row_factory=CachedRowFactory(),
        )
        cluster = Cluster(
            list(settings.contact_points), port=settings.port, protocol_version=4,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile},
            auth_provider=_credentials(settings.secret_arn, settings.region) if settings.secret_arn else None,
            ssl_context=_tls_context(settings.ca_bundle) if settings.tls else None,
            # A restarted node is found again within seconds (the default backs off to 10 minutes).
            reconnection_policy=ExponentialReconnectionPolicy(base_delay=0.5, max_delay=5.0),
            connect_timeout=settings.connect_timeout_s,
        )
    session = cluster.connect()
    if keyspace:
        session.set_keyspace(settings.keyspace)
    return session


def _credentials(secret_arn: str, region: str) -> PlainTextAuthProvider:
    import boto3

    secret = boto3.client("secretsmanager", region_name=region).get_secret_value(SecretId=secret_arn)
    values = json.loads(secret["SecretString"])
    return PlainTextAuthProvider(username=values["username"], password=values["password"])


def _tls_context(ca_bundle: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca_bundle)
    context.check_hostname = False  # nodes are addressed by IP; the chain is still verified
    return context
