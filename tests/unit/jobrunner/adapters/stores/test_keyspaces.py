"""keyspaces_cluster(): what the driver sends to Amazon Keyspaces and how it checks who answers, without a network.

TLS handshakes run in memory (``tests/support/tls.py``) against certificates signed by a test root that the
settings name as the CA bundle; the driver's own ``Connection`` picks the name each connection checks.
"""

from __future__ import annotations

import ssl
from ipaddress import ip_address
from typing import TYPE_CHECKING

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, Session
from cassandra.encoder import Encoder
from cassandra.query import SimpleStatement
from cryptography import x509

from jobrunner.adapters.stores.cassandra import STATEMENTS, CassandraJobStore
from jobrunner.adapters.stores.cassandra_settings import CassandraSettings
from jobrunner.adapters.stores.keyspaces import endpoint_name, keyspaces_cluster
from jobrunner.adapters.stores.session import execution_profile
from tests.support.tls import Certificates, handshake, server_name_checked

if TYPE_CHECKING:
    from pathlib import Path

    from cassandra.protocol import _MessageType

REGION = "eu-west-1"
ENDPOINT = f"cassandra.{REGION}.amazonaws.com"
#: What a Keyspaces peer looks like to the driver: an address in ``system.peers``, not a name.
PEER = "10.0.42.7"


def settings(bundle: Path, contact_points: tuple[str, ...] = ("10.0.42.1",)) -> CassandraSettings:
    """Keyspaces settings; contact points by address, which the driver does not resolve (no DNS in a unit test)."""
    return CassandraSettings(mode="keyspaces", region=REGION, contact_points=contact_points, port=9142,
                             ca_bundle=str(bundle))


def driver_server_name(cluster_settings: CassandraSettings, address: str = PEER) -> str | None:
    """The name the driver's ``Connection`` checks when it opens a TLS connection to ``address``."""
    return server_name_checked(keyspaces_cluster(cluster_settings), address, 9142)


def test_every_connection_checks_the_endpoints_name_whatever_address_it_reaches(tmp_path: Path) -> None:
    # Given Keyspaces' peers, which the driver reaches by their addresses in system.peers
    bundle = Certificates(tmp_path).bundle

    # Then each connection, the first and every peer's, checks the certificate against the endpoint's name
    assert driver_server_name(settings(bundle), address=ENDPOINT) == ENDPOINT
    assert driver_server_name(settings(bundle), address=PEER) == ENDPOINT


def test_the_context_verifies_the_chain_and_the_host_name(tmp_path: Path) -> None:
    context = keyspaces_cluster(settings(Certificates(tmp_path).bundle)).ssl_context

    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname is True


def test_a_certificate_for_the_endpoint_is_accepted_and_one_for_another_name_refused(tmp_path: Path) -> None:
    # Given certificates signed by a root of the CA bundle: one for the endpoint, one for another name
    certificates = Certificates(tmp_path)
    cluster_settings = settings(certificates.bundle)
    client = keyspaces_cluster(cluster_settings).ssl_context
    name = driver_server_name(cluster_settings)

    # Then the endpoint's certificate passes
    handshake(client, certificates.server(x509.DNSName(ENDPOINT)), name)
    # And one for another host, or for the peer's address, does not, though its chain is sound
    with pytest.raises(ssl.SSLCertVerificationError, match="match"):
        handshake(client, certificates.server(x509.DNSName("cassandra.attacker.example")), name)
    with pytest.raises(ssl.SSLCertVerificationError, match="match"):
        handshake(client, certificates.server(x509.IPAddress(ip_address(PEER))), name)


@pytest.mark.parametrize(("contact_points", "expected"), [
    ((ENDPOINT,), ENDPOINT),
    # China's partition: the stack names the endpoint with the partition's URL suffix
    (("cassandra.cn-north-1.amazonaws.com.cn",), "cassandra.cn-north-1.amazonaws.com.cn"),
    # addresses only (a test, or the settings' default): the region's endpoint
    (("127.0.0.1",), ENDPOINT),
    (("10.0.0.1", "10.0.0.2"), ENDPOINT),
])
def test_the_name_checked_is_the_endpoint_the_contact_points_name(
    tmp_path: Path, contact_points: tuple[str, ...], expected: str
) -> None:
    assert endpoint_name(settings(tmp_path / "unused.pem", contact_points)) == expected


class UnconnectedSession(Session):
    """A driver ``Session`` on ``cluster`` that opens no connection: it prepares a statement as a plain statement of
    its CQL, and builds the request the driver would send for it (``Session._create_response_future``), unsent."""

    def __init__(self, cluster: Cluster) -> None:  # not Session.__init__, which connects
        self.cluster = cluster
        self._profile_manager = cluster.profile_manager
        self._protocol_version = 4
        self._request_init_callbacks = []
        self._metrics = None
        self.encoder = Encoder()
        self.keyspace = None

    def prepare(self, query: str, custom_payload: object = None, keyspace: str | None = None) -> SimpleStatement:
        return SimpleStatement(query)

    def request(self, statement: SimpleStatement) -> _MessageType:
        return self._create_response_future(statement, None, False, None, None).message  # timeout None: no timer


COMPARE_AND_SETS = [cql for cql in STATEMENTS if " IF " in cql]


def cluster_of(mode: str, bundle: Path) -> Cluster:
    if mode == "keyspaces":
        return keyspaces_cluster(settings(bundle))
    return Cluster(["10.0.42.1"], protocol_version=4,
                   execution_profiles={EXEC_PROFILE_DEFAULT: execution_profile(CassandraSettings())})


@pytest.mark.parametrize(("mode", "serial"), [("keyspaces", None), ("cassandra", ConsistencyLevel.LOCAL_SERIAL)])
def test_compare_and_sets_carry_a_serial_consistency_only_where_it_is_taken(
    tmp_path: Path, mode: str, serial: int | None
) -> None:
    # Keyspaces lists SERIAL and LOCAL_SERIAL among the levels it rejects with an exception, and runs every write,
    # a conditional one too, at LOCAL_QUORUM; the protocol's serial consistency is optional, so none is sent there.
    # A cluster keeps its Paxos rounds in the local datacenter (LOCAL_SERIAL).
    session = UnconnectedSession(cluster_of(mode, Certificates(tmp_path).bundle))
    store = CassandraJobStore(session, serial_reads=mode != "keyspaces")

    assert COMPARE_AND_SETS
    for cql in COMPARE_AND_SETS:
        request = session.request(store._statements.prepared(cql))
        assert (request.consistency_level, request.serial_consistency_level) == (
            ConsistencyLevel.LOCAL_QUORUM, serial), cql


def test_the_schema_read_on_connecting_has_the_connect_timeout(tmp_path: Path) -> None:
    cluster = keyspaces_cluster(settings(Certificates(tmp_path).bundle))
    assert cluster.control_connection_timeout == CassandraSettings().connect_timeout_s == 15.0

