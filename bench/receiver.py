"""The deliveries section's HTTPS endpoint, in a process of its own, and the raw client that measures its ceiling.

The receiver is ``http.server`` over TLS on 127.0.0.1 (an ephemeral port), with a certificate of a local CA
(``devstack.certificates``) that the delivery function trusts through ``Settings.target_ca_bundle``, as the
end-to-end tests' receiver does. Each connection's handshake runs in the connection's own thread, not in the
accepting one. For every request it records the instant the request's headers were read (``time.time()``: the
arrival), its ``webhook-id`` and ``jobrunner-scheduled-time``, and whether it verifies with the Standard Webhooks
library (every request is verified: the library is not ours), then answers 200. It runs apart from the delivery
function, so that the two do not share a GIL.

``https_ceiling`` is the figure that does not depend on our design: signed POSTs of the same size from as many
threads as the delivery's concurrency, as fast as the receiver answers, with ``http.client``: a new TCP and TLS
connection per request, as the delivery's ``HttpsDeliverer`` makes, or one kept-alive connection per thread.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import multiprocessing
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ssl
    from multiprocessing.connection import Connection
    from pathlib import Path

#: A delivery's arrival: webhook-id, the jobrunner-scheduled-time header, arrival (epoch seconds), verified.
Arrival = tuple[str, str, float, bool]
#: The receiver's answer.
ANSWER = b"ok"


class _TlsServer(ThreadingHTTPServer):
    """A threading HTTPS server whose handshakes run in each connection's thread."""

    daemon_threads = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], tls: ssl.SSLContext) -> None:
        super().__init__(address, handler)
        self.tls = tls

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            wrapped = self.tls.wrap_socket(request, server_side=True)
        except (OSError, ValueError):
            return
        super().finish_request(wrapped, client_address)


def _handler(secret: str, arrivals: list[Arrival], lock: threading.Lock) -> type[BaseHTTPRequestHandler]:
    from standardwebhooks.webhooks import Webhook, WebhookVerificationError

    webhook = Webhook(secret)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive for a client that asks (the ceiling's second mode)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            arrived = time.time()
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {name.lower(): value for name, value in self.headers.items()}
            try:
                webhook.verify(raw, headers)
                verified = True
            except WebhookVerificationError:
                verified = False
            with lock:
                arrivals.append((headers.get("webhook-id", ""), headers.get("jobrunner-scheduled-time", ""),
                                 arrived, verified))
            self.send_response(200)
            self.send_header("Content-Length", str(len(ANSWER)))
            self.end_headers()
            self.wfile.write(ANSWER)

    return Handler


def serve(conn: Connection, pem: str, secret: str) -> None:
    """The receiver process: serve until told to stop; ``"count"`` sends how many arrived so far, ``"take"`` sends
    the arrivals so far and forgets them."""
    from devstack.certificates import server_context

    arrivals: list[Arrival] = []
    lock = threading.Lock()
    server = _TlsServer(("127.0.0.1", 0), _handler(secret, arrivals, lock), server_context(pem))
    threading.Thread(target=server.serve_forever, name="receiver", daemon=True).start()
    conn.send(server.server_address[1])
    while True:
        try:
            command = conn.recv()
        except EOFError:
            break
        if command == "count":
            with lock:
                conn.send(len(arrivals))
            continue
        if command != "take":
            break
        with lock:
            taken = list(arrivals)
            arrivals.clear()
        conn.send(taken)
    server.shutdown()
    server.server_close()


class Receiver:
    """The receiver process (spawned): its port, and the arrivals it recorded."""

    def __init__(self, pem: Path, secret: str) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self.process = context.Process(target=serve, args=(child, str(pem), secret), name="bench-receiver",
                                       daemon=True)
        self.process.start()
        child.close()
        if not self._conn.poll(120):
            raise RuntimeError("the receiver did not start")
        self.port: int = self._conn.recv()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def take(self) -> list[Arrival]:
        """The arrivals since the last ``take``."""
        self._conn.send("take")
        arrivals: list[Arrival] = self._conn.recv()
        return arrivals

    def count(self) -> int:
        """How many arrived since the last ``take``."""
        self._conn.send("count")
        return int(self._conn.recv())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._conn.send(None)
        self.process.join(timeout=20)
        if self.process.is_alive():  # only our own child, by its handle
            self.process.kill()
            self.process.join(timeout=5)

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


@dataclass(frozen=True)
class Ceiling:
    requests: int
    seconds: float
    errors: int
    statuses: dict[int, int]

    @property
    def rate(self) -> float:
        return (self.requests - self.errors) / self.seconds if self.seconds > 0 else float("nan")


def https_ceiling(url: str, ca_bundle: str, secret: str, body: bytes, count: int, threads: int,
                  keep_alive: bool) -> Ceiling:
    """POST ``body`` (signed, a new id each) ``count`` times to ``url`` from ``threads`` threads, with a new
    connection per request (``keep_alive`` False: what the delivery does) or one connection per thread."""
    from urllib.parse import urlsplit

    from standardwebhooks.webhooks import Webhook

    from jobrunner.adapters.deliverers.https import tls_trust

    parts = urlsplit(url)
    host, port, path = parts.hostname or "127.0.0.1", parts.port or 443, parts.path or "/"
    context = tls_trust(ca_bundle)
    webhook = Webhook(secret)
    counter = itertools.count()
    statuses: dict[int, int] = {}
    errors = [0]
    lock = threading.Lock()

    def connection() -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(host, port, timeout=30, context=context)

    def client() -> None:
        conn = connection()
        try:
            while (n := next(counter)) < count:
                msg_id = f"ceiling-{n}"
                now = datetime.now(UTC)
                headers = {"content-type": "application/json", "webhook-id": msg_id,
                           "webhook-timestamp": str(int(now.timestamp())),
                           "webhook-signature": webhook.sign(msg_id, now, body.decode())}
                try:
                    conn.request("POST", path, body=body, headers=headers)
                    response = conn.getresponse()
                    response.read()
                    status = response.status
                except (OSError, http.client.HTTPException):
                    status = -1
                    conn.close()
                    conn = connection()
                with lock:
                    statuses[status] = statuses.get(status, 0) + 1
                    errors[0] += status != 200
                if not keep_alive:
                    conn.close()
                    conn = connection()
        finally:
            conn.close()

    started = time.monotonic()
    pool = [threading.Thread(target=client, name=f"ceiling-{n}") for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return Ceiling(count, time.monotonic() - started, errors[0], statuses)

