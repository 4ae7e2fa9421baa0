"""The Deliverer the delivery function uses: each call to the deliverer of its target's kind, built on first use,
in a CLIENT span that continues the execution's trace (when tracing is on, ``jobrunner.telemetry``)."""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING

from jobrunner import telemetry
from jobrunner.domain.targets import HttpsTarget, LambdaTarget, SqsTarget
from jobrunner.ports import Answered, Deliverer, DeliveryCall, DeliveryResult, Invoked, Sent
from jobrunner_client.protocol import TRACEPARENT_HEADER

if TYPE_CHECKING:
    from collections.abc import Callable


#: The name of each kind of target, in span names.
KINDS: dict[type, str] = {HttpsTarget: "https", LambdaTarget: "lambda", SqsTarget: "sqs"}


def succeeded(result: DeliveryResult) -> bool:
    """Whether the target took the call (the span's status; the outcome rules are the service's)."""
    match result:
        case Answered(status=status):
            return 200 <= status < 300
        case Invoked(function_error=error):
            return error is None
        case Sent():
            return True
    return False


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
        """The call, in a span child of ``call.traceparent`` (the execution's) when tracing is on; an HTTPS request
        then carries the span's own ``traceparent``, so the receiver's span is the delivery's child."""
        kind = KINDS.get(type(call.target), "target")
        attributes = {"jobrunner.execution_id": call.message_id, "jobrunner.target": kind}
        with telemetry.span(f"deliver {kind}", parent=call.traceparent, kind="client", attributes=attributes) as span:
            if isinstance(call.target, HttpsTarget) and span.traceparent and span.traceparent != call.traceparent:
                call = dataclasses.replace(call, headers={**call.headers, TRACEPARENT_HEADER: span.traceparent})
            result = self._of(type(call.target)).deliver(call)
            if not succeeded(result):
                span.fail(type(result).__name__)
            return result

    def _of(self, kind: type) -> Deliverer:
        if kind not in self._factories:
            raise TypeError(f"no deliverer for {kind.__name__}")
        with self._lock:
            if kind not in self._built:
                self._built[kind] = self._factories[kind]()
            return self._built[kind]
