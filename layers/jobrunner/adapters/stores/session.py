"""Connecting the driver: plain Cassandra locally; Amazon Keyspaces (TLS + SigV4) in AWS.

``connect`` is the only place that connects a ``Cluster`` (built by :func:`cassandra_cluster` or
``keyspaces.keyspaces_cluster``); adapters take the ``Session`` it returns.

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

Over TLS to a self-managed cluster (``CASSANDRA_TLS``), every connection checks its node's certificate: the
chain (against ``CASSANDRA_CA_BUNDLE``, else the system's roots) and the host name, which is the address the
connection reaches (a contact point as given, or the IP ``system.peers`` lists, so a node's certificate must
carry its IP address), or ``CASSANDRA_TLS_SERVER_NAME`` when the nodes' certificates carry one name instead.

On a cluster (self-managed Cassandra; ``make cluster`` locally), the client side of "no single point of
failure" is here, in :func:`execution_profile`:

* **Consistency.** Every read and write at LOCAL_QUORUM (two of three replicas), lightweight transactions'
  Paxos at LOCAL_SERIAL: a write acknowledged by two replicas is seen by every later read, which also asks
  two, and both go on while one node of three is down. The statements set their consistency themselves
  (``stores/cassandra.py``), so that a profile can never weaken it; the serial consistency is the profile's
  alone, since Amazon Keyspaces' profile must send none (``stores/keyspaces.py``).
* **Contact points and routing.** Every node is a contact point (``CASSANDRA_CONTACT_POINTS``), so the
  driver connects whichever node is down at start. With ``CASSANDRA_LOCAL_DC`` named, requests go
  token-aware to a replica of their partition in the local datacenter (one hop fewer), falling back to
  the datacenter's other nodes round robin; without it (a single node, the tests) plain round robin.
* **Retries.** The driver's own ``RetryPolicy``, named: a request whose connection broke (its node was
  killed) is sent again to the next node; a read that timed out with enough replicas answering is tried
  once more; an ``Unavailable`` (the coordinator saw too few replicas) once on the next node; a write that
  timed out is not retried (its outcome is unknown: the caller decides, and the API answers 503). Sending a
  broken request again is safe for every statement here: a plain write carries its client timestamp and
  values, so it lands the same (on Amazon Keyspaces too, whose tables have client-side timestamps turned on
  by ``python -m cql.migrate``: without them it stamps a write on arrival, and a retried one would overwrite
  a later write); a retried conditional update whose first attempt did land comes back "not
  applied", and the service reads the job again and finds its change already made
  (``services/jobs/commands.py``, ``Commands._save``).
* **Speculative execution** (``CASSANDRA_SPECULATIVE_DELAY_MS``, off by default): a read not answered
  within the delay is also sent to the next node, and the first answer wins, so a slow node (a long GC
  pause, a slow network path) does not make the API or a scan slow. Reads only: the stores mark their
  SELECTs idempotent (:func:`is_read`), and the driver never speculates on a statement that is not.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from typing import TYPE_CHECKING, Any

from cassandra import ConsistencyLevel
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, Session
from cassandra.policies import (
    ConstantSpeculativeExecutionPolicy,
    DCAwareRoundRobinPolicy,
    ExponentialReconnectionPolicy,
    LoadBalancingPolicy,
    RetryPolicy,
    RoundRobinPolicy,
    SpeculativeExecutionPolicy,
    TokenAwarePolicy,
)

from jobrunner.adapters.sockets import liveness_options
from jobrunner.adapters.stores.rows import CachedRowFactory

if TYPE_CHECKING:
    from collections.abc import Callable

    from cassandra.cluster import ResponseFuture

    from jobrunner.adapters.stores.cassandra_settings import CassandraSettings

log = logging.getLogger(__name__)


def load_balancing(settings: CassandraSettings) -> LoadBalancingPolicy:
    """Token-aware over the local datacenter's nodes when it is named (a cluster), else round robin."""
    if settings.local_dc:
        return TokenAwarePolicy(DCAwareRoundRobinPolicy(settings.local_dc))
    return RoundRobinPolicy()


