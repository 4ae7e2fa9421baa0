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

    Contract: ``publish`` returns only when every message is acknowledged by the broker (acks=all);
    otherwise it raises ``PublishError`` naming the unacknowledged ones, which the caller must treat
    as not published (they may still have been written: at-least-once). It returns or raises within
    about ``timeout_s`` (the publisher's own bound when None), and once it has, none of its messages is
    still queued or retried by the publisher: each was acknowledged or has definitively failed (a
    request already on the wire may still be applied, as for any at-least-once send). A scan relies on
    this to stop publishing before its lease can lapse.
    """

    @abstractmethod
    def publish(self, messages: Sequence[OutboundMessage], timeout_s: float | None = None) -> None: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections (flushes first)."""
