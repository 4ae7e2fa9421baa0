from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from aws_cdk.assertions import Match, Template

from infra.constructs.reconciler import Reconciler

if TYPE_CHECKING:
    from pathlib import Path

    import aws_cdk as cdk

    from infra.constructs.function import FunctionBase


def test_a_rule_of_its_own_runs_it_every_interval_without_retries(
    stack: cdk.Stack, base: FunctionBase, code: Path,
) -> None:
    # A lost or failed run needs no retry: the next one goes on from the state the last one saved
    Reconciler(stack, "Reconcile", base=base, code=code, interval_minutes=5)
    template = Template.from_stack(stack)

    template.has_resource_properties("AWS::Events::Rule", {
        "ScheduleExpression": "rate(5 minutes)", "State": "ENABLED",
        "Targets": [Match.object_like({"RetryPolicy": {"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60}})],
    })
    template.has_resource_properties("AWS::Lambda::EventInvokeConfig", {
        "MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60,
    })


def test_it_runs_in_the_vpc_for_as_long_as_its_interval_and_reads_its_settings(
    stack: cdk.Stack, base: FunctionBase, code: Path,
) -> None:
    Reconciler(stack, "Reconcile", base=base, code=code, interval_minutes=5)

    Template.from_stack(stack).has_resource_properties("AWS::Lambda::Function", {
        "Timeout": 300, "VpcConfig": Match.object_like({"SubnetIds": Match.any_value()}),
        "Environment": {"Variables": {"SHARED": "1", "JOBRUNNER_RECONCILE_INTERVAL_S": "300"}},
        "ReservedConcurrentExecutions": Match.absent(),  # one run at a time is its lease's doing
    })


@pytest.mark.parametrize("minutes", [0, 16])
def test_an_interval_lambda_cannot_run_is_refused(stack: cdk.Stack, base: FunctionBase, code: Path,
                                                  minutes: int) -> None:
    with pytest.raises(ValueError, match="interval_minutes"):
        Reconciler(stack, "Reconcile", base=base, code=code, interval_minutes=minutes)
