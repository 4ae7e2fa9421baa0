"""A local stand-in for API Gateway (and CloudFront): HTTP in, REST proxy event to the api handler, HTTP out;
the dashboard's static files at ``/ui`` on the same origin (``devstack.dashboard``)."""

from __future__ import annotations

import base64
import json
import logging
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from devstack import dashboard
from devstack.dashboard import DASHBOARD_DIR
from devstack.lambda_context import LocalContext

if TYPE_CHECKING:
    from pathlib import Path

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
MAX_BODY = 6 * 1024 * 1024  # API Gateway's payload limit


def to_event(method: str, target: str, headers: dict[str, str], body: bytes, tenant: str | None) -> dict[str, Any]:
    url = urlsplit(target)
    query = parse_qs(url.query, keep_blank_values=True)  # as API Gateway: `?kind=` is kind ""
    # Like API Gateway, a body that is not text reaches the function base64-encoded.
    try:
        text, encoded = (body.decode("utf-8") if body else None), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode(), True
    return {
        "resource": url.path,
        "path": url.path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "stage": "local",
            "httpMethod": method,
            "path": url.path,
            "identity": {"sourceIp": "127.0.0.1"},
            "authorizer": {"principalId": tenant} if tenant else None,
        },
        "body": text,
        "isBase64Encoded": encoded,
    }


def serve(
    handler: Handler, tokens: Callable[[], dict[str, str]], host: str, port: int, *, reuse_port: bool = False,
    dashboard_dir: Path | None = DASHBOARD_DIR,
) -> ThreadingHTTPServer:
    """Start serving on a daemon thread; ``tokens()`` maps bearer tokens to tenants (read per request).

    Like one Lambda execution environment, the handler takes one event at a time: the Powertools
    resolver keeps per-request state on the app object, so concurrent calls would trample each other.
    Several processes serve one port concurrently when each binds it with ``reuse_port``
    (``devstack.environments``): the kernel spreads the connections between them.
    ``/ui`` and everything under it is the dashboard's (``devstack.dashboard``), served from ``dashboard_dir``
    on the API's own origin as CloudFront does in AWS; ``None`` leaves every path to the handler.
    """
    server = GatewayServer((host, port), handler=handler, tokens=tokens, dashboard_dir=dashboard_dir,
                           reuse_port=reuse_port)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server


class GatewayServer(ThreadingHTTPServer):
    """The HTTP server, holding what its requests need: the api handler, the tokens, the dashboard's files."""

    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], *, handler: Handler, tokens: Callable[[], dict[str, str]],
        dashboard_dir: Path | None, reuse_port: bool,
    ) -> None:
        self.allow_reuse_port = reuse_port  # read when the socket is bound, in super().__init__
        self.handler = handler
        self.tokens = tokens
        self.dashboard_dir = dashboard_dir
        self.one_at_a_time = threading.Lock()
        super().__init__(address, GatewayRequest)


class GatewayRequest(BaseHTTPRequestHandler):
    """One request: the dashboard's file, or a REST proxy event to the api handler and its answer back."""

    server: GatewayServer
    protocol_version = "HTTP/1.1"
    # One write per response (headers and body together, flushed after each request), sent at once: with
    # the headers and the body in two small writes, Nagle's algorithm held the body back until the
    # client's delayed acknowledgement of the headers (about 40 ms), so a keep-alive client got at most
    # some 25 answers a second whatever the handler's speed (178 submits/s from 8 clients).
    wbufsize = -1
    disable_nagle_algorithm = True

    timeout = 30  # a client that promises more body than it sends does not hold a thread forever

    def _handle(self) -> None:
        body = self._body()
        if body is None:
            return
        path = urlsplit(self.path).path
        if self.server.dashboard_dir is not None and dashboard.is_dashboard_path(path):
            found = dashboard.answer(self.command, path, self.server.dashboard_dir)
            self._reply(found.status, found.headers, found.body)
        else:
            self._call_api(body)

    def _body(self) -> bytes | None:
        """The request's body, or None once a refusal is sent (API Gateway's limits on it)."""
        if self.headers.get("Transfer-Encoding"):
            self._error(411, "length_required", "send the body with a Content-Length")
            return None
        try:
            length = int(self.headers.get("Content-Length") or 0)
            if length < 0:
                raise ValueError(length)
        except ValueError:
            self._error(400, "bad_request", "Content-Length is not a non-negative integer")
            return None
        if length > MAX_BODY:
            self._error(413, "payload_too_large", "body over 6 MB")
            return None
        return self.rfile.read(length) if length else b""

    def _call_api(self, body: bytes) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        auth = headers.get("authorization", "")
        tenant = self.server.tokens().get(auth[7:].strip()) if auth.lower().startswith("bearer ") else None
        event = to_event(self.command, self.path, headers, body, tenant)
        try:
            with self.server.one_at_a_time:
                response = self.server.handler(event, LocalContext(function_name="jobrunner-api"))
        except Exception:
            log.exception("the api handler failed")
            self._error(502, "bad_gateway", "the function failed")
            return
        payload = response.get("body") or ""
        data = base64.b64decode(payload) if response.get("isBase64Encoded") else payload.encode("utf-8")
        out_headers = dict(response.get("headers") or {})
        for key, values in (response.get("multiValueHeaders") or {}).items():
            out_headers[key] = ", ".join(values)
        self._reply(int(response.get("statusCode", 500)), out_headers, data)

    def _error(self, status: int, error: str, message: str) -> None:
        body = json.dumps({"error": error, "message": message, "errors": []}).encode()
        self._reply(status, {"Content-Type": "application/json"}, body)

    def _reply(self, status: int, headers: dict[str, str], data: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            if key.lower() != "content-length":
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(b"" if self.command == "HEAD" else data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_TRACE = _handle

    def parse_request(self) -> bool:
        """The request line and headers, as ``http.server`` reads them; any other method (``QUERY``, ``PROPFIND``)
        is handled too. Left to itself, ``http.server`` answers 501 to a method without a ``do_`` method (a server
        error); API Gateway hands every method to the function, whose answer is 405 with ``Allow``."""
        parsed = super().parse_request()
        if parsed and not hasattr(self, f"do_{self.command}"):
            setattr(self, f"do_{self.command}", self._handle)
        return parsed

    def log_message(self, format: str, *args: Any) -> None:
        pass
