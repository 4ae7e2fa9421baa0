"""The preflight: the account's Lambda concurrency against what the stack reserves and needs.

moto does not implement ``GetAccountSettings`` (it answers 404), so the Lambda client is botocore's,
with its answers stubbed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.stub import Stubber

from infra.config import DeploymentConfig
from infra.preflight import QUOTA_CODE, AccountConcurrency, main, problems

if TYPE_CHECKING:
    from typing import Any


def config(**context: Any) -> DeploymentConfig:
    return DeploymentConfig.from_context(context.get)


NEW_ACCOUNT = AccountConcurrency(limit=10, unreserved=10)
RAISED = AccountConcurrency(limit=1000, unreserved=1000)


def test_the_dev_defaults_reserve_nothing_a_new_account_cannot_hold() -> None:
    (found,) = problems(config(), NEW_ACCOUNT, "eu-west-1")

    # Then the deploy goes through; the user is warned that 16 segments will be throttled at 10
    assert not found.blocking
    assert "16 segments need about 42" in found.text and "-c segments=N" in found.text
    assert f"--quota-code {QUOTA_CODE}" in found.text


def test_a_reservation_on_a_new_account_is_refused_naming_the_quota_and_the_fix() -> None:
    # Given a prod stage (auto reserves 36) on an account whose quota is still 10
    (reservation, throttling) = problems(config(stage="prod"), NEW_ACCOUNT, "eu-west-1")

    assert reservation.blocking and not throttling.blocking
    assert "scan_reserved_concurrency=36" in reservation.text and "100 unreserved" in reservation.text
    assert f"--quota-code {QUOTA_CODE}" in reservation.text and "--region eu-west-1" in reservation.text
    assert "-c scan_reserved_concurrency=0" in reservation.text


def test_a_raised_quota_passes_and_a_redeploy_counts_its_own_reservation() -> None:
    assert problems(config(stage="prod"), RAISED, "eu-west-1") == []
    # 130 of 200 already reserved by this stack's scans: raising to 144 leaves 200 - 144 = 56 < 100
    tight = AccountConcurrency(limit=200, unreserved=70, own_reservation=130)
    (found,) = problems(config(stage="prod", segments=64), tight, "eu-west-1")
    assert found.blocking and "would leave 56" in found.text


@pytest.mark.parametrize(("argv", "limit", "status"), [
    ([], 10, 0),                      # dev: no reservation; deploys, with a warning
    (["-c", "stage=prod"], 10, 1),    # the reservation would fail the deploy
    (["-c", "stage=prod"], 1000, 0),
])
def test_main_reads_the_account_and_the_context(argv: list[str], limit: int, status: int,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    client = boto3.client("lambda", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_response("get_account_settings", {
            "AccountLimit": {"ConcurrentExecutions": limit, "UnreservedConcurrentExecutions": limit},
            "AccountUsage": {"FunctionCount": 0},
        })
        assert main(argv, lambda_client=client) == status

    err = capsys.readouterr().err
    assert ("preflight: error:" in err) == (status == 1)
    assert (QUOTA_CODE in err) == (limit == 10)
