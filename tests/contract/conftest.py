"""Backends for the contract tests: every port's in-memory adapter and its real one run the same tests."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.leases.dynamodb import DynamoDBLeaseStore, ensure_table
from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.adapters.quotas.dynamodb import DynamoDBTenantQuotas
from jobrunner.adapters.quotas.dynamodb import ensure_table as ensure_quota_table
from jobrunner.adapters.quotas.memory import MemoryTenantQuotas
from jobrunner.adapters.stores.calendars import CassandraCalendarStore, MemoryCalendarStore
from jobrunner.adapters.stores.cassandra import CassandraJobStore
from jobrunner.adapters.stores.changes import CassandraChangeLog, MemoryChangeLog
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.adapters.webhook_secrets.memory import MemoryWebhookSecrets
from jobrunner.adapters.webhook_secrets.secretsmanager import SecretsManagerWebhookSecrets
from tests.support.buses import kafka_bus, memory_bus
from tests.support.scan_starters import memory_starter, process_starter, thread_starter

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from devstack.servers import Endpoints
    from jobrunner.adapters.webhook_secrets import KeptWebhookSecrets
    from jobrunner.config import Settings
    from jobrunner.ports import CalendarStore, ChangeLog, LeaseStore, Stores, TenantQuotas
    from tests.support.buses import Bus
    from tests.support.scan_starters import Starter


@pytest.fixture(params=["memory", pytest.param("cassandra", marks=pytest.mark.integration)])
def job_store(request: pytest.FixtureRequest) -> Stores:
    if request.param == "memory":
        return MemoryJobStore()
    return CassandraJobStore(request.getfixturevalue("cassandra_session"), page_size=3)


@pytest.fixture(params=["memory", pytest.param("cassandra", marks=pytest.mark.integration)])
def calendar_store(request: pytest.FixtureRequest) -> CalendarStore:
    if request.param == "memory":
        return MemoryCalendarStore()
    return CassandraCalendarStore(request.getfixturevalue("cassandra_session"))


@pytest.fixture(params=["memory", pytest.param("cassandra", marks=pytest.mark.integration)])
def change_log(request: pytest.FixtureRequest) -> ChangeLog:
    if request.param == "memory":
        return MemoryChangeLog()
    return CassandraChangeLog(request.getfixturevalue("cassandra_session"), lambda tenant: 3 * 86_400)


@pytest.fixture(params=["memory", pytest.param("cassandra", marks=pytest.mark.integration)])
def job_store_instances(request: pytest.FixtureRequest) -> Callable[[], Stores]:
    """Makes store instances over the same data, as separate Lambda invocations would each have one.

    In memory the data lives in the instance, so every call returns that one instance.
    """
    if request.param == "memory":
        store = MemoryJobStore()
        return lambda: store
    session = request.getfixturevalue("cassandra_session")
    return lambda: CassandraJobStore(session, page_size=3)


@pytest.fixture(params=["memory", pytest.param("cassandra", marks=pytest.mark.integration)])
def job_store_own_session(request: pytest.FixtureRequest) -> Iterator[Stores]:
    """A store on a session of its own, for tests whose input may break the connection they use."""
    if request.param == "memory":
        yield MemoryJobStore()
        return
    from jobrunner.adapters.stores.session import connect

    request.getfixturevalue("cassandra_session")  # the keyspace exists
    settings: Settings = request.getfixturevalue("settings")
    session = connect(settings.cassandra)
    try:
        yield CassandraJobStore(session, page_size=3)
    finally:
        session.cluster.shutdown()


@pytest.fixture(params=["memory", pytest.param("dynamodb", marks=pytest.mark.integration)])
def lease_store(request: pytest.FixtureRequest) -> LeaseStore:
    if request.param == "memory":
        return MemoryLeaseStore()
    settings: Settings = request.getfixturevalue("settings")
    client: Any = request.getfixturevalue("dynamodb_client")
    table = f"{settings.heartbeat_table}-contract-{uuid.uuid4().hex[:6]}"
    ensure_table(client, table)
    return DynamoDBLeaseStore(table, client)


@pytest.fixture(params=["memory", pytest.param("dynamodb", marks=pytest.mark.integration)])
def tenant_quotas(request: pytest.FixtureRequest) -> TenantQuotas:
    if request.param == "memory":
        return MemoryTenantQuotas()
    settings: Settings = request.getfixturevalue("settings")
    client: Any = request.getfixturevalue("dynamodb_client")
    table = f"{settings.quota_table}-contract-{uuid.uuid4().hex[:6]}"
    ensure_quota_table(client, table)
    return DynamoDBTenantQuotas(table, client)


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.integration)])
def bus(request: pytest.FixtureRequest) -> Iterator[Bus]:
    """A publisher, and a reader of what it delivered (a real consumer on Kafka)."""
    if request.param == "memory":
        yield memory_bus()
        return
    endpoints: Endpoints = request.getfixturevalue("endpoints")
    yield from kafka_bus(endpoints.kafka_bootstrap)


@pytest.fixture(params=["memory", "threads", pytest.param("processes", marks=pytest.mark.integration)])
def scan_starter(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Starter]:
    """An invoker, and the scans it started: recorded (memory), on the local stack's thread pool, or in processes
    of their own running the real scan function on the real servers (the fault suite's)."""
    if request.param == "memory":
        yield memory_starter()
    elif request.param == "threads":
        yield from thread_starter()
    else:
        request.getfixturevalue("cassandra_session")  # the keyspace exists
        settings: Settings = request.getfixturevalue("settings")
        ensure_table(request.getfixturevalue("dynamodb_client"), settings.heartbeat_table)
        yield from process_starter(settings, tmp_path / "scans.log")


@dataclass(frozen=True)
class SecretStores:
    """Webhook secret stores over the same secrets, as the API's and the delivery's processes each have one, and
    the clock they share. In memory the secrets live in the instance, so every call returns that one."""

    clock: ManualClock
    instance: Callable[[], KeptWebhookSecrets]


@pytest.fixture(params=["memory", "secretsmanager"])
def webhook_secret_stores(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[SecretStores]:
    """Secrets Manager is moto's in-process mock (the adapter's calls are plain API calls; no server needed)."""
    clock = ManualClock(datetime(2026, 11, 22, 10, 0, tzinfo=UTC))
    if request.param == "memory":
        memory = MemoryWebhookSecrets(clock=clock)
        yield SecretStores(clock, lambda: memory)
        return
    import boto3
    from moto import mock_aws

    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "eu-west-1"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        client = boto3.client("secretsmanager", region_name="eu-west-1")
        yield SecretStores(clock, lambda: SecretsManagerWebhookSecrets("contract/webhooks/", client, clock))


@pytest.fixture
def lambda_client(settings: Settings) -> Any:
    """Lambda's API on the moto server (which accepts invokes, and runs no function without Docker)."""
    import boto3

    return boto3.client("lambda", region_name=settings.region, endpoint_url=settings.dynamodb_endpoint)
