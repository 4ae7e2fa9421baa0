"""The results function: reads ``job-results`` through an MSK event source mapping.

Its code (``functions/results``) is written separately, so the path is a parameter. The mapping reads
from the oldest record with a fixed consumer group (so its ``kafka-cluster`` group permissions can
name it); its pollers run in the cluster's subnets with the cluster's security group and reach
Lambda, STS and SQS through the VPC endpoints. The function runs in the VPC: Keyspaces (history,
retries) and Kafka (``job-dlq``).

A batch that keeps failing must not stall its partition: the mapping retries it a bounded number of
times, splitting it on each error to isolate a poison record, and then hands the failed records'
coordinates (topic, partition, offsets) to an SQS queue and moves on. Bounded retries need the
mapping's provisioned mode (a floor of pollers that is billed while idle). The queue raises an alarm;
``docs/runbooks.md`` says how to replay from the offsets it holds. With ``max_pollers`` 0 the mapping is in
on-demand mode (nothing billed at rest; issue #33's small tier): Lambda's Kafka error handling controls are
provisioned-mode only, so a batch that keeps failing is retried until it succeeds and its partition waits
(the ``ResultsOffsetLag`` alarm says so).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.function import FunctionBase, JobRunnerFunction
from infra.constructs.tick import dead_letter_queue

if TYPE_CHECKING:
    from pathlib import Path

RESULTS_TOPIC = "job-results"
#: Retries of a failing batch before its records go to the failed-batches queue (each retry after an
#: error splits the batch in two, so a poison record is isolated within log2(batch size) of them).
RETRY_ATTEMPTS = 10
#: A result older than this is not delivered any more but sent to the queue (the watchdog has long
#: retried or failed its execution by then).
MAX_RECORD_AGE = Duration.hours(6)


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
        max_pollers: int = 3,
        poller_group: str | None = None,
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
        self.failed_batches = dead_letter_queue(self, "FailedBatches", "the job-results trigger")
        self.event_source = kafka_trigger(self, "JobResults", self.function, cluster_arn=cluster_arn, topic=topic,
                                          consumer_group=consumer_group, batch_size=batch_size,
                                          max_pollers=max_pollers, failed_batches=self.failed_batches,
                                          poller_group=poller_group)


def kafka_trigger(
    scope: Construct, construct_id: str, function: lambda_.IFunction, *, cluster_arn: str, topic: str,
    consumer_group: str, batch_size: int, max_pollers: int | None, failed_batches: sqs.IQueue,
    poller_group: str | None = None,
) -> lambda_.EventSourceMapping:
    """An MSK trigger of ``function`` on ``topic`` from its oldest record, under a fixed ``consumer_group``.

    A plain mapping rather than ManagedKafkaEventSource, which attaches the AWS managed policy
    AWSLambdaMSKExecutionRole (kafka and ec2 actions on every resource); the stack grants the kafka-cluster
    actions on this cluster, topic and group instead. With provisioned pollers (``max_pollers``) a batch that
    keeps failing is retried a bounded number of times, split, then sent to ``failed_batches``; without them
    (on-demand mode) it holds its partition until it succeeds. Provisioned pollers are billed by the event
    poller unit, whether they poll or not: the mappings of one ``poller_group`` (the stack's, on one cluster)
    share their units instead of each paying its own at rest."""
    bounded: dict[str, Any] = {}
    if max_pollers:
        bounded = {
            "retry_attempts": RETRY_ATTEMPTS, "bisect_batch_on_error": True, "max_record_age": MAX_RECORD_AGE,
            "on_failure": event_sources.SqsDlq(failed_batches),
            "provisioned_poller_config": lambda_.ProvisionedPollerConfig(
                minimum_pollers=1, maximum_pollers=max_pollers, poller_group_name=poller_group),
        }
    return lambda_.EventSourceMapping(
        scope, construct_id,
        target=function,
        event_source_arn=cluster_arn,
        kafka_topic=topic,
        kafka_consumer_group_id=consumer_group,
        starting_position=lambda_.StartingPosition.TRIM_HORIZON,
        batch_size=batch_size,
        max_batching_window=Duration.seconds(1),
        **bounded,
    )
