"""The Lambda deliverer: invokes a target function synchronously with the body as its event."""

from __future__ import annotations

from typing import Any

from jobrunner.adapters.deliverers.aws_errors import failure_of
from jobrunner.domain.targets import LambdaTarget
from jobrunner.ports import MAX_ANSWER_BYTES, Deliverer, DeliveryCall, DeliveryResult, Invoked


class LambdaDeliverer(Deliverer):
    """Invokes ``RequestResponse`` through ``client`` (boto3 ``lambda``, its budget one attempt with a read timeout
    that bounds the call: ``wiring.CLIENT_BUDGETS["lambda-targets"]``). A function in another region than the
    client's is refused by the service (``ResourceNotFoundException``...): one client per region is future work."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def deliver(self, call: DeliveryCall) -> DeliveryResult:
        target = call.target
        if not isinstance(target, LambdaTarget):
            raise TypeError(f"not a Lambda target: {type(target).__name__}")
        try:
            response = self._client.invoke(FunctionName=target.function_arn, InvocationType="RequestResponse",
                                           Payload=call.body)
            payload = response["Payload"].read(MAX_ANSWER_BYTES) if response.get("Payload") else b""
        except Exception as error:
            failure = failure_of("Lambda", error, float(self._client.meta.config.read_timeout))
            if failure is None:
                raise
            return failure
        return Invoked(response.get("FunctionError"), payload)
