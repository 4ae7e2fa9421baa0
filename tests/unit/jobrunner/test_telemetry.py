"""jobrunner.telemetry: spans linked by traceparents, no-ops when off, and one trace per job from submit to result."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from jobrunner import telemetry, wiring
from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.invokers.memory import RecordingInvoker
from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.publishers.tracing import TracingPublisher
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.api.app import handle
from jobrunner.config import Settings
from jobrunner.entrypoints import run_results
from jobrunner.ports import ScanRequest
from jobrunner.wiring import Container
from tests.support.spans import ids, own, parent
from tests.support.worker_run import run_worker_once

if TYPE_CHECKING:
    from collections.abc import Iterator

    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def tracing_off_afterwards() -> Iterator[None]:
    yield
    telemetry.shutdown()


# -- off -------------------------------------------------------------------------------------------------


def test_without_configuration_a_span_only_carries_its_parent() -> None:
    assert not telemetry.enabled()
    with telemetry.span("work", parent=CALLER, span_id="1111111111111111", attributes={"n": 1}) as span:
        span.set_attribute("more", True)
        span.fail("ignored")
        assert span.traceparent == CALLER
        assert telemetry.current_traceparent() is None
    with telemetry.span("work") as span:
        assert span.traceparent is None


def test_tracing_off_imports_no_opentelemetry() -> None:
    # The Lambda layer does not ship OpenTelemetry: nothing on the way of a request, a scan, a worker or a
    # result may import it while tracing is off.
    code = """
import sys
from jobrunner import telemetry
from jobrunner.adapters.publishers.tracing import TracingPublisher
import jobrunner.api.app, jobrunner.entrypoints, jobrunner.wiring, jobrunner_client.worker
telemetry.configure("none")
with telemetry.span("x", parent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", span_id="1" * 16):
    telemetry.current_span().set_attribute("a", 1)
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
assert not loaded, loaded
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": f"{ROOT / 'layers'}:{ROOT / 'client'}:{ROOT}",
                               "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", ["zipkin", "jaeger", "otlp-grpc", "stdout"])
def test_an_unknown_exporter_is_refused_by_name(name: str) -> None:
    with pytest.raises(ValueError, match=f"unknown OpenTelemetry exporter '{name}'.*none, console, file, otlp"):
        telemetry.configure(name)
    assert not telemetry.enabled()


def test_the_file_exporter_needs_a_path() -> None:
    with pytest.raises(ValueError, match="needs a path"):
        telemetry.configure("file")


def test_configuring_none_turns_tracing_off(spans: InMemorySpanExporter) -> None:
    assert telemetry.enabled()
    telemetry.configure("none")
    assert not telemetry.enabled()
    with telemetry.span("work"):
        pass
    assert spans.get_finished_spans() == ()


# -- on ---------------------------------------------------------------------------------------------------


def test_a_span_is_a_child_of_its_parent_traceparent_and_names_itself(spans: InMemorySpanExporter) -> None:
    with telemetry.span("work", parent=CALLER, kind="consumer", attributes={"jobrunner.job_id": "job-1"}) as span:
        assert telemetry.current_traceparent() == span.traceparent
    [finished] = spans.get_finished_spans()
    assert (finished.name, finished.kind) == ("work", SpanKind.CONSUMER)
    assert finished.attributes == {"jobrunner.job_id": "job-1"}
    assert parent(finished) == ids(CALLER)
    assert span.traceparent is not None and ids(span.traceparent) == own(finished)
    assert span.traceparent.startswith("00-4bf92f3577b34da6a3ce929d0e0e4736-")
    assert telemetry.current_traceparent() is None


def test_a_span_id_can_be_forced_for_one_span_only(spans: InMemorySpanExporter) -> None:
    with (telemetry.span("send", parent=CALLER, span_id="b7ad6b7169203331") as forced,
          telemetry.span("inside") as inside):
        pass
    assert forced.traceparent == "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
    assert inside.traceparent is not None and ids(inside.traceparent)[1] != 0xB7AD6B7169203331
    inner, outer = spans.get_finished_spans()
    assert parent(inner) == own(outer) == ids(forced.traceparent)


def test_an_invalid_parent_starts_a_new_trace(spans: InMemorySpanExporter) -> None:
    with telemetry.span("work", parent="00-00000000000000000000000000000000-00f067aa0ba902b7-01"):
        pass
    [finished] = spans.get_finished_spans()
    assert finished.parent is None


def test_a_raising_block_and_fail_end_the_span_in_error(spans: InMemorySpanExporter) -> None:
    with pytest.raises(RuntimeError), telemetry.span("raises"):
        raise RuntimeError("boom")
    with telemetry.span("fails") as span:
        span.fail("no handler")
    with telemetry.span("succeeds"):
        pass
    statuses = {s.name: (s.status.status_code, s.status.description) for s in spans.get_finished_spans()}
    assert statuses == {"raises": (StatusCode.ERROR, "RuntimeError: boom"), "fails": (StatusCode.ERROR, "no handler"),
                        "succeeds": (StatusCode.UNSET, None)}


