"""keyspaces_cluster(): what the driver sends to Amazon Keyspaces and how it checks who answers, without a network.

TLS handshakes run in memory (``ssl.MemoryBIO``) against certificates made here, signed by a test root that the
settings name as the CA bundle; the driver's own ``Connection`` picks the name each connection checks.
"""

from __future__ import annotations

import socket
import ssl
from datetime import UTC, datetime, timedelta
from ipaddress import ip_address
from typing import TYPE_CHECKING

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, Session
from cassandra.connection import Connection, DefaultEndPoint
from cassandra.encoder import Encoder
from cassandra.query import SimpleStatement
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from jobrunner.adapters.stores.cassandra import STATEMENTS, CassandraJobStore
from jobrunner.adapters.stores.keyspaces import endpoint_name, keyspaces_cluster
from jobrunner.adapters.stores.session import CassandraSettings, execution_profile

if TYPE_CHECKING:
    from pathlib import Path

    from cassandra.protocol import _MessageType

REGION = "eu-west-1"
ENDPOINT = f"cassandra.{REGION}.amazonaws.com"
#: What a Keyspaces peer looks like to the driver: an address in ``system.peers``, not a name.
PEER = "10.0.42.7"


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _issue(subject: str, sans: list[x509.GeneralName], issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
           ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    issuer_name, issuer_key = issuer or (_name(subject), key)
    now = datetime.now(UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - timedelta(hours=1)).not_valid_after(now + timedelta(days=1)))
    if issuer is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
        ), critical=True)
    else:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256()), key


class Certificates:
    """A test root (written as the CA bundle) and server certificates it signs."""

    def __init__(self, directory: Path) -> None:
        self._root, self._root_key = _issue("test root", [], None)
        self.bundle = directory / "bundle.pem"
        self.bundle.write_bytes(self._root.public_bytes(serialization.Encoding.PEM))
        self._directory = directory

    def server(self, *sans: x509.GeneralName) -> ssl.SSLContext:
        """A server's TLS context presenting a certificate for ``sans``, signed by the root."""
        cert, key = _issue("server", list(sans), (self._root.subject, self._root_key))
        path = self._directory / f"server-{cert.serial_number}.pem"
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(path)
        return context


def handshake(client: ssl.SSLContext, server: ssl.SSLContext, server_hostname: str | None) -> None:
    """A TLS handshake between ``client`` (checking ``server_hostname``) and ``server``, in memory; raises what the
    client's side raises."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client_end = client.wrap_bio(to_client, to_server, server_hostname=server_hostname)
    back, forth = ssl.MemoryBIO(), ssl.MemoryBIO()
    server_end = server.wrap_bio(back, forth, server_side=True)
    client_done = server_done = False
    for _ in range(10):
        if not client_done:
            try:
                client_end.do_handshake()
                client_done = True
            except ssl.SSLWantReadError:
                pass
        back.write(to_server.read())
        if not server_done:
            try:
                server_end.do_handshake()
                server_done = True
            except (ssl.SSLWantReadError, ssl.SSLError):
                pass  # a client that refused the certificate sends an alert; its own error is the one that counts
        to_client.write(forth.read())
        if client_done and server_done:
            return
    raise AssertionError("the handshake did not finish")


def settings(bundle: Path, contact_points: tuple[str, ...] = ("10.0.42.1",)) -> CassandraSettings:
    """Keyspaces settings; contact points by address, which the driver does not resolve (no DNS in a unit test)."""
    return CassandraSettings(mode="keyspaces", region=REGION, contact_points=contact_points, port=9142,
                             ca_bundle=str(bundle))


def driver_server_name(cluster_settings: CassandraSettings, address: str = PEER) -> str | None:
    """The name the driver's ``Connection`` checks when it opens a TLS connection to ``address``."""
    cluster = keyspaces_cluster(cluster_settings)
    connection = Connection(DefaultEndPoint(address, 9142), ssl_context=cluster.ssl_context,
                            ssl_options=cluster.ssl_options)
    connection._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # never connected
    wrapped = connection._wrap_socket_from_context()
    try:
        name: str | None = wrapped.server_hostname
        return name
    finally:
        wrapped.close()


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
        request = session.request(store._stmt(cql))
        assert (request.consistency_level, request.serial_consistency_level) == (
            ConsistencyLevel.LOCAL_QUORUM, serial), cql
