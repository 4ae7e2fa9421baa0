"""OpenTelemetry spans of a job's one trace, from ``POST /jobs`` to the applied result (an option of the local stack).

Off by default, and in AWS, where Powertools Tracer (X-Ray) traces the functions: then every helper here
is a no-op and OpenTelemetry is never imported, so the Lambda layer does not ship it. ``configure`` turns
it on for this process; the local stack reads ``JOBRUNNER_OTEL_EXPORTER`` (``config.py``) and calls it.

The spans are tied together by the W3C ``traceparent`` strings the system already carries: the job keeps
its api span's, each execution message carries a child of it whose span id is derived from the
execution id (``domain/tracing.py``), and the worker reports its own span's with the result. The
producer span of a message is given that very span id (``span(..., span_id=...)``), so the worker's
span, a child of the header, is a child of the producer span.

The tracer provider is kept here rather than installed as OpenTelemetry's global one, which can be
set only once per process: tests reconfigure it freely, and an application's own global provider
(a worker's) is left alone.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

from jobrunner.domain.tracing import parse_traceparent

if TYPE_CHECKING:
    import os
    from collections.abc import Iterator, Mapping

    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span as OtelSpan
    from opentelemetry.trace import SpanContext, Tracer

EXPORTERS = ("none", "console", "file", "otlp")
Kind = Literal["internal", "server", "client", "producer", "consumer"]
AttributeValue = str | bool | int | float

#: The span id the next span started in this context must have (read by the provider's id generator).
_forced_span_id: contextvars.ContextVar[int | None] = contextvars.ContextVar("jobrunner_span_id", default=None)


@dataclass
class _Tracing:
    provider: TracerProvider
    tracer: Tracer
    #: A file the exporter writes to, closed after the provider is shut down.
    file: IO[str] | None = None


_tracing: _Tracing | None = None


class Span:
    """The span in hand: its traceparent, attributes and failure. Without tracing it only carries the parent."""

    def __init__(self, traceparent: str | None, span: OtelSpan | None = None) -> None:
        self.traceparent = traceparent
        self._span = span

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        if self._span is not None:
            self._span.set_attribute(key, value)

    def fail(self, description: str | None) -> None:
        """Mark the span failed (ERROR status) without an exception."""
        if self._span is not None:
            from opentelemetry.trace import Status, StatusCode

            self._span.set_status(Status(StatusCode.ERROR, description))


def enabled() -> bool:
    return _tracing is not None


def configure(
    exporter: str, *, service_name: str = "jobrunner", path: str | os.PathLike[str] | None = None,
    endpoint: str | None = None,
) -> None:
    """Export this process's spans: ``none`` (off), ``console`` (stderr), ``file`` (JSON lines appended
    to ``path``) or ``otlp`` (OTLP over HTTP to ``endpoint``, default ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
    the collector on localhost:4318). Replaces any earlier configuration."""
    name = (exporter or "none").strip().lower()
    if name not in EXPORTERS:
        raise ValueError(f"unknown OpenTelemetry exporter {exporter!r}: use one of {', '.join(EXPORTERS)}")
    if name == "file" and path is None:
        raise ValueError("the file exporter needs a path")
    shutdown()
    if name == "none":
        return
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    file = None
    span_exporter: SpanExporter
    if name == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        span_exporter = OTLPSpanExporter(endpoint=endpoint)
    elif name == "file":
        assert path is not None
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by shutdown()
        span_exporter = ConsoleSpanExporter(out=file, formatter=_json_line)
    else:
        span_exporter = ConsoleSpanExporter(out=sys.stderr, formatter=_json_line)
    _install(BatchSpanProcessor(span_exporter), service_name, file)


def configure_exporter(exporter: SpanExporter, *, service_name: str = "jobrunner") -> None:
    """Export this process's spans to ``exporter`` as each one ends (tests: ``InMemorySpanExporter``)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    shutdown()
    _install(SimpleSpanProcessor(exporter), service_name)


def shutdown() -> None:
    """Export what is pending and turn tracing off (also done at exit)."""
    global _tracing
    tracing, _tracing = _tracing, None
    if tracing is not None:
        tracing.provider.shutdown()
        if tracing.file is not None:
            tracing.file.close()


def _install(processor: SpanProcessor, service_name: str, file: IO[str] | None = None) -> None:
    global _tracing
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class SpanIds(RandomIdGenerator):
        """Random ids, except the span id a caller of ``span(span_id=...)`` asked for."""

        def generate_span_id(self) -> int:
            return _forced_span_id.get() or super().generate_span_id()

    provider = TracerProvider(resource=Resource.create({"service.name": service_name}), id_generator=SpanIds())
    provider.add_span_processor(processor)
    _tracing = _Tracing(provider, provider.get_tracer("jobrunner"), file)


@contextlib.contextmanager
def span(
    name: str, *, parent: str | None = None, span_id: str | None = None, kind: Kind = "internal",
    attributes: Mapping[str, AttributeValue] | None = None,
) -> Iterator[Span]:
    """A span, current while the block runs, ended (ERROR if the block raises) when it leaves.

    ``parent`` is a traceparent (ignored unless valid; without it the span is a child of the current
    one, if any); ``span_id`` (16 hex digits) forces the new span's id. Without tracing: yields a
    ``Span`` carrying ``parent`` and does nothing else.
    """
    tracing = _tracing
    if tracing is None:
        yield Span(parent)
        return
    from opentelemetry import trace
    from opentelemetry.context import Context

    context = None  # the current one: a child of the current span, if any
    parent_context = _span_context(parent)
    if parent_context is not None:
        context = trace.set_span_in_context(trace.NonRecordingSpan(parent_context), Context())
    token = _forced_span_id.set(int(span_id, 16) if span_id else None)
    try:
        started = tracing.tracer.start_span(name, context=context, kind=trace.SpanKind[kind.upper()],
                                            attributes=attributes)
    finally:
        _forced_span_id.reset(token)
    with trace.use_span(started, end_on_exit=True):
        yield Span(_traceparent(started.get_span_context()), started)


def current_span() -> Span:
    """The current span (a no-op ``Span`` without tracing or outside any span)."""
    if _tracing is None:
        return Span(None)
    from opentelemetry import trace

    current = trace.get_current_span()
    context = current.get_span_context()
    return Span(_traceparent(context), current) if context.is_valid else Span(None)


def current_traceparent() -> str | None:
    return current_span().traceparent


def _span_context(traceparent: str | None) -> SpanContext | None:
    from opentelemetry.trace import SpanContext, TraceFlags

    valid = parse_traceparent(traceparent)
    if valid is None:
        return None
    _, trace_id, span_id, flags = valid.split("-")
    return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16)))


def _json_line(span: ReadableSpan) -> str:
    return f"{span.to_json(indent=None)}\n"


def _traceparent(context: SpanContext) -> str:
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
