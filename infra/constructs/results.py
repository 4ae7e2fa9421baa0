"""The results function: reads ``job-results`` through an MSK event source mapping.

Its code (``functions/results``) is written separately, so the path is a parameter. The mapping reads
from the oldest record with a fixed consumer group (so its ``kafka-cluster`` group permissions can
name it); its pollers run in the cluster's subnets with the cluster's security group and reach
Lambda and STS through the VPC endpoints. The function runs in the VPC: Keyspaces (history, retries)
and Kafka (``job-dlq``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.constructs.function import FunctionBase, JobRunnerFunction

if TYPE_CHECKING:
    from pathlib import Path

RESULTS_TOPIC = "job-results"


class Results(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        base: FunctionBase,
        code: Path,
        cluster_arn: str,
        consumer_group: str,
        topic: str = RESULTS_TOPIC,
        batch_size: int = 100,
        memory_size: int = 512,
    ) -> None:
        super().__init__(scope, construct_id)
        if not (code / "handler.py").is_file():
            raise ValueError(f"{code} has no handler.py")
        self.consumer_group = consumer_group
        self.topic = topic
        self.handler = JobRunnerFunction(
            self, "Handler", base=base, code=code, in_vpc=True,
            description="Execution results: history, retries, dead letters",
            memory_size=memory_size, timeout=Duration.seconds(60),
        )
        self.function = self.handler.function
        # The mapping sets up its pollers' network with the execution role (on top of the VPC actions
        # every function in the VPC has).
        self.handler.role.add_to_policy(iam.PolicyStatement(
            actions=["ec2:DescribeVpcs", "ec2:DescribeSecurityGroups"], resources=["*"],
        ))
        # A plain mapping rather than ManagedKafkaEventSource, which attaches the AWS managed policy
        # AWSLambdaMSKExecutionRole (kafka and ec2 actions on every resource); the stack grants the
        # kafka-cluster actions on this cluster, topic and group instead.
        self.event_source = lambda_.EventSourceMapping(
            self, "JobResults",
            target=self.function,
            event_source_arn=cluster_arn,
            kafka_topic=topic,
            kafka_consumer_group_id=consumer_group,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=batch_size,
            max_batching_window=Duration.seconds(1),
        )
