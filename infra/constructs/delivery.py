"""The delivery function (issue 35): reads ``job-deliveries`` through an MSK event source mapping and calls each
execution's target (an HTTPS endpoint, a Lambda function, an SQS queue), reporting the outcome to ``job-results``.

Deployed only when a stage allows targets (the ``targets`` option). Its mapping is the results function's
(``infra.constructs.results``): a fixed consumer group, bounded retries and a failed-batches queue in provisioned
mode, and the same poller count (so its concurrency, one invocation per poller at a time, is bounded like the
results function's, and it needs no reserved concurrency of its own).

Its timeout covers a batch in the worst case: every record of one tenant, so the calls run ``tenant_concurrency``
at a time, each up to the longest a target call may take (``MAX_TIMEOUT_S`` + 1 s for HTTPS, ``aws_call_s`` for
Lambda and SQS), then the margin the function keeps to publish the outcomes. A call that could not end in time is
not made anyway (``services.delivery``: reported as a retryable failure), so the sizing only spares such retries;
a tenant's delivery rate (``JOBRUNNER_DELIVERY_TENANT_RATE``, 20 a second by default) may hold its calls' starts
too, and a call it leaves no time for is put off the same way.

Its role holds exactly what the stage's allow-lists name (``target_resources``): ``lambda:InvokeFunction`` on the
functions (an account id: every function of that account, in any region; an unqualified ARN: the function and
its versions and aliases), ``sqs:SendMessage`` on the queues, and the tenants' webhook secrets under the stage's
prefix (read, and created on a tenant's first delivery; put, for rotations). A ``*`` becomes every function (or
queue) only because the stage said ``allow_any`` (``infra.config.parts.Targets``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_cdk import Aws, Duration
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.constructs.function import FunctionBase, JobRunnerFunction
from infra.constructs.nag import acknowledge
from infra.constructs.results import kafka_trigger
from infra.constructs.secrets import grant_webhook_secrets
from infra.constructs.tick import dead_letter_queue
from jobrunner.domain.target_grants import ANY
from jobrunner.domain.targets import LambdaTarget, SqsTarget
from jobrunner.domain.targets.model import MAX_TIMEOUT_S
from jobrunner.services.delivery import DeliveryRules

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

DELIVERY_TOPIC = "job-deliveries"
#: What the function keeps of its time to publish the outcomes (``jobrunner.entrypoints.DELIVERY_PUBLISH_MARGIN``;
#: a test keeps the two equal) and, on top, for a cold start and reading the tenants' secrets.
PUBLISH_MARGIN_S = 10
START_MARGIN_S = 10
#: The function's memory unless a stage says otherwise (the cost model prices it).
MEMORY_MB = 512
#: Lambda's longest timeout.
MAX_LAMBDA_TIMEOUT_S = 900


def delivery_timeout_s(batch_size: int, tenant_concurrency: int, concurrency: int, aws_call_s: float) -> int:
    """The function's timeout, in seconds, for a batch of ``batch_size`` records of one tenant (module docstring)."""
    waves = math.ceil(batch_size / min(tenant_concurrency, concurrency))
    longest_call = max(MAX_TIMEOUT_S + 1, math.ceil(aws_call_s))
    timeout = waves * longest_call + PUBLISH_MARGIN_S + START_MARGIN_S
    if timeout > MAX_LAMBDA_TIMEOUT_S:
        raise ValueError(f"a batch of {batch_size} at {tenant_concurrency} calls of one tenant at once needs "
                         f"{timeout} s, more than Lambda's {MAX_LAMBDA_TIMEOUT_S}: a smaller batch")
    return timeout


@dataclass(frozen=True)
class TargetResources:
    """What the delivery function's role may call: the functions and the queues (ARN patterns)."""

    functions: tuple[str, ...]
    queues: tuple[str, ...]


