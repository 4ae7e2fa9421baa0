"""The scan function: one asynchronous invocation per (minute, segment) partition, started by the tick.

A scan may start up to a minute before its bucket, publishes through the minute, and keeps retrying
failures up to ``ScanRules.overtime`` (3 min) after it: about 5 minutes at most, so the timeout is 6.
Asynchronous invocations that fail are retried twice; events older than 6 minutes are dropped
(the tick re-dispatches any partition whose lease lapsed, from the watermark); what still fails goes
to an SQS queue, which raises an alarm. Reserved concurrency is sized from the segments
(``infra.config.scan_concurrency``). The function runs in the VPC (MSK, Keyspaces' endpoint).

Besides the tick, every writer of late rows invokes it to wake a partition's scan (``services.wake``): the
API, the results function and the scan function itself (a next fire written into the next minute). So the
function has a name of its own, known before it exists: a grant to invoke it, or an environment variable
naming it, refers to no attribute of the function, and the scan function's own role can hold one without a
dependency cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda_destinations as destinations
from constructs import Construct

from infra.constructs.function import FunctionBase, JobRunnerFunction
from infra.constructs.tick import dead_letter_queue

if TYPE_CHECKING:
    from pathlib import Path

SCAN_TIMEOUT = Duration.minutes(6)
MAX_EVENT_AGE = Duration.minutes(6)


class Scanners(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        base: FunctionBase,
        code: Path,
        reserved_concurrency: int | None,
        function_name: str,
        memory_size: int = 512,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function_name = function_name
        #: The function's ARN, unqualified, from its name alone.
        self.function_arn = Stack.of(self).format_arn(
            service="lambda", resource="function", resource_name=function_name,
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        self.handler = JobRunnerFunction(
            self, "Handler", base=base, code=code, in_vpc=True,
            description="Segment scan: publishes one (minute, segment) partition",
            memory_size=memory_size, timeout=SCAN_TIMEOUT, reserved_concurrency=reserved_concurrency,
            function_name=function_name,
        )
        self.function = self.handler.function
        self.failed_invocations = dead_letter_queue(self, "FailedInvocations", "the scan function's async invokes")
        self.function.configure_async_invoke(
            retry_attempts=2, max_event_age=MAX_EVENT_AGE,
            on_failure=destinations.SqsDestination(self.failed_invocations),
        )

    def grant_dispatch(self, grantee: iam.IGrantable) -> iam.Grant:
        """``lambda:InvokeFunction`` on the scan function, unqualified (the tick, and the writers that wake it).

        Not ``grant_invoke``, which adds every version and alias (``<arn>:*``); they invoke by name.
        """
        return iam.Grant.add_to_principal(grantee=grantee, actions=["lambda:InvokeFunction"],
                                          resource_arns=[self.function_arn])
