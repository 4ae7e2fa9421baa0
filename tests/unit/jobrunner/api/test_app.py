"""The HTTP API through its Lambda entry point, with API Gateway REST proxy events and memory adapters."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from jobrunner import wiring
from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.invokers.memory import RecordingInvoker
from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.api.app import handle
from jobrunner.config import Settings
from jobrunner.wiring import Container
from tests.support.spans import ids, own, parent

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def event(method: str, path: str, body: Any = None, tenant: str | None = "alice") -> dict[str, Any]:
    """An API Gateway REST (v1) proxy event; a str body is sent as is, anything else as JSON."""
    context: dict[str, Any] = {"requestId": "req-1", "stage": "test", "httpMethod": method, "path": path}
    if tenant is not None:
        context["authorizer"] = {"principalId": tenant}
    return {
        "resource": path, "path": path, "httpMethod": method,
        "headers": {"Content-Type": "application/json"}, "multiValueHeaders": {},
        "queryStringParameters": None, "multiValueQueryStringParameters": None,
        "pathParameters": None, "stageVariables": None, "requestContext": context,
        "body": body if body is None or isinstance(body, str) else json.dumps(body), "isBase64Encoded": False,
    }


def call(method: str, path: str, body: Any = None, tenant: str | None = "alice") -> tuple[int, dict[str, Any]]:
    response = handle(event(method, path, body, tenant), None)
    return int(response["statusCode"]), json.loads(response["body"])


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> MemoryJobStore:
    store = MemoryJobStore()
    monkeypatch.setattr(wiring, "_container", None)  # restored after the test
    wiring.install(Container(
        Settings.from_env({"JOBRUNNER_SEGMENTS": "4", "JOBRUNNER_MAX_PAYLOAD_BYTES": "1000"}),
        store=store, publisher=MemoryPublisher(), leases=MemoryLeaseStore(), invoker=RecordingInvoker(),
        clock=ManualClock(NOW),
    ))
    return store


def test_submit_answers_201_with_the_job(store: MemoryJobStore) -> None:
    status, body = call("POST", "/jobs", {"schedule": {"every": "PT5M"}, "payload": {"n": 1}})
    assert status == 201
    assert (body["status"], body["next_run_at"]) == ("SCHEDULED", "2026-11-22T10:05:00.000Z")
    assert set(store.jobs) == {("alice", body["job_id"])}
    assert [r.job_id for r in store.rows.values()] == [body["job_id"]]


def test_get_returns_the_submitted_job(store: MemoryJobStore) -> None:
    _, created = call("POST", "/jobs", {"schedule": {"at": "2026-11-22T11:00:00+01:00"}})
    status, body = call("GET", f"/jobs/{created['job_id']}")
    assert status == 200
    assert body == created
    assert body["schedule"] == {"at": "2026-11-22T10:00:00.000Z"}


def test_another_tenants_job_is_not_found(store: MemoryJobStore) -> None:
    _, created = call("POST", "/jobs", {"schedule": {"every": "PT5M"}})
    status, body = call("GET", f"/jobs/{created['job_id']}", tenant="mallory")
    assert (status, body["error"]) == (404, "not_found")
    status, _ = call("GET", f"/jobs/{created['job_id']}/executions", tenant="mallory")
    assert status == 404


def test_get_without_tenant_is_401(store: MemoryJobStore) -> None:
    _, created = call("POST", "/jobs", {"schedule": {"every": "PT5M"}})
    status, body = call("GET", f"/jobs/{created['job_id']}", tenant=None)
    assert (status, body["error"]) == (401, "unauthenticated")


@pytest.mark.parametrize(
    ("body", "tenant", "status", "field"),
    [
        ({"schedule": {"every": "PT5M"}}, None, 401, None),
        ('{"schedule": {"every": "PT5M"}', "alice", 400, "body"),
        ({"schedule": {"every": "PT5M"}, "colour": "red"}, "alice", 422, "colour"),
        ({"schedule": {"every": "PT5M", "colour": "red"}}, "alice", 422, "schedule.colour"),
        ({"schedule": {"every": "5 minutes"}}, "alice", 422, "schedule.every"),
        ({"schedule": {"every": "PT5S"}}, "alice", 422, "schedule.every"),
        ({"payload": {"n": 1}}, "alice", 422, "schedule"),
        ({"schedule": {}}, "alice", 422, "schedule"),
        ({"schedule": {"at": "2026-11-22T10:30:00"}}, "alice", 422, "schedule.at"),
        ({"schedule": {"at": "2026-11-22T09:00:00Z"}}, "alice", 422, "schedule.at"),
        ({"schedule": {"every": "PT5M"}, "topic": "payroll"}, "alice", 422, "topic"),
        ({"schedule": {"every": "PT5M"}, "payload": "x" * 1000}, "alice", 422, "payload"),
        ({"schedule": {"every": "PT5M"}, "max_retries": -1}, "alice", 422, "max_retries"),
    ],
    ids=[
        "no-tenant", "malformed-json", "unknown-field", "unknown-schedule-field", "bad-duration", "short-interval",
        "missing-schedule", "empty-schedule", "at-without-offset", "at-in-past", "topic", "payload-too-large",
        "negative-retries",
    ],
)
def test_bad_request_names_the_field_and_writes_nothing(
    store: MemoryJobStore, body: Any, tenant: str | None, status: int, field: str | None
) -> None:
    got, answer = call("POST", "/jobs", body, tenant)
    assert got == status
    if field is not None:
        assert field in [e["field"] for e in answer["errors"]]
    assert store.jobs == {} and store.rows == {}


def test_health_needs_no_tenant(store: MemoryJobStore) -> None:
    assert call("GET", "/health", tenant=None) == (200, {"status": "ok"})


# -- tracing ------------------------------------------------------------------------------------------------

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def traced_call(method: str, path: str, body: Any = None, traceparent: str | None = CALLER) -> dict[str, Any]:
    request = event(method, path, body)
    if traceparent is not None:
        request["headers"]["traceparent"] = traceparent
    answer: dict[str, Any] = json.loads(handle(request, None)["body"])
    return answer


def test_without_tracing_the_job_keeps_the_callers_traceparent(store: MemoryJobStore) -> None:
    created = traced_call("POST", "/jobs", {"schedule": {"every": "PT5M"}})
    assert store.jobs[("alice", created["job_id"])].trace_parent == CALLER


def test_a_request_is_a_server_span_under_the_callers_and_the_job_keeps_it(
    store: MemoryJobStore, spans: InMemorySpanExporter
) -> None:
    created = traced_call("POST", "/jobs", {"schedule": {"every": "PT5M"}})
    [span] = spans.get_finished_spans()
    assert (span.name, span.kind, parent(span)) == ("POST /jobs", SpanKind.SERVER, ids(CALLER))
    assert dict(span.attributes or {}) == {
        "http.request.method": "POST", "http.route": "/jobs", "url.path": "/jobs", "http.response.status_code": 201,
        "jobrunner.tenant": "alice", "jobrunner.job_id": created["job_id"],
    }
    stored = store.jobs[("alice", created["job_id"])].trace_parent
    assert stored is not None and ids(stored) == own(span)


def test_without_a_callers_traceparent_the_request_span_starts_the_jobs_trace(
    store: MemoryJobStore, spans: InMemorySpanExporter
) -> None:
    created = traced_call("POST", "/jobs", {"schedule": {"every": "PT5M"}}, traceparent=None)
    [span] = spans.get_finished_spans()
    stored = store.jobs[("alice", created["job_id"])].trace_parent
    assert span.parent is None and stored is not None and ids(stored) == own(span)


def test_a_span_is_named_by_its_route_and_carries_the_status(
    store: MemoryJobStore, spans: InMemorySpanExporter
) -> None:
    traced_call("GET", "/jobs/nope/executions")
    traced_call("GET", "/nowhere")
    found, missing = spans.get_finished_spans()
    assert (found.name, missing.name) == ("GET /jobs/<job_id>/executions", "GET")
    assert found.attributes is not None and found.attributes["jobrunner.job_id"] == "nope"
    assert found.attributes["http.response.status_code"] == 404
    assert missing.attributes is not None and "http.route" not in missing.attributes
    assert {s.status.status_code for s in (found, missing)} == {StatusCode.UNSET}


@pytest.mark.parametrize(("method", "path", "body", "tenant", "status"), [
    ("POST", "/jobs", {"schedule": {"every": "PT5M"}, "payload": {}}, "alice", 201),  # a route's answer
    ("GET", "/jobs/nope", None, "alice", 404),                                     # the resolver's refusal
    ("POST", "/jobs", "{not json", "alice", 400),                                   # the body limits' refusal
    ("GET", "/jobs", None, None, 401),                                              # no tenant
    ("GET", "/health", None, None, 200),                                            # a public path
])
def test_every_response_sends_hsts(store: MemoryJobStore, method: str, path: str, body: Any, tenant: str | None,
                                   status: int) -> None:
    response = handle(event(method, path, body, tenant), None)

    assert response["statusCode"] == status
    assert response["headers"]["Strict-Transport-Security"] == "max-age=31536000"
