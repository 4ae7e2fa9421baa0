"""TLS without a network: a test root written as a CA bundle, server certificates it signs, handshakes in memory
(``ssl.MemoryBIO``), and the name the driver's own ``Connection`` checks when it opens a connection."""

from __future__ import annotations

import socket
import ssl
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from cassandra.connection import Connection, DefaultEndPoint
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

if TYPE_CHECKING:
    from pathlib import Path

    from cassandra.cluster import Cluster


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


def server_name_checked(cluster: Cluster, address: str, port: int) -> str | None:
    """The name the driver's ``Connection`` checks when ``cluster`` opens a TLS connection to ``address``."""
    connection = Connection(DefaultEndPoint(address, port), ssl_context=cluster.ssl_context,
                            ssl_options=cluster.ssl_options)
    connection._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # never connected
    wrapped = connection._wrap_socket_from_context()
    try:
        name: str | None = wrapped.server_hostname
        return name
    finally:
        wrapped.close()
