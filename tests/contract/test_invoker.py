"""The Invoker contract (jobrunner.ports.Invoker): on memory, on the local stack's thread pool and on the fault
suite's processes (the real scan function on the real servers); what Lambda's own invoker can show on moto."""

from __future__ import annotations

import io
import json
import time
import uuid
import zipfile
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.config import Config

from jobrunner.adapters.invokers.lambda_ import LambdaInvoker
from jobrunner.domain.errors import Unavailable
from jobrunner.domain.time import minute_bucket
from jobrunner.ports import ScanRequest

if TYPE_CHECKING:
    from jobrunner.config import Settings
    from tests.support.scan_starters import Starter


def past_minute(minutes_ago: int = 3) -> datetime:
    """A minute already over (a real scan of it reads its partition once and ends)."""
    return minute_bucket(datetime.now(UTC)) - timedelta(minutes=minutes_ago)


def test_a_request_starts_a_scan_of_its_own_partition(scan_starter: Starter) -> None:
    requests = [ScanRequest(1, past_minute()), ScanRequest(3, past_minute(4))]
    for request in requests:
        scan_starter.invoker.invoke_scan(request)
    assert sorted(scan_starter.started(2), key=lambda r: r.segment) == requests


@pytest.mark.solo  # it times the call
def test_invoking_does_not_wait_for_the_scan(scan_starter: Starter) -> None:
    # (the thread pool's scan is held until the test ends; a process takes seconds to start and scan)
    request = ScanRequest(2, past_minute())
    began = time.monotonic()
    scan_starter.invoker.invoke_scan(request)
    assert time.monotonic() - began < 1.0
    assert scan_starter.started(1) == [request]


def test_a_request_asked_for_twice_starts_twice(scan_starter: Starter) -> None:
    request = ScanRequest(0, past_minute())
    scan_starter.invoker.invoke_scan(request)
    scan_starter.invoker.invoke_scan(request)
    assert scan_starter.started(2) == [request, request]


# -- Lambda's own invoker, on moto: accepted or Unavailable (moto runs no function without Docker) ------------


@pytest.fixture
def scan_function(lambda_client: Any, settings: Settings) -> str:
    """A function on moto for the scans (its role made first: moto checks that the role exists)."""
    name = f"scan-{uuid.uuid4().hex[:8]}"
    iam = boto3.client("iam", region_name=settings.region, endpoint_url=settings.dynamodb_endpoint)
    role = iam.create_role(
        RoleName=f"{name}-role", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}),
    )["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return event\n")
    lambda_client.create_function(FunctionName=name, Runtime="python3.12", Role=role, Handler="handler.handler",
                                  Code={"ZipFile": code.getvalue()})
    return name


@pytest.mark.integration
@pytest.mark.solo  # it times the call
def test_the_lambda_invoker_returns_once_lambda_accepted_the_request(lambda_client: Any, scan_function: str) -> None:
    began = time.monotonic()
    LambdaInvoker(scan_function, lambda_client).invoke_scan(ScanRequest(1, past_minute()))
    assert time.monotonic() - began < 5.0


@pytest.mark.integration
def test_a_request_lambda_does_not_accept_raises_unavailable(lambda_client: Any) -> None:
    with pytest.raises(Unavailable):
        LambdaInvoker(f"missing-{uuid.uuid4().hex[:8]}", lambda_client).invoke_scan(ScanRequest(1, past_minute()))


def test_a_request_that_cannot_reach_lambda_raises_unavailable() -> None:
    unreachable = boto3.client(  # nothing listens on port 1
        "lambda", region_name="us-east-1", endpoint_url="http://127.0.0.1:1", aws_access_key_id="test",
        aws_secret_access_key="test", config=Config(retries={"max_attempts": 1}, connect_timeout=1))
    with pytest.raises(Unavailable):
        LambdaInvoker("jobrunner-scan", unreachable).invoke_scan(ScanRequest(1, past_minute()))
