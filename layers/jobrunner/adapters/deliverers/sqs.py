"""The SQS deliverer: sends a target queue one message with the body, the context as message attributes."""

from __future__ import annotations

from typing import Any

from jobrunner.adapters.deliverers.aws_errors import failure_of
from jobrunner.domain.targets import SqsTarget
from jobrunner.ports import Deliverer, DeliveryCall, DeliveryResult, Sent

#: The headers of a call that a message carries as its attributes: the context (``jobrunner-job-id``...).
ATTRIBUTE_PREFIX = "jobrunner-"


class SqsDeliverer(Deliverer):
    """Sends through ``client`` (boto3 ``sqs``). On a FIFO queue the message's group is the target's
    ``message_group_id`` and its deduplication id the execution id, so a delivery sent twice within SQS's
    five-minute window is taken once."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def deliver(self, call: DeliveryCall) -> DeliveryResult:
        target = call.target
        if not isinstance(target, SqsTarget):
            raise TypeError(f"not an SQS target: {type(target).__name__}")
        params: dict[str, Any] = {
            "QueueUrl": target.queue_url, "MessageBody": call.body.decode("utf-8"),
            "MessageAttributes": {name: {"DataType": "String", "StringValue": value}
                                  for name, value in call.headers.items() if name.startswith(ATTRIBUTE_PREFIX)},
        }
        if target.fifo:
            params["MessageGroupId"] = target.message_group_id
            params["MessageDeduplicationId"] = call.message_id
        try:
            response = self._client.send_message(**params)
        except Exception as error:
            failure = failure_of("SQS", error, float(self._client.meta.config.read_timeout))
            if failure is None:
                raise
            return failure
        return Sent(str(response.get("MessageId", "")))
