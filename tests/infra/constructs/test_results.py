from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from aws_cdk.assertions import Match, Template

from infra.constructs.results import Results

if TYPE_CHECKING:
    from pathlib import Path

    import aws_cdk as cdk

    from infra.constructs.function import FunctionBase

CLUSTER = "arn:aws:kafka:eu-west-1:123456789012:cluster/jobrunner-test/abcd-1234"


def test_msk_trigger_on_job_results(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    Results(stack, "Results", base=base, code=code, cluster_arn=CLUSTER, consumer_group="jobrunner-test-results")
    template = Template.from_stack(stack)

    template.has_resource_properties("AWS::Lambda::EventSourceMapping", {
        "EventSourceArn": CLUSTER, "Topics": ["job-results"], "StartingPosition": "TRIM_HORIZON",
        "AmazonManagedKafkaEventSourceConfig": {"ConsumerGroupId": "jobrunner-test-results"},
        "BatchSize": 100, "MaximumBatchingWindowInSeconds": 1,
    })
    template.has_resource_properties("AWS::Lambda::Function", {"VpcConfig": Match.any_value()})
    role = next(iter(template.find_resources("AWS::IAM::Role").values()))["Properties"]
    assert "ManagedPolicyArns" not in role


def test_code_without_a_handler_is_refused(stack: cdk.Stack, base: FunctionBase, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"handler\.py"):
        Results(stack, "Results", base=base, code=tmp_path, cluster_arn=CLUSTER, consumer_group="g")


def test_a_failing_batch_cannot_stall_its_partition(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    # Given the trigger
    results = Results(stack, "Results", base=base, code=code, cluster_arn=CLUSTER, consumer_group="g", max_pollers=3)
    template = Template.from_stack(stack)

    # Then a batch is retried a bounded number of times, split to isolate a poison record, then sent to a queue
    queue_id = stack.get_logical_id(results.failed_batches.node.default_child)  # type: ignore[arg-type]
    template.has_resource_properties("AWS::Lambda::EventSourceMapping", {
        "MaximumRetryAttempts": 10, "BisectBatchOnFunctionError": True, "MaximumRecordAgeInSeconds": 6 * 3600,
        "DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": [queue_id, "Arn"]}}},
        "ProvisionedPollerConfig": {"MinimumPollers": 1, "MaximumPollers": 3},
    })
    # And the execution role (the pollers send as it) may send to the queue
    sends = [s for p in template.find_resources("AWS::IAM::Policy").values()
             for s in p["Properties"]["PolicyDocument"]["Statement"] if "sqs:SendMessage" in str(s["Action"])]
    assert sends and all(s["Resource"] == {"Fn::GetAtt": [queue_id, "Arn"]} for s in sends)


def test_no_provisioned_pollers_is_on_demand_mode_without_bounded_retries(
        stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    # Given a trigger with no provisioned pollers (the small tier: nothing billed at rest)
    Results(stack, "Results", base=base, code=code, cluster_arn=CLUSTER, consumer_group="g", max_pollers=0)
    mapping = next(iter(Template.from_stack(stack).find_resources("AWS::Lambda::EventSourceMapping").values()))
    # Then the mapping is in on-demand mode, and Lambda's Kafka error handling (provisioned-mode only) is not asked for
    properties = mapping["Properties"]
    for absent in ("ProvisionedPollerConfig", "MaximumRetryAttempts", "BisectBatchOnFunctionError",
                   "MaximumRecordAgeInSeconds", "DestinationConfig"):
        assert absent not in properties, absent
    assert properties["Topics"] == ["job-results"]
