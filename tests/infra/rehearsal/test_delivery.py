"""The delivery function's AWS calls, run under exactly its role's policies from the synthesized template (moto,
IAM enforced): a stage allowing Lambda and SQS targets of its own account (``targets-aws``) invokes a function,
sends to a queue and creates and reads a tenant's webhook secrets; no other function's role may call a target.
Kafka is the memory publisher (``test_declared_needs`` covers the delivery's topics)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.exceptions import ClientError

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.delivery_wiring import build_webhook_secrets
from jobrunner.wiring import Container
from tests.infra.rehearsal.policy import SECRET_SUFFIX
from tests.infra.rehearsal.stage import _code
from tests.infra.rehearsal.template import ACCOUNT, REGION

if TYPE_CHECKING:
    from tests.infra.rehearsal.stage import Stage

NOW = datetime(2026, 11, 22, 10, 0, 10, tzinfo=UTC)
TENANT = "payments"


def _targets() -> tuple[str, str]:
    """A function and a FIFO queue of the stage's account, created as their owner would (enforcement off)."""
    role = boto3.client("iam", region_name=REGION).create_role(
        RoleName="receiver", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}))
    function = boto3.client("lambda", region_name=REGION).create_function(
        FunctionName="receiver", Runtime="python3.13", Role=role["Role"]["Arn"], Handler="handler.handler",
        Code={"ZipFile": _code()})["FunctionArn"]
    queue = boto3.client("sqs", region_name=REGION).create_queue(
        QueueName="orders.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    return function, queue


def _message(execution_id: str, target: dict[str, object]) -> bytes:
    return json.dumps({"execution_id": execution_id, "job_id": f"job-{execution_id}", "user_id": TENANT,
                       "attempt": 1, "result_token": f"token-{execution_id}",
                       "scheduled_at": "2026-11-22T10:00:00.000Z", "target": target, "payload": {"n": 1}}).encode()


def test_the_delivery_calls_its_targets_and_keeps_its_tenants_secrets_under_its_role(
    targets_stage: Stage, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a function and a queue of the account the stage's allow-lists name, and the delivery in Lambda
    stage = targets_stage
    function, queue = _targets()
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "jobrunner-dev-delivery")
    publisher = MemoryPublisher()
    container = Container(stage.settings("Delivery"), publisher=publisher, clock=ManualClock(NOW))
    # When it delivers a batch of one execution to each, as the delivery function
    with stage.acting_as("Delivery"):
        counted = container.delivery.deliver_batch([
            _message("e1", {"lambda": {"function_arn": function}}),
            _message("e2", {"sqs": {"queue_url": queue, "message_group_id": "orders"}})])
        # and a tenant's first HTTPS delivery creates its webhook secrets, which the next ones read
        secrets = build_webhook_secrets(container)
        first = secrets.signing_secrets(TENANT)
        again = build_webhook_secrets(container).signing_secrets(TENANT)

    # Then every call was granted, and each outcome reported to job-results with its token
    assert stage.denied() == []
    assert counted == {"delivered": 2}
    assert sorted((m.topic, m.value["execution_id"], m.value["status"], m.value["result_token"])
                  for m in publisher.sent) == [("job-results", "e1", "SUCCESS", "token-e1"),
                                               ("job-results", "e2", "SUCCESS", "token-e2")]
    assert first == again and first[0].startswith("whsec_")
    prefix = stage.settings("Delivery").webhook_secret_prefix
    secret = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{prefix}{TENANT}-{SECRET_SUFFIX}"
    assert {("lambda:InvokeFunction", function),
            ("sqs:SendMessage", f"arn:aws:sqs:{REGION}:{ACCOUNT}:orders.fifo"),
            ("secretsmanager:CreateSecret", secret),
            ("secretsmanager:GetSecretValue", secret)} <= stage.allowed("Delivery")


@pytest.mark.parametrize("unit", ["Api", "Scan", "Results"])
def test_no_other_function_may_call_a_target(targets_stage: Stage, unit: str) -> None:
    function, queue = _targets()

    with targets_stage.acting_as(unit):
        with pytest.raises(ClientError, match="AccessDenied"):
            boto3.client("lambda", region_name=REGION).invoke(FunctionName=function, Payload=b"{}")
        with pytest.raises(ClientError, match="AccessDenied"):
            boto3.client("sqs", region_name=REGION).send_message(
                QueueUrl=queue, MessageBody="{}", MessageGroupId="g", MessageDeduplicationId="d")

    assert len(targets_stage.denied()) == 2


def test_the_api_reads_rotates_and_ends_a_rotation_of_a_tenants_secrets_under_its_role(
    targets_stage: Stage, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the API function in Lambda, on a stage with targets
    stage = targets_stage
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "jobrunner-dev-api")
    container = Container(stage.settings("Api"), publisher=MemoryPublisher(), clock=ManualClock(NOW))
    # When a tenant reads its secret (created on that first read), rotates it and ends the rotation
    with stage.acting_as("Api"):
        secrets = container.delivery_adapters.webhook_secrets
        [first] = secrets.secrets_of(TENANT)
        new, previous = secrets.rotate(TENANT, timedelta(hours=1))
        [kept] = secrets.end_rotation(TENANT)
    # Then every call was granted, and the secrets are the ones a delivery signs with
    assert stage.denied() == []
    assert (previous.text, kept.text) == (first.text, new.text)
    prefix = stage.settings("Api").webhook_secret_prefix
    secret = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{prefix}{TENANT}-{SECRET_SUFFIX}"
    assert {("secretsmanager:CreateSecret", secret), ("secretsmanager:GetSecretValue", secret),
            ("secretsmanager:PutSecretValue", secret)} <= stage.allowed("Api")
