"""Connecting the driver: plain Cassandra locally; Amazon Keyspaces (TLS + SigV4) in AWS.

``connect`` is the only place that builds a ``Cluster``; adapters take the ``Session`` it returns.

Connections that died while the Lambda environment was frozen (the server, an NLB or the VPC path
dropped them while idle) are not found by the driver's heartbeat, whose thread is frozen too. Measured
locally (``bench/freeze.py``, docs/reliability.md), the first statement after such a freeze either
failed at once with NoHostAvailable (the flow answered with a reset) or waited the whole request timeout
and failed (the flow was silently dropped), and so did the next one. So:

* every connection carries TCP keepalive and ``TCP_USER_TIMEOUT`` (``adapters/sockets.py``);
* :class:`RenewAfterIdle` replaces the session's connections before the first request made after
  ``idle_refresh_s`` without any (less than the 350 s after which AWS's NLBs and NAT gateways forget
  an idle flow). A reconnection is a few milliseconds locally, a TLS and SigV4 handshake per node on
  Keyspaces, paid once after a long idle instead of a request timeout.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cassandra import ConsistencyLevel
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, Session
from cassandra.policies import DCAwareRoundRobinPolicy, ExponentialReconnectionPolicy, RoundRobinPolicy

from jobrunner.adapters.sockets import liveness_options
from jobrunner.adapters.stores.rows import CachedRowFactory

if TYPE_CHECKING:
    from collections.abc import Callable

    from cassandra.cluster import ResponseFuture

log = logging.getLogger(__name__)


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
    #: A request made after this long without one first replaces the session's connections.
    idle_refresh_s: float = 300.0


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
    cluster.sockopts = liveness_options()
    session = cluster.connect()
    if keyspace:
        session.set_keyspace(settings.keyspace)
    session.add_request_init_listener(RenewAfterIdle(session, settings.idle_refresh_s))
    return session


class RenewAfterIdle:
    """A request listener: before the first request after ``idle_s`` without one, new connections.

    It runs on the thread that makes the request, before the request takes a connection, and waits
    (up to the cluster's ``connect_timeout``) for every host's pool to be replaced; the old pools are
    closed; requests made meanwhile on other threads wait too. A pool that cannot be replaced is left
    to the driver (the request then fails as it would have). ``Session.add_or_renew_pool`` is what the
    driver itself runs when a host comes back up; it is marked for internal use, so
    tests/integration/jobrunner/adapters/test_freeze.py checks it on the real server.
    """

    def __init__(self, session: Session, idle_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._session = session
        self._idle_s = idle_s
        self._clock = clock
        self._last_request = clock()
        self._lock = threading.Lock()

    def __call__(self, response_future: ResponseFuture) -> None:
        with self._lock:
            now = self._clock()
            idle, self._last_request = now - self._last_request, now
            if idle >= self._idle_s:
                self.renew(idle)

    def renew(self, idle: float) -> None:
        started = self._clock()
        renewals = [self._session.add_or_renew_pool(host, is_host_addition=False)
                    for host in self._session.cluster.metadata.all_hosts() if host.is_up is not False]
        for renewal in renewals:
            if renewal is None:  # an ignored host: no pool
                continue
            try:
                renewal.result(timeout=self._session.cluster.connect_timeout)
            except Exception as exc:
                log.warning("could not renew a connection pool after %.0f s idle: %s", idle, exc)
        log.info("renewed %d connection pool(s) after %.0f s idle in %.3f s",
                 len(renewals), idle, self._clock() - started)


def _credentials(secret_arn: str, region: str) -> PlainTextAuthProvider:
    import boto3

    secret = boto3.client("secretsmanager", region_name=region).get_secret_value(SecretId=secret_arn)
    values = json.loads(secret["SecretString"])
    return PlainTextAuthProvider(username=values["username"], password=values["password"])


def _tls_context(ca_bundle: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca_bundle)
    context.check_hostname = False  # nodes are addressed by IP; the chain is still verified
    return context