def test_the_file_exporter_appends_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "traces.jsonl"
    telemetry.configure("file", path=path, service_name="jobrunner-test")
    with telemetry.span("submit", parent=CALLER, kind="server") as submit, telemetry.span("store"):
        pass
    telemetry.shutdown()  # exports what the batch processor holds
    lines = path.read_text().splitlines()
    spans = [json.loads(line) for line in lines]
    assert [s["name"] for s in spans] == ["store", "submit"]
    assert submit.traceparent is not None
    _, trace_id, span_id, _ = submit.traceparent.split("-")
    store, served = spans
    assert served["context"] == {"trace_id": f"0x{trace_id}", "span_id": f"0x{span_id}", "trace_state": "[]"}
    assert served["parent_id"] == "0x00f067aa0ba902b7" and store["parent_id"] == f"0x{span_id}"
    assert served["resource"]["attributes"]["service.name"] == "jobrunner-test"


def test_the_console_exporter_writes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    telemetry.configure("console")
    with telemetry.span("work"):
        pass
    telemetry.shutdown()
    [line] = capsys.readouterr().err.splitlines()
    assert json.loads(line)["name"] == "work"


def test_the_otlp_exporter_is_configured_without_connecting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    telemetry.configure("OTLP")
    assert telemetry.enabled()
    telemetry.shutdown()  # nothing to send: returns at once


# -- one trace per job --------------------------------------------------------------------------------------


NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


@pytest.fixture
def services(monkeypatch: pytest.MonkeyPatch, spans: InMemorySpanExporter) -> Container:
    monkeypatch.setattr(wiring, "_container", None)  # restored after the test
    custom = Container(
        Settings.from_env({"JOBRUNNER_SEGMENTS": "1"}), store=MemoryJobStore(), publisher=MemoryPublisher(),
        leases=MemoryLeaseStore(), invoker=RecordingInvoker(), clock=ManualClock(NOW),
    )
    wiring.install(custom)
    return custom


def submit(traceparent: str) -> dict[str, Any]:
    event = {
        "resource": "/jobs", "path": "/jobs", "httpMethod": "POST",
        "headers": {"Content-Type": "application/json", "traceparent": traceparent}, "multiValueHeaders": {},
        "queryStringParameters": None, "multiValueQueryStringParameters": None, "pathParameters": None,
        "stageVariables": None, "isBase64Encoded": False,
        "requestContext": {"requestId": "req-1", "stage": "test", "httpMethod": "POST", "path": "/jobs",
                           "authorizer": {"principalId": "alice"}},
        "body": json.dumps({"schedule": {"at": "2026-11-22T10:00:30Z"}, "payload": {"type": "echo"}}),
    }
    response = handle(event, None)
    assert response["statusCode"] == 201, response
    body: dict[str, Any] = json.loads(response["body"])
    return body


def test_a_job_is_one_trace_from_its_request_to_its_result(services: Container, spans: InMemorySpanExporter) -> None:
    # Given a job submitted with the caller's traceparent
    job = submit(CALLER)
    # When its scan publishes it, a worker runs it and the results function applies the worker's report
    store, publisher = services.store, services.publisher
    assert isinstance(store, MemoryJobStore)
    assert isinstance(publisher, TracingPublisher) and isinstance(publisher.inner, MemoryPublisher)
    [row] = store.rows.values()
    services.scans.scan(ScanRequest(segment=row.segment, bucket=row.bucket))
    [message] = publisher.inner.sent
    headers = [(k, v.encode()) for k, v in message.headers.items()]
    result = run_worker_once(json.dumps(message.value).encode(), lambda execution: None, headers)
    record = {"topic": "job-results", "partition": 0, "offset": 0, "value": base64.b64encode(result).decode()}
    assert run_results({"records": {"job-results-0": [record]}}) == {"succeeded": 1}
    # Then the request, the publish, the run and the result are one chain of spans in the caller's trace
    by_name = {s.name: s for s in spans.get_finished_spans()}
    api, send, run, apply = (by_name[n] for n in ("POST /jobs", "send jobs", "process execution", "apply result"))
    assert parent(api) == ids(CALLER)
    assert parent(send) == own(api) and parent(run) == own(send) and parent(apply) == own(run)
    assert (api.kind, send.kind, run.kind, apply.kind) == (SpanKind.SERVER, SpanKind.PRODUCER, SpanKind.CONSUMER,
                                                            SpanKind.CONSUMER)
    assert {own(s)[0] for s in (api, send, run, apply)} == {ids(CALLER)[0]}
    # and the traceparents the system carries name those spans
    stored = store.jobs[("alice", job["job_id"])].trace_parent
    assert stored is not None and ids(stored) == own(api)
    assert ids(message.headers["traceparent"]) == own(send)
    assert ids(json.loads(result)["traceparent"]) == own(run)
    assert apply.attributes is not None and apply.attributes["jobrunner.outcome"] == "succeeded"
