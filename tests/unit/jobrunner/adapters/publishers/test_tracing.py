"""TracingPublisher: one PRODUCER span per execution message, the span the worker's span continues."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.publishers.tracing import TracingPublisher
from jobrunner.domain.tracing import child_traceparent
from jobrunner.ports import OutboundMessage, PublishError
from tests.support.spans import ids, own, parent

if TYPE_CHECKING:
    from collections.abc import Sequence

    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

JOB_TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def message(execution_id: str, trace: str | None = JOB_TRACE) -> OutboundMessage:
    """An execution message as the scan builds it (``domain/messages.py``)."""
    headers = {"execution_id": execution_id, "scheduled_at": "2026-11-22T10:10:00.000Z", "attempt": "2"}
    if trace is not None:
        headers["traceparent"] = child_traceparent(trace, execution_id)
    return OutboundMessage(topic="jobs", key="job-1", value={"execution_id": execution_id}, headers=headers,
                           parent_trace=trace)


class FailingPublisher(MemoryPublisher):
    """Acknowledges every message except those at the ``failed`` indexes."""

    def __init__(self, failed: list[int]) -> None:
        super().__init__()
        self.failed = failed

    def publish(self, messages: Sequence[OutboundMessage], timeout_s: float | None = None) -> None:
        super().publish(messages)
        raise PublishError(self.failed, "broker away")


def test_a_message_span_has_the_header_span_id_and_the_job_span_as_parent(spans: InMemorySpanExporter) -> None:
    inner = MemoryPublisher()
    sent = [message("e-1"), message("e-2")]
    TracingPublisher(inner).publish(sent)
    assert inner.sent == sent
    finished = spans.get_finished_spans()
    assert [(s.name, s.kind) for s in finished] == [("send jobs", SpanKind.PRODUCER)] * 2
    assert {own(s) for s in finished} == {ids(m.headers["traceparent"]) for m in sent}
    assert {parent(s) for s in finished} == {ids(JOB_TRACE)}
    by_execution = {s.attributes["jobrunner.execution_id"]: s for s in finished if s.attributes}
    assert dict(by_execution["e-2"].attributes or {}) == {
        "messaging.system": "kafka", "messaging.destination.name": "jobs", "jobrunner.job_id": "job-1",
        "jobrunner.execution_id": "e-2", "jobrunner.scheduled_at": "2026-11-22T10:10:00.000Z", "jobrunner.attempt": "2",
    }


def test_the_spans_end_only_once_the_inner_publish_returns(spans: InMemorySpanExporter) -> None:
    ended_during_publish: list[int] = []

    class Watching(MemoryPublisher):
        def publish(self, messages: Sequence[OutboundMessage], timeout_s: float | None = None) -> None:
            ended_during_publish.append(len(spans.get_finished_spans()))
            super().publish(messages)

    TracingPublisher(Watching()).publish([message("e-1")])
    assert ended_during_publish == [0]
    assert len(spans.get_finished_spans()) == 1


def test_unacknowledged_messages_end_in_error_and_the_error_is_raised(spans: InMemorySpanExporter) -> None:
    with pytest.raises(PublishError) as raised:
        TracingPublisher(FailingPublisher([1])).publish([message("e-1"), message("e-2"), message("e-3")])
    assert raised.value.failed == [1]
    statuses = {s.attributes["jobrunner.execution_id"]: s.status.status_code for s in spans.get_finished_spans()
                if s.attributes}
    assert statuses == {"e-1": StatusCode.UNSET, "e-2": StatusCode.ERROR, "e-3": StatusCode.UNSET}


def test_messages_without_a_trace_pass_untraced(spans: InMemorySpanExporter) -> None:
    inner = MemoryPublisher()
    no_parent = OutboundMessage(topic="jobs", key="job-1", value={}, headers=message("e-1").headers)
    TracingPublisher(inner).publish([message("e-2", trace=None), no_parent])
    assert len(inner.sent) == 2
    assert spans.get_finished_spans() == ()


def test_without_tracing_messages_are_only_passed_on() -> None:
    inner = MemoryPublisher()
    TracingPublisher(inner).publish([message("e-1")])
    assert inner.sent == [message("e-1")]


def test_closing_closes_the_inner_publisher() -> None:
    closed: list[bool] = []

    class Closing(MemoryPublisher):
        def close(self) -> None:
            closed.append(True)

    TracingPublisher(Closing()).close()
    assert closed == [True]
