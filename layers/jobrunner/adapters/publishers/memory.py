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

    def publish(self, messages: Sequence[OutboundMessage]) -> None:
        with self._lock:
            if self.fail_next > 0:
                self.fail_next -= 1
                raise PublishError(range(len(messages)), "injected failure")
            self.sent.extend(messages)