def speculative_execution(settings: CassandraSettings) -> SpeculativeExecutionPolicy | None:
    if settings.speculative_delay_ms <= 0:
        return None
    return ConstantSpeculativeExecutionPolicy(settings.speculative_delay_ms / 1000, settings.speculative_attempts)


def execution_profile(settings: CassandraSettings) -> ExecutionProfile:
    """The default profile of a plain Cassandra cluster (see the module's docstring)."""
    return ExecutionProfile(
        consistency_level=ConsistencyLevel.LOCAL_QUORUM,
        serial_consistency_level=ConsistencyLevel.LOCAL_SERIAL,
        load_balancing_policy=load_balancing(settings),
        retry_policy=RetryPolicy(),
        speculative_execution_policy=speculative_execution(settings),
        request_timeout=settings.request_timeout_s,
        row_factory=CachedRowFactory(),
    )


def is_read(cql: str) -> bool:
    """A SELECT: sending it twice changes nothing, so it may be sent to a second node speculatively."""
    return cql.lstrip().upper().startswith("SELECT")


def connect(settings: CassandraSettings, *, keyspace: bool = True, secrets_client: Any = None) -> Session:
    """A session with LOCAL_QUORUM as the default consistency; ``keyspace=False`` for migrations.

    ``secrets_client`` reads ``settings.secret_arn`` (the functions pass one with their time budget); None: a
    default client (the operator's tools)."""
    if settings.mode == "keyspaces":
        from jobrunner.adapters.stores.keyspaces import keyspaces_cluster

        cluster = keyspaces_cluster(settings)
    else:
        cluster = cassandra_cluster(settings, secrets_client)
    cluster.sockopts = liveness_options()
    session = cluster.connect()
    if keyspace:
        session.set_keyspace(settings.keyspace)
    session.add_request_init_listener(RenewAfterIdle(session, settings.idle_refresh_s))
    return session


def cassandra_cluster(settings: CassandraSettings, secrets_client: Any = None) -> Cluster:
    """The (unconnected) cluster of a plain or self-managed Cassandra: its profile, credentials and TLS."""
    return Cluster(
        list(settings.contact_points), port=settings.port, protocol_version=4,
        execution_profiles={EXEC_PROFILE_DEFAULT: execution_profile(settings)},
        auth_provider=(_credentials(settings.secret_arn, settings.region, secrets_client)
                       if settings.secret_arn else None),
        ssl_context=tls_context(settings.ca_bundle) if settings.tls else None,
        # the driver checks the address each connection reaches unless a name is given for them all
        ssl_options={"server_hostname": settings.tls_server_name} if settings.tls and settings.tls_server_name
        else None,
        # A restarted node is found again within seconds (the default backs off to 10 minutes).
        reconnection_policy=ExponentialReconnectionPolicy(base_delay=0.5, max_delay=5.0),
        connect_timeout=settings.connect_timeout_s,
        # The control connection reads the schema as it connects: the driver's 2 s for that failed every scan started
        # on a loaded node for minutes ("NoHostAvailable ... OperationTimedOut", a fault suite on a starved machine).
        control_connection_timeout=settings.connect_timeout_s,
    )


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


def _credentials(secret_arn: str, region: str, secrets_client: Any = None) -> PlainTextAuthProvider:
    if secrets_client is None:
        import boto3

        secrets_client = boto3.client("secretsmanager", region_name=region)
    secret = secrets_client.get_secret_value(SecretId=secret_arn)
    values = json.loads(secret["SecretString"])
    return PlainTextAuthProvider(username=values["username"], password=values["password"])


def tls_context(ca_bundle: str | None) -> ssl.SSLContext:
    """Verifies a node's chain against ``ca_bundle`` (None: the system's roots) and its host name: the driver
    gives each connection the address it reaches (a contact point's name, or the IP ``system.peers`` lists), or
    ``tls_server_name`` when the settings name one."""
    context = ssl.create_default_context(cafile=ca_bundle)  # CERT_REQUIRED and check_hostname
    context.check_hostname = True
    return context
