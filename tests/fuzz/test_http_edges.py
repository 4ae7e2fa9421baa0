"""Bad input at the edges, over HTTP against the whole local stack: every answer is a 4xx with a JSON error body.

Oversized body 413, malformed JSON 400, wrong content type 415, valid JSON of the wrong shape 422 naming
``body``, odd paths 4xx, unknown routes 404, wrong methods 405, bad Content-Length 4xx, schedules out of
the calendar's range 422.
"""

from __future__ import annotations

import json
import socket
import uuid
from typing import TYPE_CHECKING, Any

import pytest
import requests

from devstack import tokens
from jobrunner.api.body_limits import MAX_BODY_BYTES
from tests.fuzz.conftest import REQUEST_TIMEOUT_S, Tenant

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.e2e

JSON = {"Content-Type": "application/json"}
FUTURE = {"schedule": {"cron": "0 0 1 1 *"}}  # once a year: nothing fires during the session


@pytest.fixture(scope="module")
def job_id(tenant: Tenant) -> str:
    return tenant.submit(FUTURE)


def refused(response: requests.Response, status: int, error: str, field: str | None = None) -> dict[str, Any]:
    """Assert a JSON error answer; returns its body."""
    assert response.status_code == status, (response.status_code, response.text[:500])
    assert response.headers["Content-Type"].startswith("application/json"), response.headers
    body: dict[str, Any] = response.json()
    assert body["error"] == error, body
    if field is not None:
        assert field in [e["field"] for e in body["errors"]], body
    return body


def payload_body(size: int) -> bytes:
    """A job whose body is exactly ``size`` bytes."""
    skeleton = json.dumps({**FUTURE, "payload": ""})
    return json.dumps({**FUTURE, "payload": "x" * (size - len(skeleton))}).encode()


def raw_exchange(url: str, request: bytes, timeout_s: float = 3.0) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout_s) as conn:
        conn.sendall(request)
        received = b""
        try:
            while chunk := conn.recv(65536):
                received += chunk
        except TimeoutError:
            pass
    return received


# --- 413 -------------------------------------------------------------------------------------------------


def test_a_body_over_the_apis_limit_is_413(tenant: Tenant) -> None:
    refused(tenant.request("POST", "/jobs", data=payload_body(MAX_BODY_BYTES + 1), headers=JSON),
            413, "payload_too_large", "body")


def test_a_body_under_the_limit_with_a_payload_over_its_own_limit_is_422_naming_payload(tenant: Tenant) -> None:
    refused(tenant.request("POST", "/jobs", data=payload_body(MAX_BODY_BYTES), headers=JSON),
            422, "validation_error", "payload")


def test_a_body_over_the_gateways_limit_is_413_from_the_gateway(tenant: Tenant, job_id: str) -> None:
    # Only the headers are sent: the gateway answers from Content-Length alone, before reading any body
    request = (f"PATCH /jobs/{job_id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tenant.token}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {6 * 1024 * 1024 + 1}\r\n"
               "Connection: close\r\n\r\n")
    head, _, body = raw_exchange(tenant.url, request.encode()).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 ") and json.loads(body)["error"] == "payload_too_large"


# --- 415 -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", [
    None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data", "application/xml",
    "application/json; charset=latin-1", "application/jsonp",
])
def test_a_body_that_is_not_declared_json_is_415(tenant: Tenant, job_id: str, content_type: str | None) -> None:
    headers = {"Content-Type": content_type} if content_type is not None else {}
    body = json.dumps(FUTURE).encode()
    for method, path in (("POST", "/jobs"), ("PATCH", f"/jobs/{job_id}"), ("POST", f"/jobs/{job_id}/resume")):
        refused(tenant.request(method, path, data=body, headers=headers), 415, "unsupported_media_type")


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "Application/JSON;charset=UTF-8"])
def test_json_in_utf8_is_accepted(tenant: Tenant, content_type: str) -> None:
    response = tenant.request("POST", "/jobs", data=json.dumps(FUTURE), headers={"content-type": content_type})
    assert response.status_code == 201, response.text


# --- 400 -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [
    b"{bad", b'{"schedule": ', b"   ", b'{"schedule": {"cron": "0 0 1 1 *"}, "payload": NaN}',
    b'{"schedule": {"cron": "0 0 1 1 *"}, "payload": Infinity}', b"\xef\xbb\xbf{}",
    b'{"schedule": {"cron": "0 0 1 1 *"}, "payload": "\\ud800"}',
    b'{"schedule": {"cron": "0 0 1 1 *"}, "payload": {"\\udfff": 1}}',
], ids=["truncated-object", "truncated-value", "blank", "NaN", "Infinity", "utf8-bom", "lone-surrogate",
        "lone-surrogate-key"])
