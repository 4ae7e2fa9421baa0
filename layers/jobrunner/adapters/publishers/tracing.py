"""A Publisher that wraps another with one PRODUCER span per execution message (when tracing is on).

Each span has the span id of the message's ``traceparent`` header and the job's span
(``OutboundMessage.parent_trace``) as parent, so the worker's span, a child of the header, hangs under
it in the job's trace. A span starts before the inner publish and ends when it returns; the messages
it names as not acknowledged end in ERROR. Messages without both traceparents pass untraced.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from jobrunner import telemetry
from jobrunner.domain.tracing import parse_traceparent
from jobrunner.ports import Publisher, PublishError
from jobrunner_client.protocol import TRACEPARENT_HEADER

if TYPE_CHECKING:
    from collections.abc import Sequence

    from jobrunner.ports import OutboundMessage


class TracingPublisher(Publisher):
    def __init__(self, inner: Publisher) -> None:
        self.inner = inner

    def publish(self, messages: Sequence[OutboundMessage], timeout_s: float | None = None) -> None:
        error: PublishError | None = None
        with contextlib.ExitStack() as spans:
            started = {index: spans.enter_context(_span(message)) for index, message in enumerate(messages)
                       if _traced(message)}
            try:
                self.inner.publish(messages, timeout_s=timeout_s)
            except PublishError as exc:
                # Raised once the spans are ended, so that only the failed ones are marked.
                error = exc
                for index in exc.failed:
                    if index in started:
                        started[index].fail(str(exc))
        if error is not None:
            raise error

    def close(self) -> None:
        self.inner.close()


def _traced(message: OutboundMessage) -> bool:
    return message.parent_trace is not None and parse_traceparent(message.headers.get(TRACEPARENT_HEADER)) is not None


def _span(message: OutboundMessage) -> contextlib.AbstractContextManager[telemetry.Span]:
    header = str(parse_traceparent(message.headers[TRACEPARENT_HEADER]))
    attributes: dict[str, telemetry.AttributeValue] = {
        "messaging.system": "kafka", "messaging.destination.name": message.topic, "jobrunner.job_id": message.key,
        **{f"jobrunner.{k}": v for k, v in message.headers.items() if k in ("execution_id", "scheduled_at", "attempt")},
    }
    return telemetry.span(f"send {message.topic}", parent=message.parent_trace, span_id=header.split("-")[2],
                          kind="producer", attributes=attributes)
