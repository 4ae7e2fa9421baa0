"""A Deliverer that records each call and answers as scripted: tests of the delivery service."""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING

from jobrunner.domain.targets import HttpsTarget, LambdaTarget
from jobrunner.ports import Answered, Deliverer, DeliveryCall, DeliveryResult, Invoked, Sent

if TYPE_CHECKING:
    from collections.abc import Callable

    from jobrunner.domain.targets import Target


def address_of(target: Target) -> str:
    """What a target is called at: its URL, function ARN or queue URL."""
    if isinstance(target, HttpsTarget):
        return target.url
    if isinstance(target, LambdaTarget):
        return target.function_arn
    return target.queue_url


class MemoryDeliverer(Deliverer):
    """Answers each call with the next result scripted for its target's address (``script``), else with success
    (200, a function that returned, a message taken). ``before`` (if set) runs first with the call, in the
    calling thread: a test holds a call there."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[DeliveryCall] = []
        self._scripted: dict[str, deque[DeliveryResult]] = {}
        self.before: Callable[[DeliveryCall], None] | None = None

    def script(self, address: str, *results: DeliveryResult) -> None:
        """Answer the next calls of ``address`` with ``results``, one each, in order."""
        with self._lock:
            self._scripted.setdefault(address, deque()).extend(results)

    def deliver(self, call: DeliveryCall) -> DeliveryResult:
        if self.before is not None:
            self.before(call)
        with self._lock:
            self.calls.append(call)
            scripted = self._scripted.get(address_of(call.target))
            if scripted:
                return scripted.popleft()
        if isinstance(call.target, HttpsTarget):
            return Answered(200)
        return Invoked() if isinstance(call.target, LambdaTarget) else Sent()
