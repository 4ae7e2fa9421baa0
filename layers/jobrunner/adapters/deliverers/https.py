"""The HTTPS deliverer: one signed request to a target's URL, to a checked address, within the target's timeout.

Server-side request forgery is stopped where the connection is made: the host is resolved once, every address
it resolves to is checked with the domain's rules (``domain.targets.addresses``: no private, loopback,
link-local or metadata address unless the stage allow-lists its network) and the connection is made to a
checked address only, never by name again, so a DNS answer that changes between the check and the connect
(rebinding) cannot move the call. TLS still names the URL's host (SNI) and checks its certificate for that
name. A redirect is followed only to the same host and port over https (``followable_redirect``), on the same
checked addresses; any other is returned as its 3xx. The whole call (connect, TLS, redirects, the answer read)
ends within the target's ``timeout_s``: each step waits at most what is left, and a timer closes the socket at
the deadline, so an endpoint that answers a byte at a time cannot hold it longer. At most
``MAX_ANSWER_BYTES`` of an answer's body are read.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from contextlib import suppress
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from jobrunner.domain.targets import HttpsTarget, followable_redirect, literal_address, refusal
from jobrunner.ports import (
    MAX_ANSWER_BYTES,
    AddressRefused,
    Answered,
    ConnectionFailed,
    Deliverer,
    DeliveryCall,
    DeliveryResult,
    TimedOut,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

    Address = IPv4Address | IPv6Address
    #: Resolves (host, port) to its addresses (``socket.getaddrinfo`` by default; a test gives its own).
    Resolver = Callable[[str, int], list[Address]]

#: Redirects followed in one call, at most (the next 3xx is returned as the answer).
MAX_REDIRECTS = 5
HTTPS_PORT = 443
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def resolve(host: str, port: int) -> list[Address]:
    """Every address ``host`` resolves to for a TCP connection, in the resolver's order, once each."""
    found: dict[str, Address] = {}
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        address = literal_address(str(sockaddr[0]).split("%", 1)[0])
        if address is not None:
            found.setdefault(str(address), address)
    return list(found.values())


def tls_trust(ca_bundle: str | None = None) -> ssl.SSLContext:
    """The TLS trust of HTTPS targets: the system's CAs, and the CAs of ``ca_bundle`` besides (a local stack's or a
    test's own, ``Settings.target_ca_bundle``). Every call checks the chain and the host name; nothing turns that
    off."""
    context = ssl.create_default_context()  # CERT_REQUIRED and check_hostname
    if ca_bundle:
        context.load_verify_locations(cafile=ca_bundle)
    return context


