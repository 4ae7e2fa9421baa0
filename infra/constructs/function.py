"""One Python Lambda function of the job runner, built the same way for every unit.

Each function gets its own log group (with retention) and its own role whose inline policy allows
exactly: writing to that log group, and, in the VPC, managing its network interfaces. Everything
else is granted by the stack. Runtime, handler name (``handler.handler``), layers and architecture
are common to all; tracing is the base's (active unless the stack says otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.constructs.nag import acknowledge

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from aws_cdk import Duration

#: python3.13 (Amazon Linux 2023); its version is ``infra.layer_build.PYTHON_VERSION`` (a test keeps them equal).
RUNTIME = lambda_.Runtime.PYTHON_3_13
HANDLER = "handler.handler"
#: The network-interface actions Lambda needs for a function in a VPC (what the AWS managed policy
#: AWSLambdaVPCAccessExecutionRole allows, written out so the role holds no managed policy).
VPC_ACCESS_ACTIONS = (
    "ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses",
)


@dataclass(frozen=True)
class FunctionNetwork:
    vpc: ec2.IVpc
    subnets: ec2.SubnetSelection
    security_group: ec2.ISecurityGroup


@dataclass(frozen=True)
class FunctionBase:
    """What every function of the stack shares; each unit adds its own code, sizing and environment."""

    layers: Sequence[lambda_.ILayerVersion]
    architecture: lambda_.Architecture
    log_retention: logs.RetentionDays
    environment: Mapping[str, str] = field(default_factory=dict)
    network: FunctionNetwork | None = None
    #: X-Ray: ACTIVE (Lambda samples), PASS_THROUGH (traced only when the caller's trace is sampled), or DISABLED.
    tracing: lambda_.Tracing = lambda_.Tracing.ACTIVE


class JobRunnerFunction(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        base: FunctionBase,
        code: Path,
        description: str,
        memory_size: int,
        timeout: Duration,
        in_vpc: bool,
        environment: Mapping[str, str] | None = None,
        reserved_concurrency: int | None = None,
        function_name: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if in_vpc and base.network is None:
            raise ValueError(f"{construct_id}: runs in the VPC but no network was given")
        network = base.network if in_vpc else None
        self.log_group = logs.LogGroup(self, "Logs", retention=base.log_retention, removal_policy=RemovalPolicy.DESTROY)
        statements = [iam.PolicyStatement(
            actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[self.log_group.log_group_arn],
        )]
        if network is not None:
            statements.append(iam.PolicyStatement(actions=list(VPC_ACCESS_ACTIONS), resources=["*"]))
        self.role = iam.Role(
            self, "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{description} (job runner)",
            inline_policies={"Runtime": iam.PolicyDocument(statements=statements)},
        )
        self.function = lambda_.Function(
            self, "Function",
            function_name=function_name,
            description=description,
            runtime=RUNTIME,
            handler=HANDLER,
            code=lambda_.Code.from_asset(str(code), exclude=["__pycache__", "*.pyc"]),
            architecture=base.architecture,
            layers=list(base.layers),
            memory_size=memory_size,
            timeout=timeout,
            role=self.role,
            log_group=self.log_group,
            tracing=base.tracing,
            environment={**base.environment, **(environment or {})},
            reserved_concurrent_executions=reserved_concurrency,
            vpc=network.vpc if network else None,
            vpc_subnets=network.subnets if network else None,
            security_groups=[network.security_group] if network else None,
        )
        findings = {
            "AwsSolutions-L1": "python3.13, not the newest runtime: the layers' wheels and bytecode are built for "
                               "3.13 by a 3.13 interpreter of the project's toolchain, and the runtime tests run "
                               "on it; 3.14 needs the same toolchain first (docs/deploy.md, Runtime).",
        }
        # The actions without a resource ARN: X-Ray's (a traced function) and the ec2 network-interface ones (in a VPC).
        wildcards = ([] if base.tracing == lambda_.Tracing.DISABLED
                     else ["X-Ray's PutTraceSegments/PutTelemetryRecords"]) + (
            ["the ec2 network-interface actions Lambda needs in a VPC"] if network else [])
        if wildcards:
            findings["AwsSolutions-IAM5[Resource::*]"] = " and ".join(wildcards) + " take no resource ARN."
        acknowledge(self, findings)
