"""Shared fixtures. Tests that need servers start them (or reuse running ones); none is ever skipped."""

from __future__ import annotations

import base64
import itertools
import os
import time
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings as hypothesis_settings

from devstack import servers
from devstack.stack import LocalStack, local_settings, use_local_aws_credentials
from tests.chaos.fault_runs import FaultRuns
from tests.support.tls import Certificates

if TYPE_CHECKING:
    from collections.abc import Iterator

    from jobrunner.config import Settings


# Speed is measured by the benchmarks, never by a test: no property-based test fails for taking long, on a
# machine whose cores the fault suites share (below).
hypothesis_settings.register_profile("jobrunner", deadline=None)
hypothesis_settings.load_profile("jobrunner")

_FAULT_SUITES = pytest.StashKey[bool]()


def _phase(item: pytest.Item) -> int:
    """0: needs the whole machine (an end-to-end test timing its fires, or a test marked ``solo`` timing a call);
    1: needs the tests' servers; 2: needs none; 3: judges a fault suite's small run (``fault_suite``). The fault
    suites' runs start with phase 1: from there on, what a test checks does not depend on how fast it goes."""
    if item.get_closest_marker("fault_suite"):
        return 3
    if item.get_closest_marker("e2e") or item.get_closest_marker("solo"):
        return 0
    return 1 if item.get_closest_marker("integration") else 2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The end-to-end tests (and the ``solo`` ones) first, alone on the machine; then, while the fault suites' small
    runs go on in the background on servers of their own (``tests/chaos/fault_runs.py``), the other tests on the
    tests' servers and those that need none; the fault suites' judges last. Within each phase the usual order."""
    items.sort(key=_phase)
    config.stash[_FAULT_SUITES] = any(_phase(item) == 3 for item in items)


#: The session's local stack while it runs (``local_stack``).
_STACKS: list[LocalStack] = []


def _stop_stacks() -> None:
    while _STACKS:
        _STACKS.pop().stop()


#: When each phase's first test began (``time.monotonic``), for the session's summary.
_PHASE_STARTED: dict[int, float] = {}


def pytest_runtest_setup(item: pytest.Item) -> None:
    _PHASE_STARTED.setdefault(_phase(item), time.monotonic())
    if _phase(item) >= 1:
        # The end-to-end tests are over: their stack stops ticking and scanning (8 scans a minute, for the rest of
        # the session, on the servers and cores the other tests and the fault suites share). Only they use it.
        used = getattr(item, "fixturenames", ())
        assert "local_stack" not in used, f"{item.nodeid}: only end-to-end tests use local_stack"
        _stop_stacks()
        if item.config.stash.get(_FAULT_SUITES, False):
            FaultRuns.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    FaultRuns.finish()
    _PHASE_STARTED.setdefault(4, time.monotonic())  # the end


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Where the session's time went: each phase's wall time, and the fault suites' steps beside phases 1 and 2
    (what to trim to keep ``make test`` short)."""
    starts = sorted(_PHASE_STARTED.items())
    names = {0: "end-to-end and solo", 1: "on the tests' servers", 2: "no server", 3: "fault suites' judges"}
    phases = [f"{names[p]} {end - start:.0f} s" for (p, start), (_, end) in itertools.pairwise(starts) if p in names]
    runs = ", ".join(f"{step} {seconds:.0f} s" for step, seconds in FaultRuns.took.items())
    terminalreporter.write_line(f"phases: {'; '.join(phases)}" + (f" (fault suites: {runs})" if runs else ""))


@pytest.fixture(scope="session")
def endpoints() -> servers.Endpoints:
    use_local_aws_credentials()
    return servers.ensure_all()


@pytest.fixture(scope="session")
def run_id() -> str:
    return uuid.uuid4().hex[:10]


#: The account moto serves (its functions' ARNs and queues' URLs name it).
MOTO_ACCOUNT = "123456789012"


@pytest.fixture(scope="session")
def target_certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """A self-signed test root that the stack trusts for HTTPS targets, besides the system's CAs, and that signs
    the certificates of the receivers the end-to-end tests start (tests/e2e/test_targets.py)."""
    return Certificates(tmp_path_factory.mktemp("target-tls"))


@pytest.fixture(scope="session")
def settings(endpoints: servers.Endpoints, run_id: str, target_certificates: Certificates) -> Settings:
    """Settings isolated per test session: own keyspace and heartbeat table, shared servers.

    The targets' settings are the session's, not one test's: a scan holds the settings it started with for its
    whole minute, so a test that changed them would see the scans of the running minute keep the old ones."""
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
        # Targets (tests/e2e/test_targets.py): receivers on loopback with a certificate of the test root, the
        # functions and queues of moto's account, and a tenant whose webhook secret a receiver verifies with.
        target_address_allow=("127.0.0.0/8",), target_ca_bundle=str(target_certificates.bundle),
        target_lambda_allow=(MOTO_ACCOUNT,), target_sqs_allow=(MOTO_ACCOUNT,),
        webhook_secrets={team("hooks", run_id): [f"whsec_{base64.b64encode(os.urandom(24)).decode()}"]},
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
    """The whole system (api over HTTP, ticker, scans) on the real servers, on a free port, for the end-to-end
    tests (stopped once they are over: ``pytest_runtest_setup``)."""
    stack = LocalStack(settings, port=0, tenant=f"tenant-{uuid.uuid4().hex[:8]}").start()
    _STACKS.append(stack)
    yield stack
    _stop_stacks()  # unless the first test after the end-to-end ones stopped it
