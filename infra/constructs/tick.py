"""The minute tick: an EventBridge scheduled rule, ``rate(1 minute)``, invoking the tick function.

A rule rather than EventBridge Scheduler: the tick reads its minute from the scheduled event's
``time`` field (``jobrunner.entrypoints.run_tick``), which a rule delivers as is and the local
ticker imitates; it needs no invoke role; and delivery is the same (asynchronous, at least once,
a few seconds of jitter inside the minute) - see ``docs/deploy.md``. A tick that is lost or late is
caught up by the next one from the segments' watermarks, so retries are short and what still fails
lands in a dead-letter queue that raises an alarm.

The tick runs outside the VPC: it needs only DynamoDB and Lambda's public endpoints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.function import FunctionBase, JobRunnerFunction
from infra.constructs.nag import acknowledge

if TYPE_CHECKING:
    from pathlib import Path

DEAD_LETTER_RETENTION = Duration.days(14)


def dead_letter_queue(scope: Construct, construct_id: str, purpose: str) -> sqs.Queue:
    """An encrypted, TLS-only queue that keeps failed events two weeks for inspection and replay."""
    queue = sqs.Queue(
        scope, construct_id, retention_period=DEAD_LETTER_RETENTION, enforce_ssl=True,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
    )
    acknowledge(queue, {"AwsSolutions-SQS3": f"This queue is itself the dead-letter queue of {purpose}."})
    return queue


class Tick(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        base: FunctionBase,
        code: Path,
        schedule: events.Schedule | None = None,
        memory_size: int = 256,
    ) -> None:
        super().__init__(scope, construct_id)
        self.handler = JobRunnerFunction(
            self, "Handler", base=base, code=code, in_vpc=False,
            description="Minute tick: dispatches the scans", memory_size=memory_size, timeout=Duration.seconds(60),
        )
        self.function = self.handler.function
        self.dead_letter_queue = dead_letter_queue(self, "DeadLetters", "the minute tick (rule and function)")
        # Events older than 5 minutes are useless: the ticks after them have caught up already.
        self.function.configure_async_invoke(
            retry_attempts=1, max_event_age=Duration.minutes(5),
            on_failure=destinations.SqsDestination(self.dead_letter_queue),
        )
        self.rule = events.Rule(
            self, "EveryMinute",
            description="Job runner minute tick",
            schedule=schedule or events.Schedule.rate(Duration.minutes(1)),
        )
        self.rule.add_target(targets.LambdaFunction(
            self.function, retry_attempts=3, max_event_age=Duration.minutes(5),
            dead_letter_queue=self.dead_letter_queue,
        ))