def target_resources(*, kinds: Sequence[str], lambda_allow: Sequence[str], sqs_allow: Sequence[str],
                     partition: str = Aws.PARTITION) -> TargetResources:
    """The ARNs the allow-lists name, for the kinds allowed (an allow-list of a kind not allowed grants nothing)."""
    functions: list[str] = []
    for entry in lambda_allow if "lambda" in kinds else ():
        if entry == ANY:
            functions.append(f"arn:{partition}:lambda:*:*:function:*")
        elif entry.isdigit():
            functions.append(f"arn:{partition}:lambda:*:{entry}:function:*")
        else:
            functions.append(entry)
            if LambdaTarget(entry).qualifier is None:  # its versions and aliases too, as the allow-list reads it
                functions.append(f"{entry}:*")
    queues: list[str] = []
    for entry in sqs_allow if "sqs" in kinds else ():
        if entry == ANY:
            queues.append(f"arn:{partition}:sqs:*:*:*")
        elif entry.isdigit():
            queues.append(f"arn:{partition}:sqs:*:{entry}:*")
        else:
            queue = SqsTarget(entry, None)
            queue_partition = "aws-cn" if ".amazonaws.com.cn" in entry else partition
            queues.append(f"arn:{queue_partition}:sqs:{queue.region}:{queue.account}:{queue.queue_name}")
    return TargetResources(tuple(dict.fromkeys(functions)), tuple(dict.fromkeys(queues)))


class Delivery(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        base: FunctionBase,
        code: Path,
        cluster_arn: str,
        consumer_group: str,
        targets: TargetResources,
        secret_prefix: str,
        topic: str = DELIVERY_TOPIC,
        rules: DeliveryRules | None = None,
        memory_size: int = MEMORY_MB,
        max_pollers: int = 3,
        poller_group: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if not (code / "handler.py").is_file():
            raise ValueError(f"{code} has no handler.py")
        rules = rules or DeliveryRules()
        self.consumer_group = consumer_group
        self.topic = topic
        #: A batch is what the function calls at once across tenants; one tenant's takes a few rounds.
        self.batch_size = rules.concurrency
        self.timeout = Duration.seconds(delivery_timeout_s(self.batch_size, rules.tenant_concurrency,
                                                           rules.concurrency, rules.aws_call_s))
        self.handler = JobRunnerFunction(
            self, "Handler", base=base, code=code, in_vpc=True,
            description="Deliveries: calls each execution's target, reports the outcome",
            memory_size=memory_size, timeout=self.timeout,
        )
        self.function = self.handler.function
        self.role = self.handler.role
        # The mapping sets up its pollers' network with the execution role (as the results function's does).
        self.role.add_to_policy(iam.PolicyStatement(
            actions=["ec2:DescribeVpcs", "ec2:DescribeSecurityGroups"], resources=["*"],
        ))
        self._grant_targets(targets, secret_prefix)
        self.failed_batches = dead_letter_queue(self, "FailedBatches", "the job-deliveries trigger")
        self.event_source = kafka_trigger(self, "JobDeliveries", self.function, cluster_arn=cluster_arn, topic=topic,
                                          consumer_group=consumer_group, batch_size=self.batch_size,
                                          max_pollers=max_pollers, failed_batches=self.failed_batches,
                                          poller_group=poller_group)

    def _grant_targets(self, targets: TargetResources, secret_prefix: str) -> None:
        """The allow-lists' functions and queues, and the tenants' webhook secrets."""
        if targets.functions:
            self.role.add_to_policy(iam.PolicyStatement(actions=["lambda:InvokeFunction"],
                                                        resources=list(targets.functions)))
        if targets.queues:
            self.role.add_to_policy(iam.PolicyStatement(actions=["sqs:SendMessage"], resources=list(targets.queues)))
        grant_webhook_secrets(self.role, secret_prefix, why="created on the tenant's first delivery or read")
        findings: dict[str, str] = {}
        for arn in (*targets.functions, *targets.queues):
            if "*" in arn:
                findings[f"AwsSolutions-IAM5[Resource::{arn.replace(Aws.PARTITION, '<AWS::Partition>')}]"] = (
                    "Derived from the stage's targets allow-list (an account id, or * with allow_any): the "
                    "functions or queues a job may name, checked again on submit and by the scan.")
        acknowledge(self.role, findings)
