"""A certificate authority of its own, for HTTPS endpoints started locally: a root written as a CA bundle (what a
client is told to trust, e.g. ``JOBRUNNER_TARGET_CA_BUNDLE``) and server certificates it signs. The end-to-end
tests' receivers and the benchmark's use it; nothing here is trusted beyond the process that loads the bundle."""

from __future__ import annotations

import ssl
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

if TYPE_CHECKING:
    from pathlib import Path


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
        return server_context(self.server_pem(*sans))

    def server_pem(self, *sans: x509.GeneralName) -> Path:
        """A file holding a certificate for ``sans``, signed by the root, and its key (what ``server_context`` reads:
        another process can load it)."""
        cert, key = _issue("server", list(sans), (self._root.subject, self._root_key))
        path = self._directory / f"server-{cert.serial_number}.pem"
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        return path


def server_context(pem: Path | str) -> ssl.SSLContext:
    """A server's TLS context presenting the certificate and key of ``pem`` (``Certificates.server_pem``)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pem)
    return context
