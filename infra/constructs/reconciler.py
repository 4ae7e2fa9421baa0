"""The reconciler: a function of its own, on an EventBridge rule of its own, every ``interval`` minutes.

It walks the jobs and re-plans every execution it finds lost (``jobrunner.services.reconcile``); in a healthy system
it repairs nothing, and each repair raises the ``Reconciled`` alarm (``infra.constructs.monitoring``). It never
delays a scan: it runs in a function of its own, one run at a time (its lease in the heartbeat table), reading at a
bounded rate (``JOBRUNNER_RECONCILE_ROWS_PER_S``). A run that fails or is lost needs no retry: the next one goes on
from the state the last one saved, so neither the rule's target nor the function's asynchronous invocation is
retried, and an event older than a minute is dropped (the next one is on its way). Each run walks until shortly
before its timeout (the interval, at most 15 minutes) and keeps its cursor for the next.

It runs in the VPC: Keyspaces through its endpoint, DynamoDB through the gateway endpoint, and Lambda's endpoint
to wake the scan of a partition it writes a repair to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from constructs import Construct

from infra.constructs.function import FunctionBase, JobRunnerFunction
from jobrunner.config import Settings

if TYPE_CHECKING:
    from pathlib import Path

#: The longest a Lambda function runs.
MAX_TIMEOUT = Duration.minutes(15)
#: An event not delivered within this is dropped: the next run is due by then anyway.
MAX_EVENT_AGE = Duration.minutes(1)


class Reconciler(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        base: FunctionBase,
        code: Path,
        interval_minutes: int = 1,
        memory_size: int = 512,
    ) -> None:
        super().__init__(scope, construct_id)
        if not 1 <= interval_minutes <= 15:
            raise ValueError("interval_minutes: 1 to 15 (a run lasts at most its interval, and Lambda 15 minutes)")
        interval = Duration.minutes(interval_minutes)
        environment = Settings.of(reconcile_interval_s=interval_minutes * 60).to_environment(given_only=True)
        self.handler = JobRunnerFunction(
            self, "Handler", base=base, code=code, in_vpc=True,
            description="Reconciler: walks the jobs, re-plans executions found lost", memory_size=memory_size,
            timeout=interval, environment=environment,
        )
        self.function = self.handler.function
        self.function.configure_async_invoke(retry_attempts=0, max_event_age=MAX_EVENT_AGE)
        self.rule = events.Rule(
            self, "Schedule", description="Job runner reconciler", schedule=events.Schedule.rate(interval),
        )
        self.rule.add_target(targets.LambdaFunction(self.function, retry_attempts=0, max_event_age=MAX_EVENT_AGE))
