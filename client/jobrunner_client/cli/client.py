"""The HTTP API from the CLI: one small transport (injected, so tests use a fake), bearer or SigV4 auth,
and errors that carry the server's own message."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field, replace
from typing import Any, Protocol
from urllib.parse import quote, urlencode

USER_AGENT = "jobrunner-cli/1"


@dataclass(frozen=True)
class HttpRequest:
    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None


@dataclass(frozen=True)
class HttpResponse:
    status: int
    body: bytes = b""


class Transport(Protocol):
    def send(self, request: HttpRequest) -> HttpResponse:
        """Send one request. Any HTTP status is a response; only a failure to talk at all raises
        ``CannotConnect``."""
        ...


class Auth(Protocol):
    def sign(self, request: HttpRequest) -> HttpRequest: ...


class CannotConnect(Exception):
    """The API could not be reached (refused, unknown host, timed out)."""


class ApiError(Exception):
    """The API answered with an error; ``message`` is the server's, ``errors`` its per-field details."""

    def __init__(self, status: int, error: str, message: str, errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.errors = errors or []

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "error": self.error, "message": self.message, "errors": self.errors}


class UrllibTransport:
    """The standard library's HTTP client: no dependency beyond Python itself."""

    def __init__(self, timeout_s: float = 30.0) -> None:
        self._timeout_s = timeout_s

    def send(self, request: HttpRequest) -> HttpResponse:
        outgoing = urllib.request.Request(request.url, data=request.body, headers=request.headers,
                                          method=request.method)
        try:
            with urllib.request.urlopen(outgoing, timeout=self._timeout_s) as response:
                return HttpResponse(status=response.status, body=response.read())
        except urllib.error.HTTPError as exc:
            try:
                return HttpResponse(status=exc.code, body=exc.read() if exc.fp is not None else b"")
            finally:
                exc.close()
        except urllib.error.URLError as exc:
            raise CannotConnect(str(exc.reason)) from exc
        except TimeoutError as exc:
            raise CannotConnect(f"no answer within {self._timeout_s:g} s") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise CannotConnect(str(exc) or type(exc).__name__) from exc


class BearerAuth:
    """``Authorization: Bearer <token>`` (the local stack; a Cognito token in AWS)."""

    def __init__(self, token: str | None) -> None:
        self._token = token

    def sign(self, request: HttpRequest) -> HttpRequest:
        if not self._token:
            return request  # the API answers 401, and the CLI says where a token comes from
        return replace(request, headers={**request.headers, "Authorization": f"Bearer {self._token}"})


class SigV4Auth:
    """AWS Signature Version 4 for API Gateway (service ``execute-api``), with the default credential chain:
    environment, shared config and credentials files, SSO, container or instance role."""

    def __init__(self, region: str, credentials: Any = None) -> None:
        self._region = region
        self._credentials = credentials

    def _frozen_credentials(self) -> Any:
        if self._credentials is None:
            try:
                import botocore.session
            except ImportError:
                raise ApiError(0, "no_botocore",
                               "--sigv4 needs botocore: pip install 'jobrunner-client[aws]'") from None

            self._credentials = botocore.session.get_session().get_credentials()
        if self._credentials is None:
            raise ApiError(0, "no_credentials", "--sigv4: no AWS credentials found (set AWS_PROFILE, or "
                                                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or use an SSO login)")
        return self._credentials.get_frozen_credentials()

    def sign(self, request: HttpRequest) -> HttpRequest:
        from botocore.auth import SigV4Auth as Signer
        from botocore.awsrequest import AWSRequest

        aws = AWSRequest(method=request.method, url=request.url, data=request.body or b"",
                         headers=dict(request.headers))
        Signer(self._frozen_credentials(), "execute-api", self._region).add_auth(aws)
        return replace(request, headers={str(k): str(v) for k, v in aws.headers.items()})


@dataclass(frozen=True)
class Answer:
    status: int
    data: Any


