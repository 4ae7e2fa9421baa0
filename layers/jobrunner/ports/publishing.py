"""The publishing port: the message bus, and the messages it carries."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence


@dataclass(frozen=True)
class OutboundMessage:
    topic: str
    key: str
    value: dict[str, Any]
    headers: dict[str, str]
    #: The traceparent of the span this message's own ``traceparent`` header descends from (the job's),
    #: for a tracing publisher to link the two; never sent.
    parent_trace: str | None = None


class PublishError(Exception):
    """Some messages were not acknowledged; ``failed`` holds their indexes in the published batch, and
    ``rejected`` those of them the broker refused for good (a record it will never take: too large for
    its topic, not authorized, a topic the cluster does not have), as opposed to ones that timed out or
    were not sent."""

    def __init__(self, failed: Sequence[int], cause: str, rejected: Sequence[int] = ()) -> None:
        super().__init__(f"{len(failed)} message(s) not acknowledged: {cause}")
        self.failed = list(failed)
        self.rejected = sorted(set(rejected) & set(self.failed))


class Publisher(ABC):
    """The message bus (Kafka / MSK in production).

    Contract:
    - ``publish(messages, timeout_s)`` sends each message to its ``topic`` with its ``key``, its ``value`` (a JSON
      object: a consumer reads back an equal one) and its ``headers``; ``parent_trace`` is not sent.
    - It returns only when every message is acknowledged by the broker (acks=all). Otherwise it raises
      ``PublishError``: ``failed`` names the unacknowledged ones, which the caller must treat as not published
      (they may still have been written: at-least-once); every message it does not name was acknowledged.
      ``rejected`` names those of them refused for good (too large for their topic, not authorized, a topic the
      cluster does not have), which are not written; the others timed out or were not sent, and may go through
      when published again. A refusal may fail other messages of its call too (Kafka's idempotent producer
      fails the records after it), so a caller blames a message only once it is refused alone; it does not
      affect later calls. A broker that cannot be reached fails every message, none of them ``rejected``.
      Nothing else is raised for a failure of the bus.
    - Messages of one topic and key are delivered in the order they were published: in a call's order, and a
      call's after those of the calls that returned before it.
    - It returns or raises within about ``timeout_s`` (the publisher's own bound when None), also when it must
      first connect; and once it has, none of its messages is still queued or retried by the publisher: each
      was acknowledged or has definitively failed (a request already on the wire may still be applied, as for
      any at-least-once send). A scan relies on this to stop publishing before its lease can lapse.
    - ``close`` releases the connections, once what is in flight is settled; closing again is harmless, and a
      publish after it connects again.
    """

    @abstractmethod
    def publish(self, messages: Sequence[OutboundMessage], timeout_s: float | None = None) -> None: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections (flushes first)."""
