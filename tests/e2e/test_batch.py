"""POST /jobs/batch end to end on real Cassandra, Kafka and moto: a batch's jobs all run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from tests.support.stack_api import api, eventually

if TYPE_CHECKING:
    from devstack.stack import LocalStack

pytestmark = pytest.mark.e2e


def test_a_batchs_jobs_are_each_created_and_each_run_once(local_stack: LocalStack) -> None:
    # Given 20 one-time jobs due in a few seconds and a recurring one, sent as one batch
    due = (datetime.now(UTC) + timedelta(seconds=5)).replace(microsecond=0).isoformat()
    jobs = [{"schedule": {"at": due}, "payload": {"n": n}} for n in range(20)]
    jobs.append({"schedule": {"every": "PT1H"}, "payload": {"n": 20}})
    answer = api(local_stack, "POST", "/jobs/batch", {"jobs": jobs})
    assert answer.status_code == 201, answer.text
    items = answer.json()["items"]
    assert [item["job"]["payload"] for item in items] == [{"n": n} for n in range(21)]
    assert all(item["created"] for item in items)
    # Then each one-time job runs once and is recorded SUCCESS by the example worker's result
    for item in items[:20]:
        job_id = item["job"]["job_id"]
        job = eventually(lambda job_id=job_id: api(local_stack, "GET", f"/jobs/{job_id}").json(),
                         lambda j: j["status"] == "SUCCESS", timeout_s=120)
        assert job["status"] == "SUCCESS", job
        runs = api(local_stack, "GET", f"/jobs/{job_id}/executions").json()["items"]
        assert [r["status"] for r in runs] == ["SUCCESS"]
    # and the recurring one is scheduled an hour ahead
    hourly = api(local_stack, "GET", f"/jobs/{items[20]['job']['job_id']}").json()
    assert hourly["status"] == "SCHEDULED"


def test_a_batch_with_a_wrong_job_creates_none(local_stack: LocalStack) -> None:
    before = api(local_stack, "GET", "/jobs?limit=500").json()
    jobs = [{"schedule": {"every": "PT1H"}}, {"schedule": {"cron": "0 0 30 2 *"}}, {"schedule": {"at": "tomorrow"}}]
    answer = api(local_stack, "POST", "/jobs/batch", {"jobs": jobs})
    assert answer.status_code == 422, answer.text
    assert {e["field"] for e in answer.json()["errors"]} == {"jobs.1.schedule.cron", "jobs.2.schedule.at"}
    assert api(local_stack, "GET", "/jobs?limit=500").json() == before
