"""An in-memory Publisher that records what it was given; it can be told to fail."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from jobrunner.ports import OutboundMessage, Publisher, PublishError

if TYPE_CHECKING:
    from collections.abc import Sequence


class MemoryPublisher(Publisher):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent: list[OutboundMessage] = []
        #: Number of upcoming publish calls that fail entirely (fault injection for tests).
        self.fail_next = 0
        #: Topics every message to which fails (a topic deleted or no longer writable).
        self.broken_topics: set[str] = set()

    def publish(self, messages: Sequence[OutboundMessage], timeout_s: float | None = None) -> None:
        with self._lock:
            if self.fail_next > 0:
                self.fail_next -= 1
                raise PublishError(range(len(messages)), "injected failure")
            failed = [i for i, message in enumerate(messages) if message.topic in self.broken_topics]
            self.sent.extend(m for i, m in enumerate(messages) if i not in failed)
            if failed:
                raise PublishError(failed, "TopicAuthorizationFailedError: the topic is not writable", rejected=failed)
