"""connect(): its connections fail fast when dead, are replaced after a long idle (a Lambda freeze), and check
who answers over TLS (cassandra_cluster)."""

from __future__ import annotations

import socket
import ssl
from concurrent.futures import Future
from ipaddress import ip_address
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest
from cassandra import ConsistencyLevel
from cassandra.connection import DefaultEndPoint
from cassandra.policies import (
    HostDistance,
    NoSpeculativeExecutionPolicy,
    RetryPolicy,
    RoundRobinPolicy,
    SimpleConvictionPolicy,
)
from cassandra.pool import Host
from cryptography import x509

from jobrunner.adapters import sockets
from jobrunner.adapters.stores import session as session_module
from jobrunner.adapters.stores.cassandra_settings import CassandraSettings
from jobrunner.adapters.stores.session import RenewAfterIdle, cassandra_cluster, connect
from tests.support.tls import Certificates, handshake, server_name_checked

if TYPE_CHECKING:
    from pathlib import Path


class ManualClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class PoolRenewingSession:
    """The part of a driver Session that RenewAfterIdle uses; records the pools it renews."""

    def __init__(self, hosts: list[Any], *, fails: bool = False) -> None:
        self.renewed: list[str] = []
        self.fails = fails
        self.cluster = SimpleNamespace(connect_timeout=1.0, metadata=SimpleNamespace(all_hosts=lambda: hosts))

    def add_or_renew_pool(self, host: Any, is_host_addition: bool) -> Future[bool]:
        assert is_host_addition is False
        done: Future[bool] = Future()
        if self.fails:
            done.set_exception(ConnectionError("refused"))
        else:
            self.renewed.append(host.name)
            done.set_result(True)
        return done


def host(name: str, is_up: bool | None = True) -> Any:
    return SimpleNamespace(name=name, is_up=is_up)


def test_requests_in_quick_succession_keep_their_connections() -> None:
    clock = ManualClock()
    session = PoolRenewingSession([host("a")])
    listener = RenewAfterIdle(session, idle_s=300, clock=clock)  # type: ignore[arg-type]
    for _ in range(5):
        clock.now += 299
        listener(None)  # type: ignore[arg-type]
    assert session.renewed == []


def test_the_first_request_after_a_long_idle_waits_for_new_connections_to_every_host() -> None:
    # Given a session last used 300 s ago (a Lambda frozen meanwhile: its connections may be dead)
    clock = ManualClock()
    session = PoolRenewingSession([host("a"), host("b"), host("unknown", is_up=None), host("down", is_up=False)])
    listener = RenewAfterIdle(session, idle_s=300, clock=clock)  # type: ignore[arg-type]
    clock.now += 300
    # When a request is made
    listener(None)  # type: ignore[arg-type]
    # Then every host not known to be down got a new pool before it was sent, and the next one keeps them
    assert session.renewed == ["a", "b", "unknown"]
    clock.now += 1
    listener(None)  # type: ignore[arg-type]
    assert session.renewed == ["a", "b", "unknown"]