def test_a_body_that_is_not_strict_json_is_400(tenant: Tenant, job_id: str, raw: bytes) -> None:
    refused(tenant.request("POST", "/jobs", data=raw, headers=JSON), 400, "malformed_json")
    refused(tenant.request("PATCH", f"/jobs/{job_id}", data=raw, headers=JSON), 400, "malformed_json")


def test_a_body_that_is_not_utf8_is_400(tenant: Tenant) -> None:
    raw = b'{"schedule": {"cron": "0 0 1 1 *"}, "payload": "\xff\xfe"}'
    refused(tenant.request("POST", "/jobs", data=raw, headers=JSON), 400, "malformed_json", "body")


# --- 422 -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b"[]", b'"x"', b"3", b"true", b"null", b"[{}]"])
def test_json_that_is_not_an_object_is_422_naming_body(tenant: Tenant, job_id: str, raw: bytes) -> None:
    refused(tenant.request("POST", "/jobs", data=raw, headers=JSON), 422, "validation_error", "body")
    refused(tenant.request("PATCH", f"/jobs/{job_id}", data=raw, headers=JSON), 422, "validation_error", "body")
    if raw != b"null":  # resume's body is optional: null is no body
        refused(tenant.request("POST", f"/jobs/{job_id}/resume", data=raw, headers=JSON),
                422, "validation_error", "body")


@pytest.mark.parametrize(("raw", "field"), [
    (b'{"schedule": {"cron": "0 0 1 1 *"}, "payload": ' + b"[" * 100 + b"]" * 100 + b"}", "payload"),
    (b'{"schedule": {"cron": "0 0 1 1 *"}, "payload": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "body"),
    (b'{"schedule": {"cron": "0 0 1 1 *"}, "payload": 1e400}', "payload"),
    (b'{"schedule": {"cron": "0 0 1 1 *"}, "payload": ' + b"7" * 5000 + b"}", "body"),
], ids=["deep", "very-deep", "number-out-of-range", "number-too-long"])
def test_json_beyond_what_the_api_holds_is_422(tenant: Tenant, raw: bytes, field: str) -> None:
    refused(tenant.request("POST", "/jobs", data=raw, headers=JSON), 422, "validation_error", field)


def test_rejected_submissions_write_nothing(local_stack: Any) -> None:
    # Given a tenant of its own
    name = f"fuzz-empty-{uuid.uuid4().hex[:8]}"
    empty = Tenant(name=name, token=tokens.add(name), url=local_stack.url)
    # When every kind of bad body is sent to it
    for data, headers in [
        (payload_body(MAX_BODY_BYTES + 1), JSON), (json.dumps(FUTURE).encode(), {"Content-Type": "text/plain"}),
        (b'{"schedule": {"cron": "0 0 1 1 *"}, "payload": NaN}', JSON), (b"[]", JSON),
        (b'{"schedule": {"cron": "0 0 1 1 *"}, "payload": "\\ud800"}', JSON),
        (b'{"schedule": {"cron": "0 0 1 1 *"}, "payload": ' + b"[" * 100 + b"]" * 100 + b"}", JSON),
    ]:
        assert 400 <= empty.request("POST", "/jobs", data=data, headers=headers).status_code < 500
    # Then it has no job
    assert empty.request("GET", "/jobs").json() == {"items": [], "next_cursor": None}


# --- paths and methods -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [
    "/nope", "/", "/jobs/x/y/z", "/JOBS", "/jobs//pause", "/health/x", "/%2e%2e/etc/passwd", "/jobs/x/executions/y",
    "/" + "a" * 8000,
])
def test_an_unknown_route_is_a_json_404(tenant: Tenant, path: str) -> None:
    refused(tenant.request("GET", path), 404, "not_found")


@pytest.mark.parametrize("path", [
    "/jobs/%00", "/jobs/%ZZ", "/jobs/%ED%A0%80", "/jobs/%E2%98%83", "/jobs/..%2F..%2Fetc%2Fpasswd",
    "/jobs/a%20b", "/jobs/%3Cscript%3E", "/jobs/" + "j" * 64, "/jobs/" + "j" * 65, "/jobs/" + "%41" * 2000,
    "/jobs/x?preview=-1", "/jobs/x?preview=9999999999999999999999", "/jobs?limit=0", "/jobs?limit=%FF",
    "/jobs?cursor=" + "%FF" * 100, "/jobs?status=nope", "/jobs/x/executions?cursor=%00",
    "/jobs/x/executions?cursor=" + "A" * 65,
])
def test_odd_paths_and_queries_are_4xx_json(tenant: Tenant, path: str) -> None:
    response = tenant.request("GET", path)
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    assert isinstance(response.json()["error"], str)


