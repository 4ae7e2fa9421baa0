"""Reading spans in tests: traceparents as (trace id, span id) pairs, to compare with the exported spans."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan


def ids(traceparent: str) -> tuple[int, int]:
    """(trace id, span id) named by a W3C traceparent."""
    _, trace_id, span_id, _ = traceparent.split("-")
    return int(trace_id, 16), int(span_id, 16)


def own(span: ReadableSpan) -> tuple[int, int]:
    """(trace id, span id) of ``span`` itself."""
    assert span.context is not None
    return span.context.trace_id, span.context.span_id


def parent(span: ReadableSpan) -> tuple[int, int] | None:
    """(trace id, span id) of ``span``'s parent, None for a root span."""
    return None if span.parent is None else (span.parent.trace_id, span.parent.span_id)
