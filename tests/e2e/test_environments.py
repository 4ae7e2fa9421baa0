"""The local stack with warm environment processes (devstack/environments.py), on the real servers."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
import requests

from devstack.stack import LocalStack, local_settings
from tests.support.stack_api import api, eventually

if TYPE_CHECKING:
    from collections.abc import Iterator

    from devstack import servers

pytestmark = pytest.mark.e2e


@pytest.fixture
def stack(endpoints: servers.Endpoints) -> Iterator[LocalStack]:
    """A stack of its own (keyspace, heartbeat table, topics), with two environments beside its process."""
    run = uuid.uuid4().hex[:8]
    settings = local_settings(
        endpoints, keyspace=f"jr_envs_{run}", heartbeat_table=f"jobrunner-heartbeats-envs-{run}",
        topic=f"envs-{run}", results_topic=f"envs-results-{run}", segments=4, wake_scans=True,
    )
    stack = LocalStack(settings, port=0, tenant=f"envs-{run}", environments=2).start()
    try:
        yield stack
    finally:
        stack.stop()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_scans_run_and_the_api_answers_in_the_environments(stack: LocalStack) -> None:
    # Given a stack whose scans run in two environment processes
    environments = stack._environments
    assert environments is not None and environments.alive() == 2
    # When a job is submitted due in a few seconds
    due = (datetime.now(UTC) + timedelta(seconds=4)).replace(microsecond=0)
    created = api(stack, "POST", "/jobs", {"schedule": {"at": due.isoformat()}, "payload": {"n": 1}})
    assert created.status_code == 201, created.text
    job_id = created.json()["job_id"]
    # Then a scan in an environment publishes it and the example worker's result is recorded
    job = eventually(lambda: api(stack, "GET", f"/jobs/{job_id}").json(), lambda j: j["status"] == "SUCCESS",
                     timeout_s=120)
    assert job["status"] == "SUCCESS"
    # and once the stack's own server stops listening, the environments still answer on the same port
    stack.server.shutdown()
    stack.server.server_close()
    answers = [api(stack, "GET", f"/jobs/{job_id}") for _ in range(5)]
    assert [a.status_code for a in answers] == [200] * 5
    assert answers[-1].json()["status"] == "SUCCESS"


def test_stopping_the_stack_stops_its_environments(stack: LocalStack) -> None:
    environments = stack._environments
    assert environments is not None
    pids = [pid for pid in environments.pids if pid is not None]
    assert len(pids) == 2
    stack.stop()
    assert environments.alive() == 0
    assert [pid for pid in pids if _running(pid)] == []
    with pytest.raises(requests.ConnectionError):
        requests.get(stack.url + "/health", timeout=2)


def test_a_stack_started_and_stopped_beside_another_gives_the_process_back_to_it(
        local_stack: LocalStack, stack: LocalStack) -> None:
    # Given the session's stack, and a second one started beside it in the same process (the fixture)
    from jobrunner import wiring

    assert wiring.container() is stack.container
    # When the second one stops
    stack.stop()
    # Then the handlers of the process serve the first one again: its settings, its keyspace
    assert wiring.container() is local_stack.container
    job = api(local_stack, "POST", "/jobs", {"schedule": {"every": "PT1H"}, "payload": {}})
    assert job.status_code == 201, job.text
    assert api(local_stack, "GET", f"/jobs/{job.json()['job_id']}").status_code == 200