def test_a_request_line_too_long_for_the_server_is_4xx(tenant: Tenant) -> None:
    # http.server's own 414 (an HTML page: the request never reaches the handler)
    assert tenant.request("GET", "/jobs/" + "a" * 70_000).status_code == 414


@pytest.mark.parametrize(("method", "path", "allowed"), [
    ("PUT", "/jobs", "GET, POST"), ("DELETE", "/jobs", "GET, POST"), ("PATCH", "/jobs", "GET, POST"),
    ("PUT", "/jobs/{id}", "DELETE, GET, PATCH"), ("POST", "/jobs/{id}", "DELETE, GET, PATCH"),
    ("GET", "/jobs/{id}/pause", "POST"), ("DELETE", "/jobs/{id}/run", "POST"),
    ("PATCH", "/jobs/{id}/executions", "GET"), ("POST", "/health", "GET"), ("DELETE", "/segments", "GET"),
    ("PUT", "/openapi.json", "GET"), ("GET", "/jobs/batch", "POST"), ("DELETE", "/jobs/bulk", "POST"),
])
def test_a_wrong_method_is_405_with_allow(tenant: Tenant, job_id: str, method: str, path: str, allowed: str) -> None:
    response = tenant.request(method, path.replace("{id}", job_id))
    refused(response, 405, "method_not_allowed")
    assert response.headers["Allow"] == allowed


@pytest.mark.parametrize("method", ["OPTIONS", "HEAD", "TRACE", "QUERY", "PROPFIND", "BREW"])
def test_other_methods_are_405_too(tenant: Tenant, method: str) -> None:
    # Methods http.server has no handler for (QUERY, PROPFIND, BREW) too: a 405 of the api's, never a 501
    response = tenant.request(method, "/jobs")
    assert (response.status_code, response.headers.get("Allow")) == (405, "GET, POST")


def test_the_edge_checks_authentication_first(local_stack: Any) -> None:
    response = requests.put(local_stack.url + "/nope", data=b"x" * (MAX_BODY_BYTES + 1), timeout=REQUEST_TIMEOUT_S)
    refused(response, 401, "unauthenticated")


# --- the gateway's own reading of requests ------------------------------------------------------------


@pytest.mark.parametrize("length", ["abc", "-5"])
def test_a_bad_content_length_is_a_4xx(tenant: Tenant, length: str) -> None:
    request = (f"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tenant.token}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n{{}}")
    assert raw_exchange(tenant.url, request.encode()).startswith(b"HTTP/1.1 4")


# --- schedules out of range: 422, never a 5xx ---------------------------------------------------------


OVERFLOW_CASES = [
    pytest.param({"every": "P99999999999W"}, "schedule.every"),
    pytest.param({"every": "P9999999D"}, "schedule.every"),
    pytest.param({"at": "9999-12-31T23:59:59-01:00"}, "schedule.at"),
    pytest.param({"every": "PT1M", "start": "0001-01-01T00:30:00+01:00"}, "schedule.start"),
    pytest.param({"iso8601": "R5/9999-12-31T23:59:59-01:00/PT1H"}, "schedule.iso8601"),
    pytest.param({"iso8601": "R5/2030-01-01T00:00:00Z/PT1000000000000000000000H"}, "schedule.iso8601"),
]


@pytest.mark.parametrize(("schedule", "field"), OVERFLOW_CASES)
def test_a_schedule_out_of_range_is_422(tenant: Tenant, job_id: str, schedule: dict[str, str], field: str) -> None:
    refused(tenant.request("POST", "/jobs", json={"schedule": schedule}), 422, "validation_error", field)
    refused(tenant.request("PATCH", f"/jobs/{job_id}", json={"schedule": schedule}), 422, "validation_error", field)


@pytest.fixture
def last_second_job(tenant: Tenant) -> Iterator[str]:
    yield tenant.submit({"schedule": {"every": "PT10S", "start": "9999-12-31T23:59:59Z"}})


def test_previewing_a_schedule_that_ends_with_the_calendar_is_200(tenant: Tenant, last_second_job: str) -> None:
    response = tenant.request("GET", f"/jobs/{last_second_job}?preview=5")
    assert response.status_code == 200, response.text
