"""End to end over HTTP on real Cassandra, Kafka and moto: submit, tick, scan, publish, history."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
import requests

from devstack import tokens
from jobrunner.adapters.stores.codec import JOB_SHARDS
from jobrunner.domain.schedules import parse_instant
from jobrunner.domain.time import to_epoch_ms
from tests.support.kafka_watch import Received, TopicWatch
from tests.support.stack_api import api, eventually

if TYPE_CHECKING:
    from collections.abc import Iterator

    from devstack.stack import LocalStack

pytestmark = pytest.mark.e2e

#: How late a message may be on a loaded CI machine; precision itself is measured by `make bench`.
TOLERANCE_MS = 2500


@pytest.fixture
def jobs_topic(local_stack: LocalStack) -> Iterator[TopicWatch]:
    watch = TopicWatch(local_stack.settings.kafka.bootstrap, "jobs")
    yield watch
    watch.close()


def for_job(job_id: str) -> Any:
    return lambda received: [m for m in received if m.key == job_id]


def test_one_time_and_recurring_jobs_are_published_at_their_due_second(
    local_stack: LocalStack, jobs_topic: TopicWatch
) -> None:
    # Given a one-time job due a few seconds ahead, on a whole second, and a job every minute
    due = (datetime.now(UTC) + timedelta(seconds=6)).replace(microsecond=0)
    once = api(local_stack, "POST", "/jobs", {"schedule": {"at": due.isoformat()}, "payload": {"kind": "once"}})
    every = api(local_stack, "POST", "/jobs", {"schedule": {"every": "PT1M"}, "payload": {"kind": "every"}})
    assert once.status_code == 201, once.text
    assert every.status_code == 201, every.text
    once_id, every_id = once.json()["job_id"], every.json()["job_id"]
    every_first = parse_instant(every.json()["next_run_at"], "next_run_at")
    assert once.json()["status"] == "SCHEDULED"
    assert parse_instant(once.json()["next_run_at"], "next_run_at") == due

    # When the minute ticks pass, Then each execution arrives on `jobs` at its due instant
    received = jobs_topic.wait_for(lambda r: for_job(once_id)(r) and for_job(every_id)(r), timeout_s=150)
    [once_msg] = for_job(once_id)(received)
    [every_msg] = for_job(every_id)(received)[:1]
    assert_on_time(once_msg, due)
    assert_on_time(every_msg, every_first)

    # And the message follows the contract
    assert set(once_msg.value) >= {"execution_id", "job_id", "user_id", "scheduled_at", "attempt", "payload"}
    assert once_msg.value["job_id"] == once_id and once_msg.value["user_id"] == local_stack.tenant
    assert once_msg.value["payload"] == {"kind": "once"} and once_msg.value["attempt"] == 1
    assert once_msg.value["scheduled_at"] == due.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    trace = once_msg.headers.pop("traceparent")
    assert once_msg.headers == {"execution_id": once_msg.value["execution_id"],
                                "scheduled_at": once_msg.value["scheduled_at"], "attempt": "1"}
    assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", trace)  # a child of the submit's trace

    # And a history row is written; the example worker then reports the execution done
    expected = [(once_msg.value["execution_id"], "SUCCESS", 1)]
    history = eventually(
        lambda: [(h["execution_id"], h["status"], h["attempt"])
                 for h in api(local_stack, "GET", f"/jobs/{once_id}/executions").json()["items"]],
        expected,
    )
    assert history == expected
    assert api(local_stack, "GET", f"/jobs/{once_id}").json()["status"] == "SUCCESS"
    # And the recurring job is planned a minute later
    job = api(local_stack, "GET", f"/jobs/{every_id}").json()
    assert parse_instant(job["next_run_at"], "next_run_at") == every_first + timedelta(minutes=1)
    assert job["last_execution_id"] == every_msg.value["execution_id"]


def assert_on_time(message: Received, due: datetime) -> None:
    late_ms = message.timestamp_ms - to_epoch_ms(due)
    assert 0 <= late_ms <= TOLERANCE_MS, f"published {late_ms} ms after its due instant"


@pytest.mark.parametrize(
    ("body", "raw", "status", "field"),
    [
        ({"payload": {}}, None, 422, "schedule"),
        ({"schedule": {"every": "PT1X"}}, None, 422, "schedule.every"),
        ({"schedule": {"every": "PT1M"}, "colour": "red"}, None, 422, "colour"),
        ({"schedule": {"every": "PT1M", "cron": "* * * * *"}}, None, 422, "schedule"),
        ({"schedule": {"at": "tomorrow"}}, None, 422, "schedule.at"),
        (None, '{"schedule": {"every": "PT1M"}, "payload": {not json}}', 400, "body"),
    ],
)
def test_bad_requests_name_the_field_and_write_nothing(
    local_stack: LocalStack, cassandra_session: Any, body: Any, raw: str | None, status: int, field: str
) -> None:
    # Given a tenant of its own, so that anything written would be this request's doing
    tenant = f"bad-input-{uuid.uuid4().hex[:8]}"
    token = tokens.add(tenant)
    response = requests.post(local_stack.url + "/jobs", json=body if raw is None else None, data=raw, timeout=10,
                             headers={"Authorization": f"Bearer {token}", "content-type": "application/json"})
    assert response.status_code == status, response.text
    assert field in [e["field"] for e in response.json()["errors"]]
    jobs = sum(cassandra_session.execute("SELECT count(*) FROM job_table_v2 WHERE user_id = %s AND shard = %s",
                                         (tenant, shard)).one()[0] for shard in range(JOB_SHARDS))
    rows = [r for r in cassandra_session.execute("SELECT user_id FROM task_schedule_v2") if r.user_id == tenant]
    assert (jobs, rows) == (0, [])


def test_requests_without_a_token_are_refused(local_stack: LocalStack) -> None:
    response = requests.post(local_stack.url + "/jobs", json={"schedule": {"every": "PT1M"}}, timeout=10)
    assert response.status_code == 401
    assert requests.get(local_stack.url + "/health", timeout=10).json() == {"status": "ok"}
