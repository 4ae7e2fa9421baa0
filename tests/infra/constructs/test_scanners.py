from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Match, Template

from infra.constructs.scanners import Scanners

if TYPE_CHECKING:
    from pathlib import Path

    import aws_cdk as cdk

    from infra.constructs.function import FunctionBase


def test_scan_sizing_and_async_failure_handling(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    Scanners(stack, "Scan", base=base, code=code, reserved_concurrency=36, function_name="jobrunner-t-scan")
    template = Template.from_stack(stack)

    template.has_resource_properties("AWS::Lambda::Function", {
        "FunctionName": "jobrunner-t-scan", "Timeout": 360, "MemorySize": 512, "ReservedConcurrentExecutions": 36,
        "VpcConfig": Match.any_value(),
    })
    template.has_resource_properties("AWS::Lambda::EventInvokeConfig", {
        "MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 360,
        "DestinationConfig": {"OnFailure": {"Destination": {
            "Fn::GetAtt": [Match.string_like_regexp("ScanFailedInvocations"), "Arn"]}}},
    })


def test_dispatch_grant_is_the_unqualified_function_only(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    scan = Scanners(stack, "Scan", base=base, code=code, reserved_concurrency=None, function_name="jobrunner-t-scan")
    tick_role = iam.Role(stack, "TickRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))

    scan.grant_dispatch(tick_role)
    scan.grant_dispatch(scan.handler.role)  # the scan wakes the next minute's: no cycle through its own ARN
    template = Template.from_stack(stack)

    arn = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":lambda:", {"Ref": "AWS::Region"}, ":",
                             {"Ref": "AWS::AccountId"}, ":function:jobrunner-t-scan"]]}
    for role in ("TickRole", "ScanHandlerRole"):
        template.has_resource_properties("AWS::IAM::Policy", {
            "Roles": [{"Ref": Match.string_like_regexp(role)}],
            "PolicyDocument": {"Statement": Match.array_with([{
                "Action": "lambda:InvokeFunction", "Effect": "Allow", "Resource": arn}]), "Version": "2012-10-17"},
        })
    template.has_resource_properties("AWS::Lambda::Function", {"ReservedConcurrentExecutions": Match.absent()})
