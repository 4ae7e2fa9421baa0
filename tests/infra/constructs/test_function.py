from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from aws_cdk import Duration
from aws_cdk.assertions import Match, Template

from infra.constructs.function import VPC_ACCESS_ACTIONS, FunctionBase, JobRunnerFunction

if TYPE_CHECKING:
    from pathlib import Path

    import aws_cdk as cdk


def _function(stack: cdk.Stack, base: FunctionBase, code: Path, *, in_vpc: bool) -> JobRunnerFunction:
    return JobRunnerFunction(stack, "Fn", base=base, code=code, description="test", memory_size=256,
                             timeout=Duration.seconds(30), in_vpc=in_vpc, environment={"OWN": "2"})


def test_function_runs_the_handler_on_python_311_with_tracing(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    _function(stack, base, code, in_vpc=True)
    template = Template.from_stack(stack)

    template.has_resource_properties("AWS::Lambda::Function", {
        "Runtime": "python3.13", "Handler": "handler.handler", "Architectures": ["arm64"],
        "TracingConfig": {"Mode": "Active"}, "MemorySize": 256, "Timeout": 30,
        "Environment": {"Variables": {"SHARED": "1", "OWN": "2"}},
        "VpcConfig": Match.object_like({"SubnetIds": Match.any_value()}),
        "LoggingConfig": {"LogGroup": Match.any_value()},
    })
    template.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 7})


def test_role_holds_no_managed_policy_and_logs_only_to_its_group(
    stack: cdk.Stack, base: FunctionBase, code: Path,
) -> None:
    _function(stack, base, code, in_vpc=True)
    template = Template.from_stack(stack)
    role = next(iter(template.find_resources("AWS::IAM::Role").values()))["Properties"]
    (log_group,) = template.find_resources("AWS::Logs::LogGroup")

    assert "ManagedPolicyArns" not in role
    statements = role["Policies"][0]["PolicyDocument"]["Statement"]
    assert statements[0]["Action"] == ["logs:CreateLogStream", "logs:PutLogEvents"]
    assert statements[0]["Resource"] == {"Fn::GetAtt": [log_group, "Arn"]}
    assert statements[1]["Action"] == list(VPC_ACCESS_ACTIONS)


def test_outside_the_vpc_there_are_no_network_permissions(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    _function(stack, base, code, in_vpc=False)
    template = Template.from_stack(stack)

    role = next(iter(template.find_resources("AWS::IAM::Role").values()))["Properties"]
    assert len(role["Policies"][0]["PolicyDocument"]["Statement"]) == 1
    template.has_resource_properties("AWS::Lambda::Function", {"VpcConfig": Match.absent()})


def test_in_vpc_needs_a_network(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    bare = FunctionBase(layers=base.layers, architecture=base.architecture, log_retention=base.log_retention)

    with pytest.raises(ValueError, match="no network"):
        _function(stack, bare, code, in_vpc=True)


def test_tracing_is_the_bases(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    import dataclasses

    from aws_cdk import aws_lambda as lambda_

    JobRunnerFunction(stack, "Busy", base=dataclasses.replace(base, tracing=lambda_.Tracing.PASS_THROUGH), code=code,
                      description="busy", memory_size=128, timeout=Duration.seconds(3), in_vpc=True)
    Template.from_stack(stack).has_resource_properties("AWS::Lambda::Function", {
        "TracingConfig": {"Mode": "PassThrough"}})