class _Deadline:
    """The instant a call must end by (a monotonic clock), and what is left of it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        left = self._end - time.monotonic()
        if left <= 0:
            raise TimeoutError("deadline passed")
        return left

    @property
    def passed(self) -> bool:
        return time.monotonic() >= self._end


class _PinnedConnection(http.client.HTTPSConnection):
    """An HTTPS connection to ``address`` that speaks TLS and HTTP as ``host`` (SNI, certificate name, ``Host``)."""

    def __init__(self, host: str, port: int, address: Address, context: ssl.SSLContext, deadline: _Deadline) -> None:
        super().__init__(host, port, timeout=deadline.left(), context=context)
        self._address = address
        self._tls = context
        self._deadline = deadline
        #: The TLS socket, kept past ``close`` (an answer being read still uses it): what the deadline stops.
        self.pinned: socket.socket | None = None

    def connect(self) -> None:
        raw = socket.create_connection((str(self._address), self.port), timeout=self._deadline.left())
        try:
            raw.settimeout(self._deadline.left())
            self.sock = self.pinned = self._tls.wrap_socket(raw, server_hostname=self.host)
        except BaseException:
            raw.close()
            raise


class HttpsDeliverer(Deliverer):
    """Calls HTTPS targets. ``allowed``: the stage's allow-listed networks (``Settings.target_address_allow``);
    ``context``: the TLS trust (``tls_trust()``: the system's CAs by default; a test trusts its own certificate);
    ``resolver``:
    how a host name becomes addresses."""

    def __init__(self, *, allowed: Sequence[IPv4Network | IPv6Network] = (), context: ssl.SSLContext | None = None,
                 resolver: Resolver = resolve) -> None:
        self._allowed = tuple(allowed)
        self._context = context or tls_trust()
        self._resolver = resolver

    def deliver(self, call: DeliveryCall) -> DeliveryResult:
        target = call.target
        if not isinstance(target, HttpsTarget):
            raise TypeError(f"not an HTTPS target: {type(target).__name__}")
        deadline = _Deadline(float(target.timeout_s))
        parts = urlsplit(target.url)
        host, port = (parts.hostname or "").removesuffix("."), parts.port or HTTPS_PORT
        addresses = self._checked_addresses(host, port, deadline)
        if not isinstance(addresses, list):
            return addresses
        url = target.url
        try:
            for _ in range(MAX_REDIRECTS + 1):
                answer, location = self._request(host, port, addresses, url, call, deadline)
                following = followable_redirect(url, location) if location is not None else None
                if following is None:
                    return answer
                url = following
            return answer
        except TimeoutError:
            return TimedOut(deadline.seconds)
        except ssl.SSLError as error:
            return ConnectionFailed(f"TLS: {error}") if not deadline.passed else TimedOut(deadline.seconds)
        except (OSError, http.client.HTTPException) as error:
            if deadline.passed:
                return TimedOut(deadline.seconds)
            return ConnectionFailed(f"{type(error).__name__}: {error}")

    def _checked_addresses(self, host: str, port: int, deadline: _Deadline) -> list[Address] | DeliveryResult:
        """Every address ``host`` names or resolves to, if each may be reached; else why the call ends here."""
        literal = literal_address(host)
        try:
            addresses = [literal] if literal is not None else self._resolve(host, port, deadline)
        except TimeoutError:
            return TimedOut(deadline.seconds)
        except OSError as error:  # socket.gaierror: no such name, no answer
            return ConnectionFailed(f"DNS: {host} did not resolve ({error})")
        if not addresses:
            return ConnectionFailed(f"DNS: {host} has no address")
        for address in addresses:  # every one: the connect may go to any of them
            reason = refusal(address, self._allowed)
            if reason is not None:
                return AddressRefused(host if literal is not None else f"{host} ({address})", reason)
        return addresses

    def _resolve(self, host: str, port: int, deadline: _Deadline) -> list[Address]:
        """``host``'s addresses, or ``TimeoutError`` at the deadline: the system resolver has no timeout of its
        own (it may wait out several servers' retries), so it runs aside and is abandoned if it is late."""
        found: list[list[Address]] = []
        failed: list[OSError] = []

        def run() -> None:
            try:
                found.append(self._resolver(host, port))
            except OSError as error:
                failed.append(error)

        resolving = threading.Thread(target=run, name="delivery-dns", daemon=True)
        resolving.start()
        resolving.join(deadline.left())
        if failed:
            raise failed[0]
        if not found:
            raise TimeoutError(f"{host} did not resolve in time")
        return found[0]

    def _request(self, host: str, port: int, addresses: Sequence[Address], url: str, call: DeliveryCall,
                 deadline: _Deadline) -> tuple[Answered, str | None]:
        """One request of ``url`` on the first of ``addresses`` that connects: its answer, and the ``Location``
        of a redirect (None when it is none)."""
        connection = self._connect(host, port, addresses, deadline)
        # The kill switch: whatever step is waiting at the deadline fails then.
        timer = threading.Timer(deadline.left(), _shut, (connection,))
        timer.daemon = True
        timer.start()
        try:
            parts = urlsplit(url)
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            assert isinstance(call.target, HttpsTarget)
            connection.request(call.target.method, path, body=call.body or None, headers=call.headers)
            response = connection.getresponse()
            body = _read_bounded(response, connection, deadline)
            if deadline.passed:  # the socket was stopped mid-answer: what was read is not the answer
                raise TimeoutError("deadline passed while reading the answer")
            answer = Answered(response.status, body, response.getheader("retry-after"))
            location = response.getheader("location") if response.status in _REDIRECTS else None
            return answer, location
        finally:
            timer.cancel()
            connection.close()

    def _connect(self, host: str, port: int, addresses: Sequence[Address],
                 deadline: _Deadline) -> _PinnedConnection:
        """A connection to the first address that takes it (each tried in turn, within the deadline)."""
        last: OSError | None = None
        for address in addresses:
            connection = _PinnedConnection(host, port, address, self._context, deadline)
            try:
                connection.connect()
            except ssl.SSLError:
                connection.close()
                raise  # the server answered: another address of the same name would say the same
            except OSError as error:
                connection.close()
                last = error
                continue
            return connection
        assert last is not None
        raise last


def _read_bounded(response: http.client.HTTPResponse, connection: _PinnedConnection, deadline: _Deadline) -> bytes:
    """At most ``MAX_ANSWER_BYTES`` of the answer's body, each read waiting at most what is left of the call."""
    chunks: list[bytes] = []
    size = 0
    while size < MAX_ANSWER_BYTES:
        if connection.pinned is not None:
            connection.pinned.settimeout(deadline.left())
        chunk = response.read1(MAX_ANSWER_BYTES - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _shut(connection: _PinnedConnection) -> None:
    """Stop the connection's socket at the deadline (a read or write waiting on it fails at once)."""
    sock = connection.pinned
    if sock is not None:
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
