"""The job lifecycle end to end on the real servers: retries, dead letters, cancel, pause, resume, manual runs."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import pytest

from devstack import tokens
from jobrunner.domain.schedules import parse_instant
from tests.support.kafka_watch import TopicWatch
from tests.support.stack_api import api, eventually

if TYPE_CHECKING:
    from collections.abc import Iterator

    from devstack.stack import LocalStack

pytestmark = pytest.mark.e2e


@pytest.fixture
def dead_letters(local_stack: LocalStack) -> Iterator[TopicWatch]:
    watch = TopicWatch(local_stack.settings.kafka.bootstrap, "job-dlq")
    yield watch
    watch.close()


@pytest.fixture
def jobs_topic(local_stack: LocalStack) -> Iterator[TopicWatch]:
    watch = TopicWatch(local_stack.settings.kafka.bootstrap, "jobs")
    yield watch
    watch.close()


def soon(seconds: float = 3) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


def submit(stack: LocalStack, body: dict[str, Any]) -> dict[str, Any]:
    response = api(stack, "POST", "/jobs", body)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def executions(stack: LocalStack, job_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = api(stack, "GET", f"/jobs/{job_id}/executions").json()["items"]
    return sorted(items, key=lambda e: e["attempt"])


def test_a_job_that_fails_twice_then_succeeds_shows_three_attempts_with_backoff(local_stack: LocalStack) -> None:
    # Given a job the example worker fails on attempts 1 and 2, with retries backing off from 2 s
    job = submit(local_stack, {
        "schedule": {"at": soon()}, "payload": {"type": "flaky", "fail_attempts": 2},
        "max_retries": 3, "backoff": {"initial_delay_s": 2, "multiplier": 2, "max_delay_s": 60},
    })
    # When it runs, Then its executions end as FAILED, FAILED, SUCCESS
    history = eventually(lambda: executions(local_stack, job["job_id"]),
                         lambda h: [e["status"] for e in h] == ["FAILED", "FAILED", "SUCCESS"], timeout_s=90)
    assert [(e["attempt"], e["status"], e["trigger"]) for e in history] == [
        (1, "FAILED", "SCHEDULE"), (2, "FAILED", "RETRY"), (3, "SUCCESS", "RETRY")
    ]
    assert "flaky failure on attempt 1" in history[0]["error"]
    # And the retries waited at least half their base delay (2 s, then 4 s: equal jitter)
    published = [parse_instant(e["published_at"], "published_at") for e in history]
    assert published[1] - published[0] >= timedelta(seconds=1)
    assert published[2] - published[1] >= timedelta(seconds=2)
    assert api(local_stack, "GET", f"/jobs/{job['job_id']}").json()["status"] == "SUCCESS"


def test_a_job_that_always_fails_is_dead_lettered_after_its_retries(
    local_stack: LocalStack, dead_letters: TopicWatch
) -> None:
    job = submit(local_stack, {
        "schedule": {"at": soon()}, "payload": {"type": "fail"}, "max_retries": 1,
        "backoff": {"initial_delay_s": 1, "multiplier": 1, "max_delay_s": 1},
    })
    received = dead_letters.wait_for(lambda r: any(m.key == job["job_id"] for m in r), timeout_s=90)
    [letter] = [m for m in received if m.key == job["job_id"]]
    assert letter.value["attempt"] == 2 and "always fails" in letter.value["error"]
    assert letter.value["payload"] == {"type": "fail"}
    history = eventually(lambda: executions(local_stack, job["job_id"]),
                         lambda h: [e["status"] for e in h] == ["FAILED", "FAILED"])
    assert [e["status"] for e in history] == ["FAILED", "FAILED"]
    assert api(local_stack, "GET", f"/jobs/{job['job_id']}").json()["status"] == "FAILED"


def test_cancel_stops_every_further_execution(local_stack: LocalStack, jobs_topic: TopicWatch) -> None:
    # Given a recurring job every 10 s that has run at least once
    job = submit(local_stack, {"schedule": {"every": "PT10S", "start": soon(2)}})
    jobs_topic.wait_for(lambda r: any(m.key == job["job_id"] for m in r), timeout_s=60)
    # When it is cancelled
    cancelled = api(local_stack, "DELETE", f"/jobs/{job['job_id']}").json()
    cancelled_at = datetime.now(UTC)
    assert (cancelled["status"], cancelled["next_run_at"]) == ("CANCELLED", None)
    # Then nothing more is published for it (its next run was already planned in a partition)
    jobs_topic.wait_for(lambda r: False, timeout_s=22)
    after = [m for m in jobs_topic.received
             if m.key == job["job_id"] and m.timestamp_ms > cancelled_at.timestamp() * 1000]
    assert after == []
    assert api(local_stack, "POST", f"/jobs/{job['job_id']}/run").status_code == 409


def test_pause_holds_and_resume_continues_without_a_backlog(local_stack: LocalStack, jobs_topic: TopicWatch) -> None:
    job = submit(local_stack, {"schedule": {"every": "PT10S", "start": soon(30)}})
    paused = api(local_stack, "POST", f"/jobs/{job['job_id']}/pause").json()
    assert (paused["status"], paused["next_run_at"]) == ("PAUSED", None)
    # While paused, the run planned for +30 s is dropped; a manual run still goes through
    run = api(local_stack, "POST", f"/jobs/{job['job_id']}/run")
    assert run.status_code == 202 and run.json()["trigger"] == "MANUAL"
    received = jobs_topic.wait_for(lambda r: any(m.key == job["job_id"] for m in r), timeout_s=30)
    assert [m.value["trigger"] for m in received if m.key == job["job_id"]] == ["MANUAL"]
    eventually(lambda: [e["status"] for e in executions(local_stack, job["job_id"])], ["SUCCESS"])
    # When resumed, the next run is the first fire after now, not a burst of the missed ones
    resumed = api(local_stack, "POST", f"/jobs/{job['job_id']}/resume").json()
    next_run = parse_instant(resumed["next_run_at"], "next_run_at")
    assert resumed["status"] == "SCHEDULED"
    assert datetime.now(UTC) - timedelta(seconds=1) < next_run <= datetime.now(UTC) + timedelta(seconds=41)


def test_another_tenant_cannot_see_or_touch_a_job(local_stack: LocalStack) -> None:
    job = submit(local_stack, {"schedule": {"every": "PT1H"}})
    stranger = tokens.add("stranger")
    for method, path in [("GET", ""), ("GET", "/executions"), ("DELETE", ""), ("POST", "/pause"),
                         ("POST", "/resume"), ("POST", "/run"), ("PATCH", "")]:
        body = {"payload": {"x": 1}} if method == "PATCH" else None
        response = api(local_stack, method, f"/jobs/{job['job_id']}{path}", body, token=stranger)
        assert response.status_code == 404, (method, path, response.text)
    assert api(local_stack, "GET", "/jobs", token=stranger).json()["items"] == []
    assert api(local_stack, "GET", f"/jobs/{job['job_id']}").json()["status"] == "SCHEDULED"


def test_jittered_jobs_sharing_a_fire_are_due_at_their_own_offsets_and_a_dst_policy_is_kept(
    local_stack: LocalStack,
) -> None:
    # Given three jobs with the same fire a few seconds ahead, each with a 4 s jitter window
    fire = (datetime.now(UTC) + timedelta(seconds=5)).replace(microsecond=0)
    jobs = [submit(local_stack, {"schedule": {"at": fire.isoformat()}, "jitter_s": 4}) for _ in range(3)]
    assert all(job["jitter_s"] == 4 for job in jobs)
    # When they run, Then each is recorded for that fire, due within its window, and published after it
    for job in jobs:
        [record] = eventually(lambda job=job: executions(local_stack, job["job_id"]),
                              lambda h: [e["status"] for e in h] == ["SUCCESS"], timeout_s=60)
        scheduled, due = (parse_instant(record[k], k) for k in ("scheduled_at", "due_at"))
        published = parse_instant(record["published_at"], "published_at")
        assert scheduled == fire and fire <= due < fire + timedelta(seconds=4) and published >= due, record
    # and no two of them are due at the same instant
    dues = {executions(local_stack, job["job_id"])[0]["due_at"] for job in jobs}
    assert len(dues) == 3
    # And a cron's daylight-saving policy is stored and returned with its schedule
    cron = submit(local_stack, {"schedule": {"cron": "30 2 31 10 *", "timezone": "Europe/Paris",
                                             "dst": {"fold": "second"}}})
    shown = api(local_stack, "GET", f"/jobs/{cron['job_id']}?preview=1").json()
    assert shown["schedule"]["dst"] == {"gap": "shift", "fold": "second"}
    assert shown["next_runs"][0].endswith("T01:30:00.000Z")  # 02:30 CET, the second 02:30 of the night


def test_jobs_are_listed_and_paused_in_bulk_by_tag_on_the_real_store(local_stack: LocalStack) -> None:
    # Given three jobs tagged with this run's team, one of them a cron, and one job of another team
    team = f"team-{datetime.now(UTC):%H%M%S%f}"
    tagged = [submit(local_stack, {"schedule": {"every": "PT1H"}, "tags": {"team": team}}) for _ in range(2)]
    tagged.append(submit(local_stack, {"schedule": {"cron": "0 3 * * *"}, "tags": {"team": team, "tier": "1"}}))
    other = submit(local_stack, {"schedule": {"every": "PT1H"}, "tags": {"team": f"{team}-other"}})
    # Then the list selects them by tag and kind, from the tenant's partition
    listed = api(local_stack, "GET", f"/jobs?tag=team:{team}&limit=500").json()["items"]
    assert sorted(j["job_id"] for j in listed) == sorted(j["job_id"] for j in tagged)
    crons = api(local_stack, "GET", f"/jobs?tag=team:{team}&kind=cron&limit=500").json()["items"]
    assert [j["job_id"] for j in crons] == [tagged[2]["job_id"]] and crons[0]["tags"]["tier"] == "1"
    # When they are paused in bulk
    body = api(local_stack, "POST", "/jobs/bulk", {"action": "pause", "tag": f"team:{team}", "limit": 500}).json()
    # Then exactly they are paused, and the other team's job is not
    assert sorted(body["changed"]) == sorted(j["job_id"] for j in tagged) and body["failed"] == []
    assert {api(local_stack, "GET", f"/jobs/{j['job_id']}").json()["state"] for j in tagged} == {"PAUSED"}
    assert api(local_stack, "GET", f"/jobs/{other['job_id']}").json()["state"] == "ACTIVE"


def test_a_backfill_runs_the_past_fires_and_the_worker_reports_them(local_stack: LocalStack) -> None:
    # Given a job every 10 minutes whose schedule started an hour ago
    now = datetime.now(UTC).replace(microsecond=0)
    job = submit(local_stack, {"schedule": {"every": "PT10M", "start": (now - timedelta(minutes=55)).isoformat()}})
    query = {"from": (now - timedelta(minutes=60)).isoformat(), "to": now.isoformat()}
    # When its past fires are listed, then backfilled
    listed = api(local_stack, "POST", f"/jobs/{job['job_id']}/backfill", {**query, "dry_run": True}).json()
    assert len(listed["fires"]) == 6 and listed["queued"] == 0
    response = api(local_stack, "POST", f"/jobs/{job['job_id']}/backfill", query)
    assert response.status_code == 202 and response.json()["fires"] == listed["fires"]
    # Then the worker runs each once, as a BACKFILL execution of that fire
    history = eventually(lambda: executions(local_stack, job["job_id"]),
                         lambda h: len(h) == 6 and all(e["status"] == "SUCCESS" for e in h), timeout_s=60)
    assert {e["trigger"] for e in history} == {"BACKFILL"}
    assert sorted(e["scheduled_at"] for e in history) == listed["fires"]


def test_the_change_log_on_the_real_store_says_who_changed_what(local_stack: LocalStack) -> None:
    job = submit(local_stack, {"schedule": {"every": "PT1H"}, "tags": {"team": "audit"}})
    assert api(local_stack, "PATCH", f"/jobs/{job['job_id']}", {"payload": {"n": 2}}).status_code == 200
    assert api(local_stack, "POST", f"/jobs/{job['job_id']}/pause").status_code == 200
    log = api(local_stack, "GET", f"/jobs/{job['job_id']}/changes").json()["items"]
    assert [(c["action"], c["version"]) for c in log] == [("pause", 3), ("patch", 2), ("submit", 1)]
    assert log[1]["details"] == {"fields": ["payload"]}
    assert len({c["actor"] for c in log}) == 1 and log[0]["actor"]  # the stack's own caller, every time


def test_the_firing_ledger_on_the_real_stack_accounts_for_every_fire(local_stack: LocalStack) -> None:
    # Given a job every 10 s from a few seconds from now, and a backfill of a fire before it existed
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=4)
    job = submit(local_stack, {"schedule": {"every": "PT10S", "start": start.isoformat()}})
    # When two fires have run, it is paused over the next ones, then resumed (without catch-up)
    eventually(lambda: executions(local_stack, job["job_id"]),
               lambda h: len([e for e in h if e["status"] == "SUCCESS"]) >= 2, timeout_s=60)
    assert api(local_stack, "POST", f"/jobs/{job['job_id']}/pause").status_code == 200
    paused_at = datetime.now(UTC)
    time.sleep(21)  # two fires come due while paused
    assert api(local_stack, "POST", f"/jobs/{job['job_id']}/resume").status_code == 200
    resumed_at = datetime.now(UTC)
    eventually(lambda: executions(local_stack, job["job_id"]),
               lambda h: any(parse_instant(e["scheduled_at"], "") > resumed_at and e["status"] == "SUCCESS"
                             for e in h), timeout_s=60)
    # Then its ledger, read from the real store and change log, says what became of each fire
    query = {"from": start.isoformat(), "to": (datetime.now(UTC) + timedelta(seconds=25)).isoformat(), "limit": "3"}
    fires: list[dict[str, Any]] = []
    while True:  # page by page
        page = api(local_stack, "GET", f"/jobs/{job['job_id']}/fires?{urlencode(query)}").json()
        fires += page["items"]
        if not page["next_cursor"]:
            break
        query["cursor"] = page["next_cursor"]
    outcomes = [f["outcome"] for f in fires]
    assert outcomes[:2] == ["published", "published"], fires
    assert "paused" in outcomes and outcomes.count("paused") >= 2, outcomes
    assert "missing" not in outcomes and outcomes[-1] == "upcoming", outcomes
    paused = [f for f in fires if f["outcome"] == "paused"]
    assert all(paused_at.isoformat() <= parse_instant(f["at"], "").isoformat() for f in paused[1:]), paused
    published = [f for f in fires if f["outcome"] == "published"]
    assert all(0 <= f["lateness_ms"] < 10_000 and len(f["executions"]) == 1 for f in published), published
    # and a range of more than 31 days names its field
    wrong = api(local_stack, "GET", f"/jobs/{job['job_id']}/fires?from=2026-01-01T00:00:00Z&to=2026-03-01T00:00:00Z")
    assert wrong.status_code == 422 and wrong.json()["errors"][0]["field"] == "to"


def test_end_conditions_on_the_real_stack_stop_the_fires_and_delete_the_job_when_asked(
    local_stack: LocalStack,
) -> None:
    # Given a job of two fires 10 s apart that asks to be deleted after its last, and one of three that does not
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=4)
    deleted = submit(local_stack, {"schedule": {"every": "PT10S", "start": start.isoformat(), "count": 2},
                                   "delete_after_last": True})
    kept = submit(local_stack, {"schedule": {"iso8601": f"R/{start.isoformat()}/PT10S",
                                             "end": (start + timedelta(seconds=20)).isoformat()}})
    assert (deleted["remaining_fires"], kept["remaining_fires"]) == (2, 3)
    # When their fires have run, Then each ran exactly its fires, and the first is deleted, its history kept
    gone = eventually(lambda: api(local_stack, "GET", f"/jobs/{deleted['job_id']}").status_code, 404, timeout_s=60)
    assert gone == 404
    history = executions(local_stack, deleted["job_id"])
    assert [e["status"] for e in history] == ["SUCCESS", "SUCCESS"]
    # (the change log's entry is written just after the delete itself: read until it is there)
    log = eventually(lambda: api(local_stack, "GET", f"/jobs/{deleted['job_id']}/changes").json()["items"],
                     lambda items: len(items) == 2, timeout_s=10)
    assert log[0]["action"] == "delete" and [c["action"] for c in log[1:]] == ["submit"]
    done = eventually(lambda: api(local_stack, "GET", f"/jobs/{kept['job_id']}").json(),
                      lambda j: j["status"] == "SUCCESS" and j["next_run_at"] is None, timeout_s=60)
    assert done["remaining_fires"] == 0 and done["state"] == "ACTIVE"  # kept: it did not ask to be deleted
    time.sleep(11)  # a fire after the end would have come by now
    assert len(executions(local_stack, kept["job_id"])) == 3
