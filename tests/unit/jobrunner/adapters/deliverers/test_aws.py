"""The Lambda and SQS deliverers: SQS on moto's in-process mock; Lambda on botocore's Stubber (moto runs a
function only in a container, which unit tests do not start)."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ReadTimeoutError
from botocore.stub import Stubber
from moto import mock_aws

from jobrunner.adapters.deliverers.lambda_ import LambdaDeliverer
from jobrunner.adapters.deliverers.sqs import SqsDeliverer
from jobrunner.domain.targets import LambdaTarget, SqsTarget, target_from_dict
from jobrunner.ports import AwsRefused, DeliveryCall, Invoked, Sent, TimedOut

if TYPE_CHECKING:
    from collections.abc import Iterator

REGION = "eu-west-1"
FUNCTION = "arn:aws:lambda:eu-west-1:123456789012:function:nightly"
BODY = b'{"report":1}'
CONTEXT = {"jobrunner-job-id": "job-1", "jobrunner-scheduled-time": "2026-11-22T10:10:00.000Z",
           "jobrunner-attempt": "1", "jobrunner-trigger": "SCHEDULE"}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield


# -- SQS ----------------------------------------------------------------------------------------------------


def sqs_call(queue_url: str, group: str | None = None) -> DeliveryCall:
    target = target_from_dict({"sqs": {"queue_url": queue_url, **({"message_group_id": group} if group else {})}})
    return DeliveryCall(target, BODY, {**CONTEXT, "webhook-id": "e-1"}, "e-1")


def received(client: Any, queue_url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = client.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10,
                                                             MessageAttributeNames=["All"],
                                                             AttributeNames=["All"]).get("Messages", [])
    return messages


def test_a_message_carries_the_body_and_the_context_as_attributes(aws: None) -> None:
    client = boto3.client("sqs", region_name=REGION)
    queue_url = client.create_queue(QueueName="reports")["QueueUrl"]
    result = SqsDeliverer(client).deliver(sqs_call(queue_url))
    assert isinstance(result, Sent) and result.message_id
    [message] = received(client, queue_url)
    assert message["Body"] == BODY.decode()
    assert {name: value["StringValue"] for name, value in message["MessageAttributes"].items()} == CONTEXT


def test_a_fifo_message_is_grouped_and_deduplicated_by_the_execution(aws: None) -> None:
    client = boto3.client("sqs", region_name=REGION)
    queue_url = client.create_queue(QueueName="reports.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    deliverer = SqsDeliverer(client)
    assert isinstance(deliverer.deliver(sqs_call(queue_url, "payroll")), Sent)
    assert isinstance(deliverer.deliver(sqs_call(queue_url, "payroll")), Sent)  # the same attempt again
    [message] = received(client, queue_url)
    assert (message["Attributes"]["MessageGroupId"], message["Attributes"]["MessageDeduplicationId"]) == (
        "payroll", "e-1")


def test_a_queue_that_does_not_exist_is_refused_by_its_code(aws: None) -> None:
    client = boto3.client("sqs", region_name=REGION)
    result = SqsDeliverer(client).deliver(sqs_call("https://sqs.eu-west-1.amazonaws.com/123456789012/missing"))
    assert isinstance(result, AwsRefused) and result.service == "SQS"
    assert result.code in {"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"}


# -- Lambda ------------------------------------------------------------------------------------------------


def lambda_client(read_timeout: float = 30) -> Any:
    return boto3.client("lambda", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x",
                        config=Config(read_timeout=read_timeout, retries={"mode": "standard", "total_max_attempts": 1}))


def lambda_call() -> DeliveryCall:
    return DeliveryCall(LambdaTarget(FUNCTION).checked(), BODY, CONTEXT, "e-1")


def invoked(client: Any, response: dict[str, Any]) -> Any:
    with Stubber(client) as stub:
        stub.add_response("invoke", response, {"FunctionName": FUNCTION, "InvocationType": "RequestResponse",
                                               "Payload": BODY})
        result = LambdaDeliverer(client).deliver(lambda_call())
        stub.assert_no_pending_responses()
    return result


def test_a_function_that_returns_is_invoked_synchronously_with_the_body(aws: None) -> None:
    client = lambda_client()
    result = invoked(client, {"StatusCode": 200, "Payload": io.BytesIO(b'{"ok":true}')})
    assert result == Invoked(None, b'{"ok":true}')


def test_a_function_error_is_returned_with_its_error_object(aws: None) -> None:
    error = json.dumps({"errorMessage": "boom", "errorType": "ValueError"}).encode()
    result = invoked(lambda_client(), {"StatusCode": 200, "FunctionError": "Unhandled",
                                       "Payload": io.BytesIO(error)})
    assert result == Invoked("Unhandled", error)


@pytest.mark.parametrize(("code", "status"), [("TooManyRequestsException", 429), ("ResourceNotFoundException", 404),
                                              ("AccessDeniedException", 403)])
def test_a_refused_invocation_is_returned_with_its_code(aws: None, code: str, status: int) -> None:
    client = lambda_client()
    with Stubber(client) as stub:
        stub.add_client_error("invoke", service_error_code=code, service_message="no", http_status_code=status)
        result = LambdaDeliverer(client).deliver(lambda_call())
    assert result == AwsRefused("Lambda", code, "no", status)


def test_a_function_that_runs_past_the_read_timeout_is_a_timeout() -> None:
    class Slow:
        meta = lambda_client(read_timeout=12).meta

        def invoke(self, **_: Any) -> Any:
            raise ReadTimeoutError(endpoint_url="https://lambda.eu-west-1.amazonaws.com")

    assert LambdaDeliverer(Slow()).deliver(lambda_call()) == TimedOut(12.0)


def test_a_deliverer_refuses_a_target_of_another_kind() -> None:
    with pytest.raises(TypeError):
        SqsDeliverer(object()).deliver(lambda_call())
    with pytest.raises(TypeError):
        LambdaDeliverer(object()).deliver(DeliveryCall(
            SqsTarget("https://sqs.eu-west-1.amazonaws.com/123456789012/q").checked(), BODY))
