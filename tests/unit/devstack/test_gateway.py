"""The local gateway's routing, one request at a time through its request handler (no socket): the dashboard's
files at /ui, everything else to the api handler."""

from __future__ import annotations

import io
import threading
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from devstack.dashboard import DASHBOARD_DIR
from devstack.gateway import GatewayRequest

if TYPE_CHECKING:
    from pathlib import Path


class _Kept(io.BytesIO):
    def close(self) -> None:  # the handler closes its files when done; keep what it wrote
        pass


class _Connection:
    """What the request handler reads its request from and writes its answer to."""

    def __init__(self, request: bytes) -> None:
        self.incoming, self.outgoing = _Kept(request), _Kept()

    def makefile(self, mode: str, *_args: Any) -> io.BytesIO:
        return self.incoming if "r" in mode else self.outgoing

    def setsockopt(self, *_args: Any) -> None:
        pass

    def settimeout(self, _timeout: float | None) -> None:
        pass


class _Api:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any], _context: Any) -> dict[str, Any]:
        self.events.append(event)
        return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": '{"api": true}'}


def _exchange(request: bytes, api: _Api, dashboard_dir: Path | None = DASHBOARD_DIR) -> tuple[int, dict[str, str],
                                                                                             bytes]:
    server = SimpleNamespace(handler=api, tokens=lambda: {"t0k": "alice"}, dashboard_dir=dashboard_dir,
                             one_at_a_time=threading.Lock())
    connection = _Connection(request)
    GatewayRequest(connection, ("127.0.0.1", 40000), server)  # type: ignore[arg-type]  # stand-ins
    head, _, body = connection.outgoing.getvalue().partition(b"\r\n\r\n")
    status_line, *lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    return int(status_line.split()[1]), headers, body


def _get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()


def test_the_page_is_served_on_the_apis_origin_with_its_security_headers() -> None:
    api = _Api()

    status, headers, body = _exchange(_get("/ui"), api)

    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert "connect-src 'self'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert body == (DASHBOARD_DIR / "index.html").read_bytes()
    assert api.events == []  # the api function never sees the dashboard's requests


def test_a_script_is_served_whole() -> None:
    status, headers, body = _exchange(_get("/ui/app.js?v=1"), _Api())

    assert (status, headers["Content-Type"]) == (200, "text/javascript; charset=utf-8")
    assert int(headers["Content-Length"]) == len(body) == len((DASHBOARD_DIR / "app.js").read_bytes())


@pytest.mark.parametrize("path", [
    "/ui/../pyproject.toml", "/ui/../../../../etc/passwd", "/ui/%2e%2e/%2e%2e/pyproject.toml",
    "/ui/..%2f..%2fpyproject.toml", "/ui/../devstack/gateway.py", "/ui/README.md", "/ui/missing.js",
])
def test_a_path_outside_the_dashboards_files_is_not_found_and_reaches_nothing(path: str) -> None:
    api = _Api()

    status, _headers, body = _exchange(_get(path), api)

    assert (status, body) == (404, b"not found\n")
    assert api.events == []


def test_other_paths_go_to_the_api_with_the_tenant_of_the_token() -> None:
    api = _Api()
    request = b"GET /jobs?limit=5 HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer t0k\r\nConnection: close\r\n\r\n"

    status, _headers, body = _exchange(request, api)

    assert (status, body) == (200, b'{"api": true}')
    (event,) = api.events
    assert (event["path"], event["requestContext"]["authorizer"]) == ("/jobs", {"principalId": "alice"})


def test_a_path_that_only_starts_like_ui_is_the_apis() -> None:
    api = _Api()

    _exchange(_get("/uix"), api)

    assert [event["path"] for event in api.events] == ["/uix"]


def test_a_write_to_the_dashboard_is_refused() -> None:
    status, headers, _body = _exchange(b"POST /ui HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}", _Api())

    assert (status, headers["Allow"]) == (405, "GET, HEAD")


def test_without_a_dashboard_every_path_is_the_apis() -> None:
    api = _Api()

    status, _headers, _body = _exchange(_get("/ui"), api, dashboard_dir=None)

    assert status == 200 and [event["path"] for event in api.events] == ["/ui"]


def test_the_limits_on_the_body_still_come_first() -> None:
    api = _Api()

    status, _headers, body = _exchange(b"GET /ui HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", api)

    assert status == 400 and b"Content-Length" in body


@pytest.mark.parametrize("method", ["QUERY", "CONNECT", "PROPFIND", "BREW"])
def test_a_method_the_server_has_no_handler_for_still_reaches_the_api(method: str) -> None:
    # http.server alone answers 501 to these; API Gateway hands every method to the function, which answers
    # 405 with Allow for a path it does not serve with that method
    api = _Api()
    request = f"{method} /jobs HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer t0k\r\nConnection: close\r\n\r\n"

    status, _headers, body = _exchange(request.encode(), api)

    assert (status, body) == (200, b'{"api": true}')
    assert [event["httpMethod"] for event in api.events] == [method]


def test_a_method_the_server_has_no_handler_for_is_the_dashboards_405_under_ui() -> None:
    status, headers, _body = _exchange(b"QUERY /ui HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", _Api())

    assert (status, headers["Allow"]) == (405, "GET, HEAD")


def test_a_query_parameter_given_empty_reaches_the_api_empty_as_api_gateway_passes_it() -> None:
    # API Gateway hands `?kind=` to the function as kind "" (which the API refuses, 422); dropping it would
    # make the local stack accept what the deployed one refuses
    from devstack.gateway import to_event

    event = to_event("GET", "/jobs?kind=&limit=5", {}, b"", "alice")
    assert event["queryStringParameters"] == {"kind": "", "limit": "5"}
    assert event["multiValueQueryStringParameters"] == {"kind": [""], "limit": ["5"]}
