"""DynamoDBLeaseStore's failures: every backend error becomes Unavailable, so callers can retry.

The lease rules themselves are in the contract tests (tests/contract/test_lease_store.py); these
need no server: a stub client raises what botocore raises, and a real client talks to a closed port.
"""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

from jobrunner.adapters.leases.dynamodb import DynamoDBLeaseStore
from jobrunner.domain.errors import Unavailable

if TYPE_CHECKING:
    from collections.abc import Callable

    from jobrunner.ports import LeaseStore

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
BUCKET = datetime(2026, 11, 22, 10, 1, tzinfo=UTC)
TABLE = "heartbeats"

#: Every method of the port, called once.
CALLS: dict[str, Callable[[LeaseStore], object]] = {
    "acquire": lambda s: s.acquire(0, BUCKET, "a", T0, 30),
    "renew": lambda s: s.renew(0, BUCKET, "a", T0, 30),
    "mark_done": lambda s: s.mark_done(0, BUCKET, "a", T0, 1),
    "segments": lambda s: s.segments([0, 1]),
    "partitions": lambda s: s.partitions([(0, BUCKET)]),
    "advance_watermark": lambda s: s.advance_watermark(0, BUCKET),
    "beat": lambda s: s.beat(0, "a", T0, 1),
    "park": lambda s: s.park(0, [BUCKET]),
    "unpark": lambda s: s.unpark(0, [BUCKET]),
    "record_segment_count": lambda s: s.record_segment_count(16),
}


def _client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "UpdateItem")


ERRORS: dict[str, Exception] = {
    "throttled": _client_error("ProvisionedThroughputExceededException"),
    "throttled-requests": _client_error("ThrottlingException"),
    "internal": _client_error("InternalServerError"),
    "no-table": _client_error("ResourceNotFoundException"),
    "refused": EndpointConnectionError(endpoint_url="http://dynamodb"),
    "connect-timeout": ConnectTimeoutError(endpoint_url="http://dynamodb"),
    "read-timeout": ReadTimeoutError(endpoint_url="http://dynamodb"),
}


class FailingClient:
    """A DynamoDB client whose every operation raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __getattr__(self, operation: str) -> Callable[..., Any]:
        def fail(**_: Any) -> Any:
            raise self.error

        return fail


@pytest.mark.parametrize("error", ERRORS.values(), ids=ERRORS.keys())
@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_every_backend_error_of_every_method_raises_unavailable(
    call: Callable[[LeaseStore], object], error: Exception
) -> None:
    store = DynamoDBLeaseStore(TABLE, FailingClient(error))
    with pytest.raises(Unavailable) as raised:
        call(store)
    assert raised.value.__cause__ is error


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_an_unreachable_endpoint_raises_unavailable(call: Callable[[LeaseStore], object]) -> None:
    # A real botocore client, on a port where nothing listens (no retries, so the test is quick)
    client = boto3.client(
        "dynamodb", region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{_closed_port()}",
        aws_access_key_id="testing", aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=1, read_timeout=1),
    )
    with pytest.raises(Unavailable):
        call(DynamoDBLeaseStore(TABLE, client))


class UnprocessedClient:
    """BatchGetItem that leaves every key unprocessed for its first ``stubborn`` calls (throttling)."""

    def __init__(self, stubborn: int) -> None:
        self.stubborn = stubborn
        self.calls = 0

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        assert self.calls <= 50, "batch_get_item retried without end"
        keys = RequestItems[TABLE]["Keys"]
        if self.calls <= self.stubborn:
            return {"Responses": {TABLE: []}, "UnprocessedKeys": {TABLE: {"Keys": keys}}}
        items = [{**key, "watermark": {"N": "0"}} for key in keys]
        return {"Responses": {TABLE: items}, "UnprocessedKeys": {}}


def test_keys_left_unprocessed_are_retried_with_backoff() -> None:
    client = UnprocessedClient(stubborn=3)
    pauses: list[float] = []
    store = DynamoDBLeaseStore(TABLE, client, sleep=pauses.append)
    assert [s.segment for s in store.segments([0, 1])] == [0, 1]
    assert client.calls == 4
    assert len(pauses) == 3 and pauses == sorted(pauses) and pauses[0] > 0


def test_keys_left_unprocessed_for_too_long_raise_unavailable() -> None:
    client = UnprocessedClient(stubborn=10**6)
    store = DynamoDBLeaseStore(TABLE, client, sleep=lambda _: None)
    with pytest.raises(Unavailable):
        store.segments([0, 1])
    assert client.calls < 50