class ApiClient:
    def __init__(self, base_url: str, auth: Auth, transport: Transport) -> None:
        self._base = base_url.rstrip("/")
        self._auth = auth
        self._transport = transport

    def call(self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None) -> Answer:
        params = {k: v for k, v in (query or {}).items() if v is not None}
        url = self._base + path + (f"?{urlencode(params)}" if params else "")
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode("utf-8")
            headers["Content-Type"] = "application/json"
        response = self._transport.send(self._auth.sign(HttpRequest(method, url, headers, data)))
        try:
            parsed = json.loads(response.body) if response.body else None
        except ValueError:
            parsed = None
        if response.status >= 400:
            raise _error(response, parsed)
        if parsed is None and response.body:
            raise ApiError(response.status, "bad_response", f"the API answered {response.status} without JSON: "
                                                            f"{response.body[:200]!r}")
        return Answer(response.status, parsed)

    # --- the routes ---------------------------------------------------------------------------------

    def submit(self, body: dict[str, Any]) -> Answer:
        """201 with the new job, or 200 with the job an earlier request with the same idempotency_key made."""
        return self.call("POST", "/jobs", body)

    def list_jobs(self, limit: int, cursor: str | None = None, status: str | None = None, kind: str | None = None,
                  tag: str | None = None) -> dict[str, Any]:
        data: dict[str, Any] = self.call("GET", "/jobs", query={"limit": limit, "cursor": cursor, "status": status,
                                                                "kind": kind, "tag": tag}).data
        return data

    def bulk(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /jobs/bulk``: one page of the jobs a tag selects paused, resumed or cancelled."""
        data: dict[str, Any] = self.call("POST", "/jobs/bulk", body).data
        return data

    def job(self, job_id: str, preview: int = 0) -> dict[str, Any]:
        data: dict[str, Any] = self.call("GET", f"/jobs/{_id(job_id)}", query={"preview": preview or None}).data
        return data

    def change(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """``PATCH /jobs/{id}``: the fields given replaced; the job as it now stands."""
        data: dict[str, Any] = self.call("PATCH", f"/jobs/{_id(job_id)}", body).data
        return data

    def cancel(self, job_id: str) -> dict[str, Any]:
        data: dict[str, Any] = self.call("DELETE", f"/jobs/{_id(job_id)}").data
        return data

    def pause(self, job_id: str) -> dict[str, Any]:
        data: dict[str, Any] = self.call("POST", f"/jobs/{_id(job_id)}/pause").data
        return data

    def resume(self, job_id: str, catch_up: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = self.call("POST", f"/jobs/{_id(job_id)}/resume",
                                         {"catch_up": True} if catch_up else None).data
        return data

    def run(self, job_id: str) -> dict[str, Any]:
        data: dict[str, Any] = self.call("POST", f"/jobs/{_id(job_id)}/run").data
        return data

    def changes(self, job_id: str, limit: int, cursor: str | None = None) -> dict[str, Any]:
        data: dict[str, Any] = self.call("GET", f"/jobs/{_id(job_id)}/changes",
                                         query={"limit": limit, "cursor": cursor}).data
        return data

    def put_calendar(self, name: str, body: dict[str, Any]) -> Answer:
        return self.call("PUT", f"/calendars/{_id(name)}", body)

    def calendar(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = self.call("GET", f"/calendars/{_id(name)}").data
        return data

    def calendars(self, limit: int, cursor: str | None = None) -> dict[str, Any]:
        data: dict[str, Any] = self.call("GET", "/calendars", query={"limit": limit, "cursor": cursor}).data
        return data

    def delete_calendar(self, name: str) -> None:
        self.call("DELETE", f"/calendars/{_id(name)}")

    def fires(self, job_id: str, start: str, end: str, limit: int, cursor: str | None = None) -> dict[str, Any]:
        data: dict[str, Any] = self.call("GET", f"/jobs/{_id(job_id)}/fires",
                                         query={"from": start, "to": end, "limit": limit, "cursor": cursor}).data
        return data

    def backfill(self, job_id: str, start: str, end: str, dry_run: bool) -> dict[str, Any]:
        data: dict[str, Any] = self.call("POST", f"/jobs/{_id(job_id)}/backfill",
                                         {"from": start, "to": end, "dry_run": dry_run}).data
        return data

    def executions(self, job_id: str, limit: int, cursor: str | None = None) -> dict[str, Any]:
        data: dict[str, Any] = self.call("GET", f"/jobs/{_id(job_id)}/executions",
                                         query={"limit": limit, "cursor": cursor}).data
        return data

    def segments(self) -> dict[str, Any]:
        data: dict[str, Any] = self.call("GET", "/segments").data
        return data

    def webhook_secrets(self) -> dict[str, Any]:
        data: dict[str, Any] = self.call("GET", "/webhook-secrets").data
        return data

    def rotate_webhook_secret(self, grace_s: int | None = None) -> dict[str, Any]:
        body = {} if grace_s is None else {"grace_s": grace_s}
        data: dict[str, Any] = self.call("POST", "/webhook-secrets/rotate", body).data
        return data

    def end_webhook_secret_rotation(self) -> dict[str, Any]:
        data: dict[str, Any] = self.call("DELETE", "/webhook-secrets/previous").data
        return data


def _id(job_id: str) -> str:
    return quote(job_id, safe="")


def _error(response: HttpResponse, parsed: Any) -> ApiError:
    if isinstance(parsed, dict) and "message" in parsed:
        errors = parsed.get("errors") if isinstance(parsed.get("errors"), list) else []
        return ApiError(response.status, str(parsed.get("error", "error")), str(parsed["message"]), errors)
    if isinstance(parsed, dict) and "message" in {k.lower() for k in parsed}:  # API Gateway's own {"Message": ...}
        message = next(str(v) for k, v in parsed.items() if k.lower() == "message")
        return ApiError(response.status, "gateway", message)
    text = response.body[:200].decode("utf-8", errors="replace").strip()
    return ApiError(response.status, "http_error", f"HTTP {response.status}" + (f": {text}" if text else ""))
