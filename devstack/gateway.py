"""A local stand-in for API Gateway: HTTP in, REST proxy event to the api handler, HTTP out."""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from devstack.lambda_context import LocalContext

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
MAX_BODY = 6 * 1024 * 1024  # API Gateway's payload limit


def to_event(method: str, target: str, headers: dict[str, str], body: bytes, tenant: str | None) -> dict[str, Any]:
    url = urlsplit(target)
    query = parse_qs(url.query)
    text = body.decode("utf-8", errors="replace") if body else None
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
        "isBase64Encoded": False,
    }


def serve(handler: Handler, tokens: Callable[[], dict[str, str]], host: str, port: int) -> ThreadingHTTPServer:
    """Start serving on a daemon thread; ``tokens()`` maps bearer tokens to tenants (read per request).

    Like one Lambda execution environment, the handler takes one event at a time: the Powertools
    resolver keeps per-request state on the app object, so concurrent calls would trample each other.
    """
    one_at_a_time = threading.Lock()

    class Adapter(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._reply(413, {"content-type": "application/json"},
                            json.dumps({"error": "payload_too_large", "message": "body over 6 MB"}).encode())
                return
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            auth = headers.get("authorization", "")
            tenant = tokens().get(auth[7:].strip()) if auth.lower().startswith("bearer ") else None
            event = to_event(self.command, self.path, headers, body, tenant)
            with one_at_a_time:
                response = handler(event, LocalContext(function_name="jobrunner-api"))
            payload = response.get("body") or ""
            data = base64.b64decode(payload) if response.get("isBase64Encoded") else payload.encode("utf-8")
            out_headers = dict(response.get("headers") or {})
            for key, values in (response.get("multiValueHeaders") or {}).items():
                out_headers[key] = ", ".join(values)
            self._reply(int(response.get("statusCode", 500)), out_headers, data)

        def _reply(self, status: int, headers: dict[str, str], data: bytes) -> None:
            self.send_response(status)
            for key, value in headers.items():
                if key.lower() != "content-length":
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Adapter)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server
