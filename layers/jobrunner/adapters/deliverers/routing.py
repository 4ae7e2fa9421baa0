"""The Deliverer the delivery function uses: each call to the deliverer of its target's kind, built on first use."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from jobrunner.domain.targets import HttpsTarget, LambdaTarget, SqsTarget
from jobrunner.ports import Deliverer, DeliveryCall, DeliveryResult

if TYPE_CHECKING:
    from collections.abc import Callable


class RoutingDeliverer(Deliverer):
    """Sends an HTTPS call to ``https()``'s deliverer, a Lambda call to ``lambda_()``'s, an SQS call to ``sqs()``'s;
    each factory is called once, on the first call of its kind (calls of a batch come from several threads)."""

    def __init__(self, *, https: Callable[[], Deliverer], lambda_: Callable[[], Deliverer],
                 sqs: Callable[[], Deliverer]) -> None:
        self._lock = threading.Lock()
        self._factories: dict[type, Callable[[], Deliverer]] = {HttpsTarget: https, LambdaTarget: lambda_,
                                                                 SqsTarget: sqs}
        self._built: dict[type, Deliverer] = {}

    def deliver(self, call: DeliveryCall) -> DeliveryResult:
        return self._of(type(call.target)).deliver(call)

    def _of(self, kind: type) -> Deliverer:
        if kind not in self._factories:
            raise TypeError(f"no deliverer for {kind.__name__}")
        with self._lock:
            if kind not in self._built:
                self._built[kind] = self._factories[kind]()
            return self._built[kind]
