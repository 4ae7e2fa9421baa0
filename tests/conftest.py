"""Shared fixtures. Tests that need servers start them (or reuse running ones); none is ever skipped."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pytest

from devstack import servers
from devstack.stack import LocalStack, local_settings, use_local_aws_credentials

if TYPE_CHECKING:
    from collections.abc import Iterator

    from jobrunner.config import Settings


@pytest.fixture(scope="session")
def endpoints() -> servers.Endpoints:
    use_local_aws_credentials()
    return servers.ensure_all()


@pytest.fixture(scope="session")
def run_id() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture(scope="session")
def settings(endpoints: servers.Endpoints, run_id: str) -> Settings:
    """Settings isolated per test session: own keyspace and heartbeat table, shared servers."""
    return local_settings(
        endpoints,
        keyspace=f"jr_test_{run_id}",
        heartbeat_table=f"jobrunner-heartbeats-{run_id}",
        segments=4,
        # Two tenants with topics of their own (tests/e2e/test_tenants.py); every other tenant names jobs only.
        tenant_topics={"*": ["jobs"], team("a", run_id): [team("a", run_id), "jobs"],
                       team("b", run_id): [team("b", run_id)]},
        # Tenants with limits of their own (tests/e2e/test_tenants.py); the others have none, but with a
        # standing limit set for one, every tenant's jobs are counted.
        tenant_limit_table={team("limited", run_id): {"submissions_per_second": 5},
                            team("held", run_id): {"jobs_held": 3, "executions_per_minute": 20}},
    )


def team(name: str, run_id: str) -> str:
    """A tenant of the end-to-end tests that has a topic of the same name granted to it (and only to it)."""
    return f"team-{name}-{run_id}"


@pytest.fixture(scope="session")
def cassandra_session(settings: Settings) -> Iterator[Any]:
    from cql.migrate import migrate
    from jobrunner.adapters.stores.session import connect

    migrate(settings.cassandra)
    session = connect(settings.cassandra)
    yield session
    session.execute(f"DROP KEYSPACE IF EXISTS {settings.cassandra.keyspace}", timeout=60)
    session.cluster.shutdown()


@pytest.fixture(scope="session")
def dynamodb_client(settings: Settings) -> Any:
    import boto3

    return boto3.client("dynamodb", region_name=settings.region, endpoint_url=settings.dynamodb_endpoint)


@pytest.fixture(scope="session")
def local_stack(settings: Settings, cassandra_session: Any) -> Iterator[LocalStack]:
    """The whole system (api over HTTP, ticker, scans) on the real servers, on a free port."""
    stack = LocalStack(settings, port=0, tenant=f"tenant-{uuid.uuid4().hex[:8]}").start()
    yield stack
    stack.stop()
