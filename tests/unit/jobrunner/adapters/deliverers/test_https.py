"""The HTTPS deliverer against a real HTTPS server started here, on 127.0.0.1 and an ephemeral port, with a
self-signed certificate made for the test and trusted by the deliverer's TLS context alone.

Loopback is refused unless allow-listed, so the tests that reach the server allow-list 127.0.0.0/8 as a stage
would (``JOBRUNNER_TARGET_ADDRESS_ALLOW``); those that must not reach it check that it received nothing.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from standardwebhooks.webhooks import Webhook

from jobrunner.adapters.deliverers.https import HttpsDeliverer, tls_trust
from jobrunner.domain.jobs import Trigger
from jobrunner.domain.targets import (
    DeliveryContext,
    HttpsTarget,
    WebhookSecret,
    parse_allow_list,
    webhook_request,
)
from jobrunner.ports import MAX_ANSWER_BYTES, AddressRefused, Answered, ConnectionFailed, DeliveryCall, TimedOut

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
LOOPBACK = parse_allow_list(["127.0.0.0/8"])
CONTEXT = DeliveryContext(execution_id="e-1", job_id="job-1", scheduled_at=dt.datetime(2026, 11, 22, 10, 10,
                                                                                       tzinfo=dt.UTC),
                          attempt=1, trigger=Trigger.SCHEDULE)


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for ``localhost`` and 127.0.0.1, and its key (PEM files in ``directory``)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                       critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@dataclass
class Receiver:
    """What the server received, and how its paths answer."""

    port: int = 0
    trust: ssl.SSLContext = field(default_factory=ssl.create_default_context)
    #: The certificate's PEM file, a CA bundle of one.
    bundle: str = ""
    received: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    #: Set when the test ends: a hanging answer gives up then.
    released: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str, host: str = "localhost") -> str:
        return f"https://{host}:{self.port}{path}"


def handler_for(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            receiver.received.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()},
                                      body))
            path = self.path.split("?", 1)[0]
            if path == "/hang":
                receiver.released.wait(timeout=10)
                return
            if path == "/drip":  # a byte at a time: each read is quick, the whole answer never ends
                self.send_response(200)
                self.send_header("Content-Length", "1000")
                self.end_headers()
                while not receiver.released.wait(timeout=0.1):
                    try:
                        self.wfile.write(b"x")
                        self.wfile.flush()
                    except OSError:
                        return
                return
            status, headers, out = {
                "/ok": (200, {}, b"thanks"),
                "/busy": (429, {"Retry-After": "120"}, b"slow down"),
                "/big": (500, {}, b"x" * (MAX_ANSWER_BYTES * 4)),
                "/same-host": (302, {"Location": "/ok"}, b""),
                "/other-host": (302, {"Location": "https://other.example.com/ok"}, b""),
                "/loop": (307, {"Location": "/loop"}, b""),
            }.get(path, (404, {}, b"no such hook"))
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(out))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(out)

        do_POST = do_GET = do_PUT = _answer

    return Handler


@pytest.fixture(scope="module")
def receiver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Receiver]:
    cert_file, key_file = self_signed(tmp_path_factory.mktemp("tls"))
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert_file, key_file)
    receiver = Receiver(trust=ssl.create_default_context(cafile=str(cert_file)), bundle=str(cert_file))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(receiver))
    server.daemon_threads = True
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield receiver
    receiver.released.set()
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def fresh(receiver: Receiver) -> None:
    receiver.received.clear()


def to_localhost(host: str, port: int) -> list[Any]:
    """A resolver for which every name is 127.0.0.1."""
    return [ipaddress.ip_address("127.0.0.1")]


def deliverer(receiver: Receiver, allowed: Any = LOOPBACK, resolver: Any = to_localhost) -> HttpsDeliverer:
    return HttpsDeliverer(allowed=allowed, context=receiver.trust, resolver=resolver)


def call(url: str, timeout_s: int = 5, method: str = "POST") -> DeliveryCall:
    """The signed call of ``url``, sent now."""
    target = HttpsTarget(url=url, method=method, headers={"X-Api-Key": "k-1"}, timeout_s=timeout_s).checked()
    request = webhook_request(target, {"report": "<jobrunner.attempt>"}, CONTEXT, [WebhookSecret.parse(SECRET)],
                              dt.datetime.now(dt.UTC))
    return DeliveryCall(target, request.body, request.headers, CONTEXT.execution_id)


# -- a delivery the receiver verifies ---------------------------------------------------------------------


def test_the_receiver_verifies_the_delivery_with_a_standard_webhooks_library(receiver: Receiver) -> None:
    result = deliverer(receiver).deliver(call(receiver.url("/ok?team=payroll")))
    assert result == Answered(200, b"thanks")
    [(method, path, headers, body)] = receiver.received
    assert (method, path) == ("POST", "/ok?team=payroll")
    assert Webhook(SECRET).verify(body, headers) == {"report": 1}
    assert (headers["webhook-id"], headers["x-api-key"], headers["host"]) == ("e-1", "k-1",
                                                                              f"localhost:{receiver.port}")
    assert headers["content-type"] == "application/json"


def test_an_ip_literal_is_called_as_written_when_allowed(receiver: Receiver) -> None:
    assert deliverer(receiver).deliver(call(receiver.url("/ok", "127.0.0.1"))) == Answered(200, b"thanks")


def test_a_get_sends_no_body_and_is_still_signed(receiver: Receiver) -> None:
    deliverer(receiver).deliver(call(receiver.url("/ok"), method="GET"))
    [(method, _, headers, body)] = receiver.received
    assert (method, body) == ("GET", b"")
    Webhook(SECRET).verify(body, headers, json_parse=False)  # an empty body is no JSON


def test_an_answers_status_body_and_retry_after_are_returned(receiver: Receiver) -> None:
    assert deliverer(receiver).deliver(call(receiver.url("/busy"))) == Answered(429, b"slow down", "120")
    assert deliverer(receiver).deliver(call(receiver.url("/nowhere"))) == Answered(404, b"no such hook")


def test_a_long_answer_is_read_no_further_than_the_bound(receiver: Receiver) -> None:
    result = deliverer(receiver).deliver(call(receiver.url("/big")))
    assert isinstance(result, Answered) and (result.status, len(result.body)) == (500, MAX_ANSWER_BYTES)


# -- addresses ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_without_the_allow_list_loopback_is_refused_and_nothing_is_sent(receiver: Receiver, host: str) -> None:
    result = deliverer(receiver, allowed=()).deliver(call(receiver.url("/ok", host)))
    assert isinstance(result, AddressRefused) and result.reason == "a loopback address"
    assert receiver.received == []


@pytest.mark.parametrize(("addresses", "reason"), [
    (["10.0.0.7"], "a private address"),
    (["169.254.169.254"], "a link-local address (instance metadata)"),
    (["::1"], "a loopback address"),
    (["93.184.215.14", "192.168.1.1"], "a private address"),  # every address counts, not only the first
    (["::ffff:10.1.2.3"], "a private address (carried in ::ffff:a01:203)"),
])
def test_a_name_resolving_to_a_private_address_is_refused(receiver: Receiver, addresses: list[str],
                                                          reason: str) -> None:
    def resolver(host: str, port: int) -> list[Any]:
        return [ipaddress.ip_address(address) for address in addresses]

    result = deliverer(receiver, allowed=(), resolver=resolver).deliver(call("https://hooks.example.com/ok"))
    assert isinstance(result, AddressRefused) and result.reason == reason
    assert result.host.startswith("hooks.example.com (")


def test_a_name_that_does_not_resolve_is_a_connection_failure(receiver: Receiver) -> None:
    def resolver(host: str, port: int) -> list[Any]:
        raise OSError("Name or service not known")

    result = deliverer(receiver, resolver=resolver).deliver(call("https://nowhere.example.com/ok"))
    assert isinstance(result, ConnectionFailed) and result.reason.startswith("DNS:")


def test_the_certificate_is_checked_for_the_urls_host_though_the_address_is_pinned(receiver: Receiver) -> None:
    # Given a name that resolves to the receiver, whose certificate does not carry it
    result = deliverer(receiver).deliver(call(receiver.url("/ok", "hooks.example.com")))
    # Then TLS fails: the pinned address does not stand in for the name
    assert isinstance(result, ConnectionFailed) and result.reason.startswith("TLS:")
    assert receiver.received == []


def test_the_trust_is_the_systems_cas_and_a_ca_bundle_besides_with_every_check_kept(receiver: Receiver) -> None:
    # Given the trust a stage sets with JOBRUNNER_TARGET_CA_BUNDLE: the receiver's certificate is trusted
    trusting = tls_trust(receiver.bundle)
    assert (trusting.verify_mode, trusting.check_hostname) == (ssl.CERT_REQUIRED, True)
    with_bundle = HttpsDeliverer(allowed=LOOPBACK, context=trusting, resolver=to_localhost)
    assert with_bundle.deliver(call(receiver.url("/ok"))) == Answered(200, b"thanks")
    # and the host name is still checked against the certificate
    assert isinstance(other := with_bundle.deliver(call(receiver.url("/ok", "hooks.example.com"))), ConnectionFailed)
    assert other.reason.startswith("TLS:")
    # When no bundle is named, Then the system's CAs alone do not trust it
    system = HttpsDeliverer(allowed=LOOPBACK, resolver=to_localhost).deliver(call(receiver.url("/ok")))
    assert isinstance(system, ConnectionFailed) and "CERTIFICATE_VERIFY_FAILED" in system.reason
    assert len(receiver.received) == 1


def test_a_closed_port_is_a_connection_failure(receiver: Receiver) -> None:
    import socket

    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    result = deliverer(receiver).deliver(call(f"https://localhost:{port}/ok"))
    assert isinstance(result, ConnectionFailed)


# -- redirects ------------------------------------------------------------------------------------------


def test_a_redirect_to_the_same_host_is_followed_with_the_same_signed_request(receiver: Receiver) -> None:
    assert deliverer(receiver).deliver(call(receiver.url("/same-host"))) == Answered(200, b"thanks")
    [(_, first, _, _), (method, then, headers, body)] = receiver.received
    assert (first, method, then) == ("/same-host", "POST", "/ok")
    Webhook(SECRET).verify(body, headers)


def test_a_redirect_to_another_host_is_not_followed(receiver: Receiver) -> None:
    result = deliverer(receiver).deliver(call(receiver.url("/other-host")))
    assert isinstance(result, Answered) and result.status == 302
    assert [path for _, path, _, _ in receiver.received] == ["/other-host"]


def test_redirects_are_followed_a_bounded_number_of_times(receiver: Receiver) -> None:
    result = deliverer(receiver).deliver(call(receiver.url("/loop")))
    assert isinstance(result, Answered) and result.status == 307
    assert len(receiver.received) == 6  # the call, then five redirects


# -- time -----------------------------------------------------------------------------------------------


def test_an_endpoint_that_does_not_answer_is_abandoned_at_the_targets_timeout(receiver: Receiver) -> None:
    started = time.monotonic()
    result = deliverer(receiver).deliver(call(receiver.url("/hang"), timeout_s=1))
    assert result == TimedOut(1.0)
    assert 0.9 <= time.monotonic() - started < 3


def test_an_endpoint_that_answers_a_byte_at_a_time_is_abandoned_at_the_targets_timeout(receiver: Receiver) -> None:
    started = time.monotonic()
    result = deliverer(receiver).deliver(call(receiver.url("/drip"), timeout_s=1))
    assert result == TimedOut(1.0)
    assert 0.9 <= time.monotonic() - started < 3


def test_a_name_that_resolves_too_slowly_is_abandoned_at_the_targets_timeout(receiver: Receiver) -> None:
    def stuck(host: str, port: int) -> list[Any]:
        receiver.released.wait(timeout=10)
        return []

    started = time.monotonic()
    assert deliverer(receiver, resolver=stuck).deliver(call("https://slow-dns.example.com/", timeout_s=1)) == TimedOut(
        1.0)
    assert time.monotonic() - started < 3
