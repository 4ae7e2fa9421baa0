from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk.assertions import Match, Template

from infra.constructs.tick import Tick

if TYPE_CHECKING:
    from pathlib import Path

    import aws_cdk as cdk

    from infra.constructs.function import FunctionBase


def test_rule_fires_every_minute_with_retries_and_a_dead_letter_queue(
    stack: cdk.Stack, base: FunctionBase, code: Path,
) -> None:
    Tick(stack, "Tick", base=base, code=code)
    template = Template.from_stack(stack)

    template.has_resource_properties("AWS::Events::Rule", {
        "ScheduleExpression": "rate(1 minute)", "State": "ENABLED",
        "Targets": [Match.object_like({
            "RetryPolicy": {"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 300},
            "DeadLetterConfig": {"Arn": {"Fn::GetAtt": [Match.string_like_regexp("TickDeadLetters"), "Arn"]}},
        })],
    })
    template.has_resource_properties("AWS::Lambda::EventInvokeConfig", {
        "MaximumRetryAttempts": 1, "MaximumEventAgeInSeconds": 300,
        "DestinationConfig": {"OnFailure": {"Destination": Match.any_value()}},
    })
    template.has_resource_properties("AWS::SQS::Queue", {"MessageRetentionPeriod": 14 * 24 * 3600,
                                                         "SqsManagedSseEnabled": True})


def test_tick_runs_outside_the_vpc(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    Tick(stack, "Tick", base=base, code=code)

    Template.from_stack(stack).has_resource_properties("AWS::Lambda::Function", {
        "VpcConfig": Match.absent(), "Timeout": 60,
    })
