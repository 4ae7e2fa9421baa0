from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from aws_cdk.assertions import Match, Template

from infra.constructs.delivery import (
    PUBLISH_MARGIN_S,
    Delivery,
    TargetResources,
    delivery_timeout_s,
    target_resources,
)
from jobrunner.services.delivery import DeliveryRules

if TYPE_CHECKING:
    from pathlib import Path

    import aws_cdk as cdk

    from infra.constructs.function import FunctionBase

CLUSTER = "arn:aws:kafka:eu-west-1:123456789012:cluster/jobrunner-test/abcd-1234"
FUNCTION = "arn:aws:lambda:eu-west-1:123456789012:function:reports"
QUEUE = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo"
NONE = TargetResources((), ())


def test_the_allow_lists_become_exactly_their_arns() -> None:
    resources = target_resources(kinds=("lambda", "sqs"), partition="aws",
                                 lambda_allow=(FUNCTION, f"{FUNCTION}:live", "210987654321"),
                                 sqs_allow=(QUEUE, "210987654321"))

    # An unqualified function with its versions and aliases (as the allow-list reads it), a qualified one alone,
    # an account's every function in any region; a queue by its ARN, an account's every queue
    assert resources.functions == (FUNCTION, f"{FUNCTION}:*", f"{FUNCTION}:live",
                                   "arn:aws:lambda:*:210987654321:function:*")
    assert resources.queues == ("arn:aws:sqs:eu-west-1:123456789012:orders.fifo", "arn:aws:sqs:*:210987654321:*")


def test_a_star_is_every_function_or_queue_and_a_kind_not_allowed_grants_nothing() -> None:
    star = target_resources(kinds=("lambda", "sqs"), lambda_allow=("*",), sqs_allow=("*",), partition="aws")
    assert star == TargetResources(("arn:aws:lambda:*:*:function:*",), ("arn:aws:sqs:*:*:*",))
    # An allow-list left over for a kind the stage does not allow reaches nothing
    assert target_resources(kinds=("https",), lambda_allow=(FUNCTION,), sqs_allow=(QUEUE,), partition="aws") == NONE


def test_the_timeout_covers_a_batch_of_one_tenant_at_the_longest_call() -> None:
    # 16 records of one tenant, 4 at a time: 4 rounds of a 31-s call, then the publish and start margins
    assert delivery_timeout_s(16, 4, 16, 31.0) == 4 * 31 + 20
    assert delivery_timeout_s(16, 16, 16, 31.0) == 31 + 20
    # The margin is the one the function keeps (jobrunner.entrypoints)
    from jobrunner.entrypoints import DELIVERY_PUBLISH_MARGIN

    assert DELIVERY_PUBLISH_MARGIN.total_seconds() == PUBLISH_MARGIN_S
    with pytest.raises(ValueError, match="more than Lambda's 900"):
        delivery_timeout_s(200, 4, 16, 31.0)


def test_msk_trigger_on_job_deliveries(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    delivery = Delivery(stack, "Delivery", base=base, code=code, cluster_arn=CLUSTER, consumer_group="g-delivery",
                        targets=NONE, secret_prefix="jobrunner/test/webhooks/", max_pollers=2)
    template = Template.from_stack(stack)

    template.has_resource_properties("AWS::Lambda::EventSourceMapping", {
        "EventSourceArn": CLUSTER, "Topics": ["job-deliveries"], "StartingPosition": "TRIM_HORIZON",
        "AmazonManagedKafkaEventSourceConfig": {"ConsumerGroupId": "g-delivery"},
        "BatchSize": DeliveryRules().concurrency, "MaximumRetryAttempts": 10, "BisectBatchOnFunctionError": True,
        "ProvisionedPollerConfig": {"MinimumPollers": 1, "MaximumPollers": 2},
    })
    template.has_resource_properties("AWS::Lambda::Function", {
        "VpcConfig": Match.any_value(), "Timeout": delivery.timeout.to_seconds()})
    assert delivery.timeout.to_seconds() == 144


def _statements(stack: cdk.Stack) -> list[dict[str, object]]:
    return [s for p in Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
            for s in p["Properties"]["PolicyDocument"]["Statement"]]


def test_the_role_may_call_what_the_allow_lists_name_and_the_stages_secrets(
        stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    targets = target_resources(kinds=("lambda", "sqs"), lambda_allow=(FUNCTION,), sqs_allow=(QUEUE,), partition="aws")
    Delivery(stack, "Delivery", base=base, code=code, cluster_arn=CLUSTER, consumer_group="g", targets=targets,
             secret_prefix="jobrunner/test/webhooks/", max_pollers=0)
    statements = _statements(stack)

    invokes = [s for s in statements if s["Action"] == "lambda:InvokeFunction"]
    assert [s["Resource"] for s in invokes] == [[FUNCTION, f"{FUNCTION}:*"]]
    sends = [s for s in statements if s["Action"] == "sqs:SendMessage"]
    assert [s["Resource"] for s in sends] == ["arn:aws:sqs:eu-west-1:123456789012:orders.fifo"]
    (secrets,) = [s for s in statements if "secretsmanager:GetSecretValue" in str(s["Action"])]
    assert sorted(secrets["Action"]) == ["secretsmanager:CreateSecret", "secretsmanager:GetSecretValue",
                                         "secretsmanager:PutSecretValue"]
    assert secrets["Resource"] == {"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"}, ":secretsmanager:", {"Ref": "AWS::Region"}, ":", {"Ref": "AWS::AccountId"},
        ":secret:jobrunner/test/webhooks/*"]]}


def test_no_allow_list_grants_no_target(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    Delivery(stack, "Delivery", base=base, code=code, cluster_arn=CLUSTER, consumer_group="g", targets=NONE,
             secret_prefix="p/", max_pollers=0)

    assert not [s for s in _statements(stack) if s["Action"] in ("lambda:InvokeFunction", "sqs:SendMessage")]
