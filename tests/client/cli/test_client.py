"""The HTTP client: auth headers, SigV4 signatures, error bodies (the real transport is in tests/e2e/test_cli.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from botocore.credentials import Credentials

from jobrunner_client.cli.client import (
    ApiClient,
    ApiError,
    BearerAuth,
    HttpRequest,
    SigV4Auth,
)
from tests.client.cli.fakes import FakeTransport, reply

if TYPE_CHECKING:
    from typer.testing import Result

    from tests.client.cli.fakes import Cli


def test_sigv4_signs_for_execute_api_in_the_region_including_the_body_and_query() -> None:
    auth = SigV4Auth("eu-west-1", Credentials("AKIDEXAMPLE", "secret", "session-token"))
    request = HttpRequest("POST", "https://abc.execute-api.eu-west-1.amazonaws.com/prod/jobs?limit=5",
                          {"Content-Type": "application/json"}, b'{"schedule":{"at":"now"}}')
    signed = auth.sign(request)
    authorization = signed.headers["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in authorization
    assert "SignedHeaders=" in authorization and "x-amz-date" in authorization
    assert signed.headers["X-Amz-Security-Token"] == "session-token"
    assert signed.body == request.body and signed.url == request.url
    # A different body is a different signature
    other = auth.sign(HttpRequest(request.method, request.url, dict(request.headers), b"{}"))
    assert other.headers["Authorization"] != authorization or other.headers["X-Amz-Date"] != signed.headers[
        "X-Amz-Date"]


def test_the_cli_signs_with_sigv4_when_asked(cli: Cli, transport: FakeTransport,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import botocore.session

    class Session:
        def get_credentials(self) -> Credentials:
            return Credentials("AKIDEXAMPLE", "secret")

    monkeypatch.setattr(botocore.session, "get_session", Session)
    transport.on("GET", "/prod/segments", reply(200, {"items": []}))
    result: Result = cli("--sigv4", "--url", "https://x.execute-api.ap-south-1.amazonaws.com/prod", "segments")
    assert result.exit_code == 0, result.output
    headers = transport.sent[0].headers
    assert "/ap-south-1/execute-api/aws4_request" in headers["Authorization"]
    assert "Bearer" not in headers["Authorization"]


def test_sigv4_without_credentials_says_so(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    import botocore.session

    class Session:
        def get_credentials(self) -> None:
            return None

    monkeypatch.setattr(botocore.session, "get_session", Session)
    result: Result = cli("--sigv4", "--region", "us-east-1", "list")
    assert result.exit_code == 1
    assert "no AWS credentials found" in result.stderr


def test_bearer_auth_adds_the_token_only_when_there_is_one() -> None:
    request = HttpRequest("GET", "http://x/jobs")
    assert BearerAuth("abc").sign(request).headers == {"Authorization": "Bearer abc"}
    assert BearerAuth(None).sign(request).headers == {}


@pytest.mark.parametrize(("status", "body", "message"), [
    (403, {"message": "Forbidden"}, "Forbidden"),  # API Gateway's own answer
    (502, b"<html>Bad Gateway</html>", "HTTP 502: <html>Bad Gateway</html>"),
    (503, {"error": "unavailable", "message": "a backing service is unavailable"}, "a backing service is unavailable"),
])
def test_error_bodies_of_every_shape_give_a_readable_message(status: int, body: Any, message: str) -> None:
    transport = FakeTransport()
    transport.on("GET", "/jobs", reply(status, body) if isinstance(body, dict) else _raw(status, body))
    with pytest.raises(ApiError) as caught:
        ApiClient("http://x", BearerAuth("t"), transport).list_jobs(10)
    assert (caught.value.status, caught.value.message) == (status, message)


def _raw(status: int, body: bytes) -> Any:
    from jobrunner_client.cli.client import HttpResponse

    return HttpResponse(status, body)


def test_change_patches_the_job_with_the_fields_given() -> None:
    transport = FakeTransport().on("PATCH", "/jobs/a%2Fb", reply(200, {"job_id": "a/b", "version": 2}))
    changed = ApiClient("http://api.test/", BearerAuth("t"), transport).change("a/b", {"payload": {"n": 2}})
    assert changed == {"job_id": "a/b", "version": 2}
    assert [(s.method, s.path, s.body) for s in transport.sent] == [("PATCH", "/jobs/a%2Fb", {"payload": {"n": 2}})]
