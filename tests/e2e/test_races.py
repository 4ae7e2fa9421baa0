"""Several clients racing requests on the same jobs, on the real servers (issue #31).

A user with a double-clicking dashboard, a bulk change beside a single one, a client that sends a request
again: requests on one job race each other. Every acknowledged job must keep a readable row for its next run,
whatever the order they land in (docs/reliability.md: never delete what another writer may own). The stack
runs its API in three environment processes (``devstack.environments``), as Lambda runs concurrent requests
in environments of their own: one process answers one request at a time, so racing needs several.
"""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from devstack.stack import LocalStack, local_settings
from jobrunner.adapters.stores.session import connect
from jobrunner.domain.jobs import Trigger, execution_id_for
from jobrunner.domain.schedules import parse_instant
from jobrunner.domain.segments import segment_of
from jobrunner.domain.time import minute_bucket
from tests.support.kafka_watch import TopicWatch
from tests.support.stack_api import api

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from devstack import servers

pytestmark = pytest.mark.e2e

#: Jobs of each kind: a first fire minutes ahead (its row in the planned lane), and every 10 s.
EACH = 8


@pytest.fixture
def stack(endpoints: servers.Endpoints) -> Iterator[LocalStack]:
    """A stack of its own (keyspace, heartbeat table, topics) whose API answers in three processes."""
    run = uuid.uuid4().hex[:8]
    settings = local_settings(
        endpoints, keyspace=f"jr_races_{run}", heartbeat_table=f"jobrunner-heartbeats-races-{run}",
        topic=f"races-{run}", results_topic=f"races-results-{run}", segments=4, wake_scans=True,
    )
    stack = LocalStack(settings, port=0, tenant=f"races-{run}", environments=3).start()
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture
def session(stack: LocalStack) -> Iterator[Any]:
    session = connect(stack.settings.cassandra)
    yield session
    session.cluster.shutdown()


@pytest.fixture
def jobs_topic(stack: LocalStack) -> Iterator[TopicWatch]:
    watch = TopicWatch(stack.settings.kafka.bootstrap, stack.settings.topic)
    yield watch
    watch.close()


def send(stack: LocalStack, method: str, path: str, body: Any = None) -> int:
    """A careful client: a 5xx or no answer is sent again (with the same body) until answered."""
    for _ in range(10):
        try:
            response = api(stack, method, path, body)
        except OSError:
            continue
        if response.status_code < 500:
            return response.status_code
    raise AssertionError(f"{method} {path} kept failing")


def at_once(requests: list[Callable[[], int]]) -> list[int]:
    """Send the requests together: each thread waits at a barrier, then sends (a double click, six of them)."""
    barrier = threading.Barrier(len(requests))

    def go(request: Callable[[], int]) -> int:
        barrier.wait()
        return request()

    with ThreadPoolExecutor(len(requests)) as pool:
        return list(pool.map(go, requests))


def planned_row_exists(stack: LocalStack, session: Any, job: dict[str, Any]) -> bool:
    """Whether the job's next run has a row in its partition, under its execution id."""
    due = parse_instant(job["next_run_at"], "next_run_at")
    rows = session.execute(
        "SELECT execution_id FROM task_schedule_v2 WHERE next_execution_time = %s AND segment = %s",
        (minute_bucket(due), segment_of(job["job_id"], stack.settings.segments)))
    return execution_id_for(job["job_id"], due, 1, Trigger.SCHEDULE) in {row.execution_id for row in rows}


def test_racing_resumes_pauses_and_patches_leave_every_job_a_row_and_firing(
    stack: LocalStack, session: Any, jobs_topic: TopicWatch
) -> None:
    # Given jobs of both kinds, paused
    ahead = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    later = [api(stack, "POST", "/jobs", {"schedule": {"at": ahead}, "payload": {"n": n}}).json()["job_id"]
             for n in range(EACH)]
    every = [api(stack, "POST", "/jobs", {"schedule": {"every": "PT10S"}, "payload": {"n": n}}).json()["job_id"]
             for n in range(EACH)]
    for job_id in later + every:
        assert send(stack, "POST", f"/jobs/{job_id}/pause") == 200
    # When six resumes of each paused job are sent at once (a double click, six times over)
    answers = at_once([lambda j=job_id: send(stack, "POST", f"/jobs/{j}/resume")  # type: ignore[misc]
                       for job_id in later + every for _ in range(6)])
    # and each job every 10 s gets a PATCH racing a pause, then four more resumes at once
    answers += at_once([request for job_id in every for request in (
        lambda j=job_id: send(stack, "PATCH", f"/jobs/{j}", {"payload": {"patched": True}}),  # type: ignore[misc]
        lambda j=job_id: send(stack, "POST", f"/jobs/{j}/pause"))])  # type: ignore[misc]
    answers += at_once([lambda j=job_id: send(stack, "POST", f"/jobs/{j}/resume")  # type: ignore[misc]
                        for job_id in every for _ in range(4)])
    assert set(answers) <= {200, 409}, answers  # answered, or refused as racing another (409): never lost
    # Then every job is active, and each one whose fire is minutes ahead has its row, under its execution id
    jobs = {job_id: api(stack, "GET", f"/jobs/{job_id}").json() for job_id in later + every}
    assert {job["state"] for job in jobs.values()} == {"ACTIVE"}
    orphans = [job_id for job_id in later if not planned_row_exists(stack, session, jobs[job_id])]
    assert orphans == [], f"{len(orphans)} of {EACH} jobs acknowledged ACTIVE have no row for their next run"
    # and every job every 10 s fires again within half a minute (its next_run_at never left in the past)
    since = datetime.now(UTC)
    fired = jobs_topic.wait_for(lambda got: set(every) <= {m.key for m in got
                                                           if parse_instant(m.value["scheduled_at"], "at") > since},
                                timeout_s=40)
    silent = set(every) - {m.key for m in fired if parse_instant(m.value["scheduled_at"], "at") > since}
    assert silent == set(), f"{len(silent)} of {EACH} jobs every 10 s stopped firing"