def test_a_pool_that_cannot_be_renewed_is_left_to_the_driver(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    listener = RenewAfterIdle(PoolRenewingSession([host("a")], fails=True), idle_s=300, clock=clock)  # type: ignore[arg-type]
    clock.now += 600
    listener(None)  # type: ignore[arg-type]  # no exception: the request goes on and fails as it would have
    assert "could not renew" in caplog.text


class RecordingCluster:
    built: list[RecordingCluster] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        RecordingCluster.built.append(self)
        self.kwargs = kwargs
        self.sockopts: Any = None
        self.connect_timeout = kwargs.get("connect_timeout", 5)
        self.session = SimpleNamespace(
            listeners=[], set_keyspace=lambda name: None,
            add_request_init_listener=lambda fn: self.session.listeners.append(fn),
        )

    def connect(self) -> Any:
        self.connected_with = self.sockopts
        return self.session


def test_connect_gives_every_connection_the_liveness_options_and_the_idle_renewal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(session_module, "Cluster", RecordingCluster)
    session: Any = connect(CassandraSettings(idle_refresh_s=120))
    assert session.listeners and isinstance(session.listeners[0], RenewAfterIdle)
    assert session.listeners[0]._idle_s == 120
    assert RecordingCluster.built[-1].connected_with == sockets.liveness_options()


def test_the_liveness_options_keepalive_well_under_the_350_s_idle_timeout_and_fail_within_a_request() -> None:
    options = {(level, name): value for level, name, value in sockets.liveness_options()}
    assert options[(socket.SOL_SOCKET, socket.SO_KEEPALIVE)] == 1
    if hasattr(socket, "TCP_KEEPIDLE"):  # Linux, as on Lambda
        assert options[(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE)] < 350
        assert options[(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)] < CassandraSettings().request_timeout_s * 1000


def test_the_default_idle_renewal_comes_before_aws_forgets_an_idle_flow() -> None:
    assert CassandraSettings().idle_refresh_s < 350


def test_a_single_node_is_reached_round_robin_at_local_quorum_without_speculative_reads() -> None:
    profile = session_module.execution_profile(CassandraSettings())

    assert isinstance(profile.load_balancing_policy, RoundRobinPolicy)
    assert isinstance(profile.speculative_execution_policy, NoSpeculativeExecutionPolicy)
    assert (profile.consistency_level, profile.serial_consistency_level) == (
        ConsistencyLevel.LOCAL_QUORUM, ConsistencyLevel.LOCAL_SERIAL)
    assert type(profile.retry_policy) is RetryPolicy


def datacenter_host(address: str, datacenter: str) -> Host:
    host = Host(DefaultEndPoint(address), SimpleConvictionPolicy)
    host.set_location_info(datacenter, "rack1")
    return host


def test_a_named_datacenter_routes_to_a_replica_of_the_partition_first_and_never_to_another_datacenter() -> None:
    # Given a cluster whose local datacenter is named, and a node of another datacenter
    policy = session_module.load_balancing(CassandraSettings(local_dc="dc1"))
    local = [datacenter_host(f"127.0.0.{i}", "dc1") for i in (2, 3, 4)]
    remote = datacenter_host("10.0.0.9", "dc2")
    for host in [*local, remote]:
        host.set_up()
    replicas = {b"job-7": [local[2], remote]}  # the partition's replicas, as the token map would give them
    metadata = SimpleNamespace(get_replicas=lambda keyspace, key: list(replicas[key]))
    policy.populate(SimpleNamespace(metadata=metadata), [*local, remote])
    # When a statement of that partition is planned
    plan = list(policy.make_query_plan("jobrunner", SimpleNamespace(keyspace="jobrunner", routing_key=b"job-7")))
    # Then its local replica comes first, the other local nodes after it, and the remote node never
    assert plan[0] is local[2]
    assert sorted(h.address for h in plan) == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    assert policy.distance(remote) == HostDistance.IGNORED


def test_a_read_not_answered_within_the_delay_is_sent_once_more() -> None:
    policy = session_module.speculative_execution(CassandraSettings(speculative_delay_ms=250))
    assert policy is not None
    plan = policy.new_plan("jobrunner", None)
    assert [plan.next_execution(None), plan.next_execution(None)] == [0.25, -1]


def test_only_reads_may_be_sent_twice() -> None:
    from jobrunner.adapters.stores import cassandra, changes

    statements = [*cassandra.STATEMENTS, changes.INSERT_CHANGE, changes.SELECT_CHANGES]
    reads = {cql.split()[0] for cql in statements if session_module.is_read(cql)}
    others = {cql.split()[0] for cql in statements if not session_module.is_read(cql)}
    assert (reads, others) == ({"SELECT"}, {"INSERT", "UPDATE", "DELETE"})


# -- TLS to a self-managed cluster --------------------------------------------------------------------------

#: A node of a self-managed cluster as the driver reaches it: a contact point, or an address ``system.peers`` lists.
NODE = "10.1.0.11"


def test_tls_to_a_cluster_verifies_the_chain_and_the_host_name(tmp_path: Path) -> None:
    context = cassandra_cluster(CassandraSettings(tls=True, ca_bundle=str(Certificates(tmp_path).bundle))).ssl_context

    assert context is not None
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname is True


def test_each_connection_checks_the_address_of_the_node_it_reaches(tmp_path: Path) -> None:
    # Given TLS to a cluster whose nodes' certificates carry their own addresses
    certificates = Certificates(tmp_path)
    cluster = cassandra_cluster(CassandraSettings(contact_points=("10.1.0.10",), tls=True,
                                                  ca_bundle=str(certificates.bundle)))
    name = server_name_checked(cluster, NODE, 9042)
    assert name == NODE
    assert cluster.ssl_context is not None
    # Then the node's certificate passes, and one for another node's address or another name does not
    handshake(cluster.ssl_context, certificates.server(x509.IPAddress(ip_address(NODE))), name)
    for other in (x509.IPAddress(ip_address("10.1.0.99")), x509.DNSName("cassandra.attacker.example")):
        with pytest.raises(ssl.SSLCertVerificationError, match="match"):
            handshake(cluster.ssl_context, certificates.server(other), name)


def test_a_named_server_name_is_checked_on_every_connection(tmp_path: Path) -> None:
    # Given nodes whose certificates carry one name (CASSANDRA_TLS_SERVER_NAME), not their addresses
    certificates = Certificates(tmp_path)
    cluster = cassandra_cluster(CassandraSettings(tls=True, ca_bundle=str(certificates.bundle),
                                                  tls_server_name="cassandra.internal"))
    name = server_name_checked(cluster, NODE, 9042)
    # Then every connection, whatever address it reaches, checks that name
    assert name == "cassandra.internal"
    assert cluster.ssl_context is not None
    handshake(cluster.ssl_context, certificates.server(x509.DNSName("cassandra.internal")), name)
    with pytest.raises(ssl.SSLCertVerificationError, match="match"):
        handshake(cluster.ssl_context, certificates.server(x509.DNSName("cassandra.attacker.example")), name)


def test_a_session_connected_over_tls_checks_the_host_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(session_module, "Cluster", RecordingCluster)
    connect(CassandraSettings(tls=True, ca_bundle=str(Certificates(tmp_path).bundle)))
    context = RecordingCluster.built[-1].kwargs["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert (context.verify_mode, context.check_hostname) == (ssl.CERT_REQUIRED, True)


def test_without_tls_no_context_and_no_server_name() -> None:
    cluster = cassandra_cluster(CassandraSettings(tls_server_name="cassandra.internal"))
    assert cluster.ssl_context is None and cluster.ssl_options is None


def test_the_schema_read_on_connecting_has_the_connect_timeout_not_the_drivers_two_seconds() -> None:
    # the control connection reads every keyspace's schema as it connects; on a loaded node that took over 2 s and
    # every scan process started then failed to connect (a fault suite on a starved machine)
    cluster = session_module.cassandra_cluster(CassandraSettings(connect_timeout_s=15.0))
    assert cluster.control_connection_timeout == 15.0

