"""Two tenants on the real local stack: everything one tenant can name of another's is refused with the
documented status, and changes nothing. (Results: test_results_auth.py; a result with another
execution's token is refused the same way whatever tenant that execution belongs to.)"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from devstack import tokens
from tests.conftest import team
from tests.support.kafka_watch import TopicWatch
from tests.support.stack_api import api

if TYPE_CHECKING:
    from collections.abc import Iterator

    from devstack.stack import LocalStack

pytestmark = pytest.mark.e2e


@pytest.fixture
def teams(local_stack: LocalStack, run_id: str) -> tuple[str, str]:
    return team("a", run_id), team("b", run_id)


@pytest.fixture
def team_a_topic(local_stack: LocalStack, teams: tuple[str, str]) -> Iterator[TopicWatch]:
    watch = TopicWatch(local_stack.settings.kafka.bootstrap, teams[0])
    yield watch
    watch.close()


def as_tenant(stack: LocalStack, tenant: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    response = api(stack, method, path, body, token=tokens.token_for(tenant))
    return response.status_code, response.json()


def test_another_tenants_jobs_cannot_be_read_changed_run_or_listed(
    local_stack: LocalStack, teams: tuple[str, str]
) -> None:
    a, b = teams
    # Given a job of team A (hourly, so that nothing fires during the test) and one of team B
    status, job = as_tenant(local_stack, a, "POST", "/jobs", {"schedule": {"every": "PT1H"}, "payload": {"n": 1}})
    assert status == 201, job
    own = [as_tenant(local_stack, b, "POST", "/jobs", {"schedule": {"every": "PT1H"}})[1]["job_id"]
           for _ in range(3)]
    path = f"/jobs/{job['job_id']}"
    # When team B names A's job in every route that takes a job id
    attempts = [("GET", path, None), ("GET", f"{path}?preview=3", None), ("GET", f"{path}/executions", None),
                ("PATCH", path, {"payload": {"n": 666}}), ("POST", f"{path}/pause", None),
                ("POST", f"{path}/resume", None), ("POST", f"{path}/run", None), ("DELETE", path, None)]
    answers = [(method, route, *as_tenant(local_stack, b, method, route, body)[:1]) for method, route, body in attempts]
    # Then every one is 404, as for a job that does not exist (ids do not leak), and A's job is as it was
    assert answers == [(method, route, 404) for method, route, _ in attempts]
    status, after = as_tenant(local_stack, a, "GET", path)
    assert (status, after) == (200, job)
    status, history = as_tenant(local_stack, a, "GET", f"{path}/executions")
    assert (status, history["items"]) == (200, [])
    # and B's listing, followed page by page, even from a cursor of A's listing, holds only B's jobs
    status, page = as_tenant(local_stack, a, "GET", "/jobs?limit=1")
    assert status == 200 and page["items"]
    seen = []
    for cursor in (None, page["next_cursor"]):
        query = "/jobs?limit=2" + (f"&cursor={cursor}" if cursor else "")
        while query:
            status, listed = as_tenant(local_stack, b, "GET", query)
            assert status == 200, listed
            seen += [j["job_id"] for j in listed["items"]]
            query = f"/jobs?limit=2&cursor={listed['next_cursor']}" if listed["next_cursor"] else ""
    assert job["job_id"] not in seen and set(seen) <= set(own)


def test_topics_are_granted_per_tenant(
    local_stack: LocalStack, teams: tuple[str, str], team_a_topic: TopicWatch
) -> None:
    a, b = teams
    soon = (datetime.now(UTC) + timedelta(seconds=3)).isoformat()
    # When team B names team A's topic, on submit and on change
    status, refused = as_tenant(local_stack, b, "POST", "/jobs", {"schedule": {"at": soon}, "topic": a})
    # Then it is refused 403 naming the topic and the topics B may use, and nothing is stored for B
    assert (status, refused["error"]) == (403, "forbidden")
    assert refused["errors"] == [{"field": "topic", "reason": f"'{a}' is not granted to this tenant; granted: ['{b}']"}]
    _, listed = as_tenant(local_stack, b, "GET", "/jobs?limit=500")
    before = {j["job_id"] for j in listed["items"]}
    status, job_b = as_tenant(local_stack, b, "POST", "/jobs", {"schedule": {"every": "PT1H"}})
    assert (status, job_b["topic"]) == (201, b)  # B's default: its own first topic, not the shared jobs
    assert as_tenant(local_stack, b, "PATCH", f"/jobs/{job_b['job_id']}", {"topic": a})[0] == 403
    assert as_tenant(local_stack, b, "GET", f"/jobs/{job_b['job_id']}")[1]["topic"] == b
    _, listed = as_tenant(local_stack, b, "GET", "/jobs?limit=500")
    assert {j["job_id"] for j in listed["items"]} - before == {job_b["job_id"]}
    # and a tenant with no grant of its own may name only the shared topic
    stranger = f"stranger-{a}"
    assert as_tenant(local_stack, stranger, "POST", "/jobs", {"schedule": {"at": soon}, "topic": a})[0] == 403
    # while team A's job on its own topic is published there
    status, job_a = as_tenant(local_stack, a, "POST", "/jobs", {"schedule": {"at": soon}, "topic": a})
    assert status == 201, job_a
    team_a_topic.wait_for(lambda records: any(r.key == job_a["job_id"] for r in records), timeout_s=60)


def test_segments_are_for_operators_only(local_stack: LocalStack, teams: tuple[str, str]) -> None:
    status, body = as_tenant(local_stack, teams[1], "GET", "/segments")
    assert (status, body["error"]) == (403, "forbidden")
    assert "items" not in body
    # the stack's own tenant is its operator (JOBRUNNER_OPERATORS): it sees every segment
    response = api(local_stack, "GET", "/segments")
    assert response.status_code == 200
    assert len(response.json()["items"]) >= local_stack.settings.segments


def test_parallel_submissions_never_pass_a_tenants_rate(local_stack: LocalStack, run_id: str) -> None:
    # Given a tenant limited to 5 submissions a second
    tenant = team("limited", run_id)
    token = tokens.token_for(tenant)
    body = {"schedule": {"every": "PT1H"}}

    def submit(_: int) -> tuple[int, Any, str | None]:
        response = api(local_stack, "POST", "/jobs", body, token=token)
        return response.status_code, response.json(), response.headers.get("Retry-After")

    # When 8 clients send 60 submissions as fast as they can
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(submit, range(60)))
    # Then each is 201 or 429, no second admitted more than 5, and each 429 names the limit and when to retry
    assert {status for status, _, _ in answers} <= {201, 429}
    per_second = Counter(job["created_at"][:19] for status, job, _ in answers if status == 201)
    assert per_second and max(per_second.values()) <= 5, per_second
    refused = [(job, retry) for status, job, retry in answers if status == 429]
    assert refused, "60 submissions in a few seconds must meet the limit"
    assert all(retry == "1" and job["errors"] == [{"field": "submissions_per_second",
                                                    "reason": "this tenant may submit at most 5 jobs a second"}]
               for job, retry in refused)
    # and exactly the admitted jobs exist
    _, listed = as_tenant(local_stack, tenant, "GET", "/jobs?limit=500")
    assert len(listed["items"]) == sum(per_second.values())


def test_jobs_held_and_executions_a_minute_are_limited_and_parallel_submits_never_pass_them(
    local_stack: LocalStack, run_id: str
) -> None:
    # Given a tenant that may hold 3 recurring jobs and have 20 executions due in one minute
    tenant = team("held", run_id)
    hourly = {"schedule": {"every": "PT1H"}}
    held = [as_tenant(local_stack, tenant, "POST", "/jobs", hourly) for _ in range(3)]
    assert [status for status, _ in held] == [201] * 3
    # When it submits a fourth recurring job
    response = api(local_stack, "POST", "/jobs", hourly, token=tokens.token_for(tenant))
    # Then it is refused with 429, naming the limit, and written nowhere
    assert (response.status_code, response.headers.get("Retry-After")) == (429, "60")
    assert response.json()["errors"] == [{"field": "jobs_held", "reason": (
        "this tenant may hold at most 3 recurring jobs; cancel one first")}]
    _, listed = as_tenant(local_stack, tenant, "GET", "/jobs?limit=500")
    assert len(listed["items"]) == 3
    # and a cancel makes room for one
    assert as_tenant(local_stack, tenant, "DELETE", f"/jobs/{held[0][1]['job_id']}")[0] == 200
    assert as_tenant(local_stack, tenant, "POST", "/jobs", hourly)[0] == 201
    assert as_tenant(local_stack, tenant, "POST", "/jobs", hourly)[0] == 429

    # When 8 clients race 30 one-time jobs due in one minute, beside the 3 hourly jobs' reservations
    due = (datetime.now(UTC) + timedelta(hours=2)).replace(second=30, microsecond=0)
    minute = due.strftime("%Y-%m-%dT%H:%MZ")
    once = {"schedule": {"at": due.isoformat()}}
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: as_tenant(local_stack, tenant, "POST", "/jobs", once), range(30)))
    # Then exactly the 17 places left are taken, every other one is refused naming the full minute
    assert Counter(status for status, _ in answers) == {201: 17, 429: 13}
    assert all(body["errors"][0]["field"] == "executions_per_minute" and minute in body["errors"][0]["reason"]
               for status, body in answers if status == 429)
    _, listed = as_tenant(local_stack, tenant, "GET", "/jobs?limit=500")
    assert sum("at" in job["schedule"] for job in listed["items"]) == 17
