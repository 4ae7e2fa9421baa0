"""The limits at the api's edge (``jobrunner.api.body_limits``), through the Lambda entry point, without servers.

These cover what the local HTTP server cannot send the way API Gateway does: base64 bodies, header
names in any case, bodies that are not UTF-8. ``test_http_edges.py`` sends the rest over HTTP.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from jobrunner.api import body_limits
from jobrunner.api.app import app, handle

JOB = {"schedule": {"every": "PT1H"}}


def event(method: str, path: str, body: str | bytes | None = None, headers: dict[str, str] | None = None,
          *, tenant: str | None = "alice", multi: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """An API Gateway REST proxy event; a bytes body is sent base64-encoded, as API Gateway does for binary types."""
    context: dict[str, Any] = {"requestId": "r-1", "stage": "test", "httpMethod": method, "path": path}
    if tenant is not None:
        context["authorizer"] = {"principalId": tenant}
    is_binary = isinstance(body, bytes)
    return {
        "resource": path, "path": path, "httpMethod": method,
        "headers": {"Content-Type": "application/json"} if headers is None else headers,
        "multiValueHeaders": multi or {}, "queryStringParameters": None, "multiValueQueryStringParameters": None,
        "pathParameters": None, "stageVariables": None, "requestContext": context,
        "body": base64.b64encode(body).decode() if isinstance(body, bytes) else body, "isBase64Encoded": is_binary,
    }


def answer(evt: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    response = handle(evt, None)
    headers = {**(response.get("headers") or {}),
               **{name: ", ".join(values) for name, values in (response.get("multiValueHeaders") or {}).items()}}
    return int(response["statusCode"]), json.loads(response["body"]), headers


def fields(body: dict[str, Any]) -> list[str]:
    return [e["field"] for e in body["errors"]]


# --- routes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "allowed"), [
    ("PUT", "/jobs", "GET, POST"),
    ("DELETE", "/jobs", "GET, POST"),
    ("POST", "/jobs/j-1", "DELETE, GET, PATCH"),
    ("GET", "/jobs/j-1/pause", "POST"),
    ("HEAD", "/health", "GET"),
    ("OPTIONS", "/jobs", "GET, POST"),
    ("TRACE", "/segments", "GET"),
])
def test_a_known_path_with_another_method_is_405_with_allow(method: str, path: str, allowed: str) -> None:
    status, body, headers = answer(event(method, path))
    assert (status, body["error"], headers["Allow"]) == (405, "method_not_allowed", allowed)


@pytest.mark.parametrize("path", ["/nope", "/", "", "/jobs/a/b/c", "/JOBS", "/jobs//pause", "/health/x"])
def test_an_unknown_path_is_a_json_404(path: str) -> None:
    status, body, headers = answer(event("GET", path))
    assert (status, body["error"], headers["Content-Type"]) == (404, "not_found", "application/json")


def test_an_anonymous_caller_is_401_before_any_routing() -> None:
    status, body, _ = answer(event("PUT", "/nope", "x" * (body_limits.MAX_BODY_BYTES + 1), tenant=None))
    assert (status, body["error"]) == (401, "unauthenticated")


def test_the_route_table_is_the_resolvers() -> None:
    assert app.routes.allowed("/jobs") == ["GET", "POST"] and app.routes.allowed("/health/") == ["GET"]
    assert app.routes.find("POST", "/jobs/batch") == ("/jobs/batch", {})
    assert app.routes.find("GET", "/jobs/j-1") == ("/jobs/<job_id>", {"job_id": "j-1"})


# --- size --------------------------------------------------------------------------------------------


def _body_of(size: int) -> str:
    """A JSON body of exactly ``size`` bytes (UTF-8)."""
    skeleton = json.dumps({**JOB, "payload": ""})
    return json.dumps({**JOB, "payload": "x" * (size - len(skeleton))})


def test_a_body_at_the_limit_passes_the_edge_and_over_it_is_413() -> None:
    assert len(_body_of(body_limits.MAX_BODY_BYTES).encode()) == body_limits.MAX_BODY_BYTES
    assert body_limits.check(event("POST", "/jobs", _body_of(body_limits.MAX_BODY_BYTES))) is None
    status, body, _ = answer(event("POST", "/jobs", _body_of(body_limits.MAX_BODY_BYTES + 1)))
    assert (status, body["error"], fields(body)) == (413, "payload_too_large", ["body"])


def test_the_limit_counts_utf8_bytes_not_characters() -> None:
    skeleton = len(json.dumps({**JOB, "payload": ""}))
    text = json.dumps({**JOB, "payload": "é" * ((body_limits.MAX_BODY_BYTES - skeleton) // 2 + 1)}, ensure_ascii=False)
    assert len(text) <= body_limits.MAX_BODY_BYTES < len(text.encode())
    assert answer(event("POST", "/jobs", text))[0] == 413


def test_a_base64_body_over_the_limit_is_413_and_any_method_is_limited() -> None:
    assert answer(event("POST", "/jobs", _body_of(body_limits.MAX_BODY_BYTES + 1).encode()))[0] == 413
    assert answer(event("GET", "/jobs", "x" * (body_limits.MAX_BODY_BYTES + 1)))[0] == 413


# --- encoding -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b'{"schedule": {"every": "PT1H"}, "payload": "\xff"}', b"\xff\xfe{}", b"\xc3("],
                         ids=["xff-in-string", "utf16-bom", "truncated-sequence"])
def test_a_body_that_is_not_utf8_is_400(raw: bytes) -> None:
    status, body, _ = answer(event("POST", "/jobs", raw))
    assert (status, body["error"], fields(body)) == (400, "malformed_json", ["body"])
    assert "UTF-8" in body["errors"][0]["reason"]


def test_undecodable_bytes_passed_on_as_surrogates_are_400() -> None:
    text = b'{"schedule": {"every": "PT1H"}, "payload": "\xff"}'.decode("utf-8", "surrogateescape")
    assert answer(event("POST", "/jobs", text))[:2] == (400, {"error": "malformed_json", "message": "the body is not "
                                                               "valid JSON", "errors": [{"field": "body", "reason":
                                                               "not valid UTF-8 (character 44)"}]})


def test_a_valid_base64_utf8_body_passes_the_edge() -> None:
    assert body_limits.check(event("POST", "/jobs", json.dumps({**JOB, "payload": "é"}).encode())) is None


# --- media type ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("headers", [
    {"Content-Type": "application/json"},
    {"content-type": "application/json; charset=utf-8"},
    {"CONTENT-TYPE": "Application/JSON;charset=UTF-8"},
    {"Content-type": 'application/json; charset="utf-8"'},
    {"Content-Type": "application/json; charset=utf8; profile=x"},
])
def test_json_in_utf8_is_accepted_whatever_the_case(headers: dict[str, str]) -> None:
    assert body_limits.check(event("POST", "/jobs", json.dumps(JOB), headers)) is None


@pytest.mark.parametrize("headers", [
    {},
    {"Content-Type": "text/plain"},
    {"Content-Type": "application/x-www-form-urlencoded"},
    {"Content-Type": "multipart/form-data"},
    {"Content-Type": "application/json; charset=latin-1"},
    {"Content-Type": "application/jsonp"},
    {"Content-Type": "application/json, text/plain"},
    {"Content-Type": ""},
])
def test_another_media_type_is_415(headers: dict[str, str]) -> None:
    for method, path in (("POST", "/jobs"), ("PATCH", "/jobs/j-1"), ("POST", "/jobs/j-1/resume")):
        status, body, _ = answer(event(method, path, json.dumps(JOB), headers))
        assert (status, body["error"]) == (415, "unsupported_media_type"), (method, path, headers)


def test_the_media_type_is_read_from_multi_value_headers_too() -> None:
    evt = event("POST", "/jobs", json.dumps(JOB), {}, multi={"Content-Type": ["application/json"]})
    assert body_limits.check(evt) is None


def test_a_post_without_a_body_needs_no_media_type() -> None:
    assert body_limits.check(event("POST", "/jobs/j-1/pause", None, {})) is None
    assert body_limits.check(event("POST", "/jobs/j-1/run", "", {"Content-Type": "text/plain"})) is None


# --- JSON ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "field", "reason"), [
    ("{bad", "body", "not valid JSON: Expecting property name enclosed in double quotes (line 1, column 2)"),
    ("   ", "body", "not valid JSON: Expecting value (line 1, column 4)"),
    ("\ufeff{}", "body", "not valid JSON: Unexpected UTF-8 BOM (decode using utf-8-sig) (line 1, column 1)"),
    ('{"schedule": {"every": "PT1H"}, "payload": NaN}', "body", "NaN is not JSON"),
    ('{"schedule": {"every": "PT1H"}, "payload": [-Infinity]}', "body", "-Infinity is not JSON"),
    ('{"schedule": {"every": "PT1H"}, "payload": {"a": ["\\ud800"]}}', "payload.a.0",
     "a lone UTF-16 surrogate is not Unicode"),
    ('{"schedule": {"every": "PT1H"}, "payload": {"\\udc00": 1}}', "payload", "a lone UTF-16 surrogate is not Unicode"),
    ('{"schedule": {"cron": "0 * * * *", "timezone": "\\ud83d"}}', "schedule.timezone",
     "a lone UTF-16 surrogate is not Unicode"),
    ('"\\ud800"', "body", "a lone UTF-16 surrogate is not Unicode"),
])
def test_what_is_not_strict_json_is_400_naming_where(text: str, field: str, reason: str) -> None:
    status, body, _ = answer(event("POST", "/jobs", text))
    assert (status, body["error"], body["errors"]) == (400, "malformed_json", [{"field": field, "reason": reason}])


def test_a_surrogate_pair_is_a_character_not_an_error() -> None:
    text = '{"schedule": {"every": "PT1H"}, "payload": "\\ud83d\\ude00"}'
    assert body_limits.check(event("POST", "/jobs", text)) is None


@pytest.mark.parametrize(("text", "field"), [
    ('{"schedule": {"every": "PT1H"}, "payload": 1e400}', "payload"),
    ('{"schedule": {"every": "PT1H"}, "backoff": {"initial_delay_s": -1E999}}', "backoff.initial_delay_s"),
    ('{"schedule": {"every": "PT1H"}, "payload": ' + "9" * 5000 + "}", "body"),
    ('{"schedule": {"every": "PT1H"}, "payload": ' + "[" * 64 + "]" * 64 + "}", "payload"),
    ('{"schedule": {"every": "PT1H"}, "payload": ' + "[" * 5000 + "]" * 5000 + "}", "body"),
    ("[" * 65 + "]" * 65, "body"),
])
def test_json_python_cannot_hold_is_422_naming_the_field(text: str, field: str) -> None:
    status, body, _ = answer(event("POST", "/jobs", text))
    assert (status, body["error"], fields(body)) == (422, "validation_error", [field])


def test_nesting_up_to_the_limit_passes() -> None:
    deepest = '{"schedule": {"every": "PT1H"}, "payload": ' + "[" * 63 + "]" * 63 + "}"
    assert body_limits.check(event("POST", "/jobs", deepest)) is None


@pytest.mark.parametrize(("text", "kind"), [
    ("[]", "an array"), ('[{"schedule": {"every": "PT1H"}}, {"schedule": {"every": "PT2H"}}]', "an array"),
    ('"x"', "a string"), ("3", "a number"), ("1.5", "a number"), ("true", "a boolean"),
])
def test_json_that_is_not_an_object_is_422_naming_body(text: str, kind: str) -> None:
    for method, path in (("POST", "/jobs"), ("PATCH", "/jobs/j-1"), ("POST", "/jobs/j-1/resume")):
        status, body, _ = answer(event(method, path, text))
        assert (status, body["errors"]) == (422, [{"field": "body", "reason": f"must be a JSON object, not {kind}"}])


@pytest.mark.parametrize("text", ["null", "{}", '{"anything": [1, "x"]}'])
def test_an_object_or_null_is_left_to_the_route(text: str) -> None:
    assert body_limits.check(event("POST", "/jobs", text)) is None


def test_a_rejection_never_fails_to_serialise() -> None:
    # Paths and methods end up in messages; a lone surrogate there must not break the JSON answer
    for evt in (event("GET", "/nope/\ud800"), event("\ud800", "/jobs")):
        status, body, _ = answer(evt)
        assert status in (404, 405) and body["error"] in ("not_found", "method_not_allowed")


def test_the_resolver_sees_the_media_type_in_lower_case() -> None:
    evt = event("POST", "/jobs", "{}", {"Content-Type": "Application/JSON;charset=UTF-8"},
                multi={"Content-Type": ["Application/JSON;charset=UTF-8"]})
    seen = body_limits.normalized(evt)
    assert seen["headers"] == {"Content-Type": "application/json;charset=utf-8"}
    assert seen["multiValueHeaders"] == {"Content-Type": ["application/json;charset=utf-8"]}
    assert evt["headers"] == {"Content-Type": "Application/JSON;charset=UTF-8"}  # the caller's event is untouched
    plain = event("POST", "/jobs", "{}")
    assert body_limits.normalized(plain) is plain
