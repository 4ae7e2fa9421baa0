"""Every route of the HTTP API, tenancy on every job route, and bad input on every field.

Same approach as ``test_app.py``: API Gateway REST (v1) proxy events through the Lambda entry point,
with memory adapters and a manual clock installed in the process-wide container.
"""

from __future__ import annotations

import base64
import copy
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobrunner import wiring
from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.invokers.memory import RecordingInvoker
from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.api.app import handle
from jobrunner.config import Settings
from jobrunner.domain.jobs import ExecutionRecord, ExecutionStatus, Trigger, execution_id_for
from jobrunner.ports import Outcome
from jobrunner.wiring import Container

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
HOURLY = {"schedule": {"every": "PT1H"}, "payload": {"n": 1}}


def event(
    method: str, path: str, body: Any = None, tenant: str | None = "alice", query: dict[str, str] | None = None
) -> dict[str, Any]:
    """An API Gateway REST (v1) proxy event; a str body is sent as is, anything else as JSON."""
    context: dict[str, Any] = {"requestId": "req-1", "stage": "test", "httpMethod": method, "path": path}
    if tenant is not None:
        context["authorizer"] = {"principalId": tenant}
    return {
        "resource": path, "path": path, "httpMethod": method,
        "headers": {"Content-Type": "application/json"}, "multiValueHeaders": {},
        "queryStringParameters": query or None,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": None, "stageVariables": None, "requestContext": context,
        "body": body if body is None or isinstance(body, str) else json.dumps(body), "isBase64Encoded": False,
    }


def call(
    method: str, path: str, body: Any = None, tenant: str | None = "alice", query: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    response = handle(event(method, path, body, tenant, query), None)
    return int(response["statusCode"]), json.loads(response["body"])


@dataclass
class World:
    store: MemoryJobStore
    leases: MemoryLeaseStore
    clock: ManualClock

    def submit(self, body: dict[str, Any] | None = None, tenant: str = "alice") -> dict[str, Any]:
        status, job = call("POST", "/jobs", body or HOURLY, tenant)
        assert status == 201, job
        return job

    def state(self) -> Any:
        """Everything the API may write, to prove that a refused request wrote nothing."""
        return copy.deepcopy((self.store.jobs, self.store.rows, self.store.records, self.store.idempotency))


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    monkeypatch.setattr(wiring, "_container", None)  # restored after the test
    store, leases, clock = MemoryJobStore(), MemoryLeaseStore(), ManualClock(NOW)
    wiring.install(Container(
        Settings.from_env({"JOBRUNNER_SEGMENTS": "4", "JOBRUNNER_MAX_PAYLOAD_BYTES": "1000",
                           "JOBRUNNER_ALLOWED_TOPICS": "jobs,reports", "JOBRUNNER_OPERATORS": "ops"}),
        store=store, publisher=MemoryPublisher(), leases=leases, invoker=RecordingInvoker(), clock=clock,
    ))
    return World(store, leases, clock)


def fields(answer: dict[str, Any]) -> set[str]:
    """The fields an error names; a query parameter ``x`` is named ``query.x``."""
    return {e["field"].removeprefix("query.").removeprefix("path.") for e in answer.get("errors", [])}


# -- GET /jobs ------------------------------------------------------------------------------------------------


def follow(query: dict[str, str], tenant: str = "alice") -> tuple[list[str], list[int]]:
    ids: list[str] = []
    sizes: list[int] = []
    cursor = None
    while True:
        status, page = call("GET", "/jobs", tenant=tenant, query={**query, **({"cursor": cursor} if cursor else {})})
        assert status == 200, page
        ids += [j["job_id"] for j in page["items"]]
        sizes.append(len(page["items"]))
        cursor = page["next_cursor"]
        if cursor is None:
            return ids, sizes


def test_list_jobs_pages_with_limit_and_cursor(world: World) -> None:
    jobs = sorted(world.submit()["job_id"] for _ in range(5))
    world.submit(tenant="bob")
    ids, sizes = follow({"limit": "2"})
    assert (ids, sizes) == (jobs, [2, 2, 1])
    status, page = call("GET", "/jobs")
    assert status == 200 and [j["job_id"] for j in page["items"]] == jobs and page["next_cursor"] is None


def test_list_jobs_by_status(world: World) -> None:
    jobs = sorted(world.submit()["job_id"] for _ in range(5))
    for job_id in (jobs[1], jobs[3]):
        assert call("POST", f"/jobs/{job_id}/pause")[0] == 200
    assert follow({"limit": "1", "status": "PAUSED"})[0] == [jobs[1], jobs[3]]
    assert follow({"status": "SCHEDULED"})[0] == [jobs[0], jobs[2], jobs[4]]
    assert follow({"status": "CANCELLED"})[0] == []


# -- tags: GET /jobs?tag=&kind=, PATCH tags, POST /jobs/bulk ------------------------------------------------


def test_jobs_are_listed_by_tag_and_kind_within_the_tenant(world: World) -> None:
    payments = world.submit({**HOURLY, "tags": {"team": "payments", "env": "prod"}})
    cron = world.submit({"schedule": {"cron": "0 9 * * *"}, "tags": {"team": "payments"}})
    world.submit({**HOURLY, "tags": {"team": "reports"}})
    world.submit({**HOURLY, "tags": {"team": "payments"}}, tenant="bob")  # another tenant's: never listed
    assert payments["tags"] == {"team": "payments", "env": "prod"}

    def ids(query: dict[str, str]) -> list[str]:
        status, body = call("GET", "/jobs", query={"limit": "500", **query})
        assert status == 200, body
        return sorted(j["job_id"] for j in body["items"])

    assert ids({"tag": "team:payments"}) == sorted([payments["job_id"], cron["job_id"]])
    assert ids({"tag": "env"}) == [payments["job_id"]]
    assert ids({"tag": "team:payments", "kind": "cron"}) == [cron["job_id"]]
    assert ids({"tag": "team:payments", "status": "PAUSED"}) == []
    status, body = call("GET", "/jobs", query={"tag": "bad key"})
    assert status == 422 and body["errors"][0]["field"] == "tag"
    assert call("GET", "/jobs", query={"kind": "weekly"})[0] == 422


def test_a_patch_replaces_the_tags_and_a_wrong_tag_names_its_field(world: World) -> None:
    job = world.submit({**HOURLY, "tags": {"team": "payments"}})
    status, body = call("PATCH", f"/jobs/{job['job_id']}", {"tags": {"team": "ledger", "tier": "1"}})
    assert status == 200 and body["tags"] == {"team": "ledger", "tier": "1"}
    assert body["next_run_at"] == job["next_run_at"]  # tags plan nothing
    assert call("PATCH", f"/jobs/{job['job_id']}", {"tags": {}})[1]["tags"] == {}
    before = world.state()
    status, body = call("POST", "/jobs", {**HOURLY, "tags": {"team:x": "a"}})
    assert status == 422 and body["errors"][0]["field"] == "tags.team:x"
    assert world.state() == before


def test_a_bulk_change_pauses_the_jobs_a_tag_selects_page_by_page(world: World) -> None:
    tagged = [world.submit({**HOURLY, "tags": {"team": "payments"}}) for _ in range(5)]
    other = world.submit({**HOURLY, "tags": {"team": "reports"}})
    bobs = world.submit({**HOURLY, "tags": {"team": "payments"}}, tenant="bob")
    # When the tenant pauses team:payments two jobs at a time, following the cursor
    changed, cursor, rounds = [], None, 0
    while True:
        status, body = call("POST", "/jobs/bulk", {"action": "pause", "tag": "team:payments", "limit": 2,
                                                   **({"cursor": cursor} if cursor else {})})
        assert status == 200, body
        changed += body["changed"]
        cursor, rounds = body["next_cursor"], rounds + 1
        if not cursor:
            break
    # Then exactly its 5 tagged jobs are paused, the others (and another tenant's) are not
    assert sorted(changed) == sorted(j["job_id"] for j in tagged) and rounds >= 3
    states = {job_id: job.state.value for (_, job_id), job in world.store.jobs.items()}
    assert {states[j["job_id"]] for j in tagged} == {"PAUSED"}
    assert (states[other["job_id"]], states[bobs["job_id"]]) == ("ACTIVE", "ACTIVE")
    # and doing it again changes nothing, while a cancel of a cancelled job is unchanged too
    body = call("POST", "/jobs/bulk", {"action": "pause", "tag": "team:payments", "limit": 500})[1]
    assert (body["changed"], len(body["unchanged"])) == ([], 5)
    call("POST", "/jobs/bulk", {"action": "cancel", "tag": "team:payments", "limit": 500})
    body = call("POST", "/jobs/bulk", {"action": "resume", "tag": "team:payments", "limit": 500})[1]
    assert body["changed"] == [] and len(body["failed"]) == 5 and "cancelled" in body["failed"][0]["reason"]
    # and a bulk change without a tag, or with an unknown action, is refused
    assert call("POST", "/jobs/bulk", {"action": "pause"})[0] == 422
    assert call("POST", "/jobs/bulk", {"action": "delete", "tag": "team"})[0] == 422


def test_a_backfill_lists_or_queues_the_past_fires_of_a_range(world: World) -> None:
    job = world.submit({"schedule": {"every": "PT15M", "start": "2026-11-22T08:00:00Z"}})
    query = {"from": "2026-11-22T08:00:00Z", "to": "2026-11-22T09:00:00Z"}
    status, body = call("POST", f"/jobs/{job['job_id']}/backfill", {**query, "dry_run": True})
    assert status == 200 and body["queued"] == 0 and body["fires"] == [
        f"2026-11-22T0{h}:{m}:00.000Z" for h, m in (("8", "00"), ("8", "15"), ("8", "30"), ("8", "45"), ("9", "00"))]
    status, body = call("POST", f"/jobs/{job['job_id']}/backfill", query)
    assert status == 202 and body["queued"] == 5
    assert len([r for r in world.store.rows.values() if r.trigger.value == "BACKFILL"]) == 5
    for wrong, field in (({"from": "yesterday", "to": query["to"]}, "from"), ({"from": query["from"]}, "to"),
                         ({**query, "to": "2027-01-01T00:00:00Z"}, "to")):
        status, body = call("POST", f"/jobs/{job['job_id']}/backfill", wrong)
        assert status == 422 and body["errors"][0]["field"] == field, body
    assert call("POST", f"/jobs/{job['job_id']}/backfill", query, tenant="bob")[0] == 404


def test_the_change_log_lists_who_changed_what_newest_first_page_by_page(world: World) -> None:
    job = world.submit(HOURLY)
    world.clock.advance(timedelta(seconds=1))
    call("PATCH", f"/jobs/{job['job_id']}", {"payload": {"n": 2}})
    world.clock.advance(timedelta(seconds=1))
    call("POST", f"/jobs/{job['job_id']}/pause")
    status, body = call("GET", f"/jobs/{job['job_id']}/changes", query={"limit": "2"})
    assert status == 200 and [c["action"] for c in body["items"]] == ["pause", "patch"]
    assert {c["actor"] for c in body["items"]} == {"alice"} and body["items"][1]["details"] == {"fields": ["payload"]}
    rest = call("GET", f"/jobs/{job['job_id']}/changes", query={"limit": "2", "cursor": body["next_cursor"]})[1]
    assert [c["action"] for c in rest["items"]] == ["submit"] and rest["next_cursor"] is None
    assert call("GET", f"/jobs/{job['job_id']}/changes", tenant="bob")[0] == 404
    assert call("GET", f"/jobs/{job['job_id']}/changes", query={"cursor": "nonsense"})[0] == 422


def test_the_firing_ledger_lists_each_fire_of_a_range_page_by_page_and_names_a_wrong_field(world: World) -> None:
    job = world.submit({"schedule": {"every": "PT15M", "start": "2026-11-22T10:00:00Z"}})
    world.clock.advance(timedelta(hours=1, minutes=10))  # 11:10: nothing was scanned (no scan runs here)
    query = {"from": "2026-11-22T10:00:00Z", "to": "2026-11-22T11:30:00Z", "limit": "4"}
    status, body = call("GET", f"/jobs/{job['job_id']}/fires", query=query)
    assert status == 200, body
    assert [(f["at"][11:16], f["outcome"]) for f in body["items"]] == [
        ("10:00", "missing"), ("10:15", "missing"), ("10:30", "missing"), ("10:45", "missing")]
    assert (body["unaccounted"], body["summary"]) == (4, {"missing": 4})
    rest = call("GET", f"/jobs/{job['job_id']}/fires", query={**query, "cursor": body["next_cursor"]})[1]
    assert [(f["at"][11:16], f["outcome"]) for f in rest["items"]] == [
        ("11:00", "missing"), ("11:15", "upcoming"), ("11:30", "upcoming")]
    assert rest["next_cursor"] is None
    # by default: the day up to now
    assert len(call("GET", f"/jobs/{job['job_id']}/fires")[1]["items"]) == 5
    for wrong, field in (({"from": "yesterday"}, "from"), ({"to": "2026-11-22T09:00:00Z"}, "to"),
                         ({"to": "2027-01-22T09:00:00Z"}, "to"), ({"limit": "501"}, "limit"),
                         ({"cursor": "bm9wZQ"}, "cursor")):
        status, body = call("GET", f"/jobs/{job['job_id']}/fires", query={**query, **wrong})
        assert status == 422 and field in fields(body), body
    assert call("GET", f"/jobs/{job['job_id']}/fires", query=query, tenant="bob")[0] == 404


# -- calendars --------------------------------------------------------------------------------------------------


HOLIDAYS = {"timezone": "Europe/Paris", "description": "public holidays",
            "exclude": [{"date": "2026-12-25", "note": "Christmas"}, {"from": "2026-11-22", "to": "2026-11-22"}]}


def test_calendars_are_managed_per_tenant_and_a_named_one_cannot_be_deleted(world: World) -> None:
    status, body = call("PUT", "/calendars/holidays", HOLIDAYS)
    assert status == 201 and body["exclude"][0] == {"date": "2026-12-25", "note": "Christmas"}, body
    assert call("PUT", "/calendars/holidays", HOLIDAYS)[0] == 200  # replaced
    assert call("GET", "/calendars/holidays")[1]["timezone"] == "Europe/Paris"
    assert call("GET", "/calendars/holidays", tenant="bob")[0] == 404  # another tenant's: not found
    call("PUT", "/calendars/freeze", {"exclude": []})
    assert [c["name"] for c in call("GET", "/calendars")[1]["items"]] == ["freeze", "holidays"]
    assert call("GET", "/calendars", tenant="bob")[1]["items"] == []
    # a job names it; its preview shows the fires the calendar excludes (today, the 22nd, in Paris)
    job = world.submit({"schedule": {"every": "PT6H", "start": "2026-11-22T12:00:00Z"}, "calendar": "holidays"})
    assert job["calendar"] == "holidays"
    body = call("GET", f"/jobs/{job['job_id']}", query={"preview": "3"})[1]
    assert body["next_runs"] == ["2026-11-22T12:00:00.000Z", "2026-11-22T18:00:00.000Z", "2026-11-23T00:00:00.000Z"]
    assert [e["at"] for e in body["excluded_runs"]] == ["2026-11-22T12:00:00.000Z", "2026-11-22T18:00:00.000Z"]
    assert "excluded by calendar holidays" in body["excluded_runs"][0]["reason"]
    # so it cannot be deleted, until the job no longer names it
    status, body = call("DELETE", "/calendars/holidays")
    assert status == 409 and job["job_id"] in body["message"], body
    assert call("PATCH", f"/jobs/{job['job_id']}", {"calendar": None})[1]["calendar"] is None
    assert call("DELETE", "/calendars/holidays", tenant="bob")[0] == 404
    response = handle(event("DELETE", "/calendars/holidays"), None)
    assert response["statusCode"] == 204
    # no content: neither a body nor a Content-Type saying it is JSON
    headers = {**response["headers"], **response["multiValueHeaders"]}
    assert not response["body"] and "Content-Type" not in headers, response
    assert call("GET", "/calendars/holidays")[0] == 404


@pytest.mark.parametrize(("body", "field"), [
    ({"timezone": "Mars/Olympus"}, "timezone"),
    ({"exclude": [{"date": "25/12"}]}, "exclude.0.date"),
    ({"exclude": [{"from": "2026-12-26", "to": "2026-12-24"}]}, "exclude.0.to"),
    ({"exclude": [{"date": "2026-12-25", "when": "x"}]}, "exclude.0.when"),
    ({"colour": "red"}, "colour"),
])
def test_a_wrong_calendar_names_its_field_and_writes_nothing(world: World, body: dict[str, Any], field: str) -> None:
    status, answer = call("PUT", "/calendars/holidays", body)
    assert status == 422 and field in fields(answer), answer
    assert call("GET", "/calendars/holidays")[0] == 404
    assert call("PUT", "/calendars/no%20spaces", {})[0] in (404, 422)


def test_a_job_naming_a_calendar_the_tenant_lacks_names_the_field(world: World) -> None:
    call("PUT", "/calendars/holidays", HOLIDAYS, tenant="bob")
    before = world.state()
    for body in ({**HOURLY, "calendar": "holidays"}, {"schedule": {"at": "2026-11-22T11:00:00Z"}, "calendar": "x"}):
        status, answer = call("POST", "/jobs", body)
        assert status == 422 and fields(answer) == {"calendar"}, answer
    assert world.state() == before


# -- end conditions -----------------------------------------------------------------------------------------------


def test_end_conditions_are_taken_for_every_recurring_kind_and_say_the_fires_left(world: World) -> None:
    # a cron of three fires from now: its third becomes its end; a PATCH can switch deletion on and off
    job = world.submit({"schedule": {"cron": "0 * * * *", "count": 3}, "delete_after_last": True})
    assert job["schedule"] == {"cron": "0 * * * *", "timezone": "UTC", "start": "2026-11-22T10:00:00.000Z",
                               "end": "2026-11-22T12:00:00.000Z", "count": 3}
    assert (job["remaining_fires"], job["delete_after_last"]) == (3, True)
    body = call("GET", f"/jobs/{job['job_id']}", query={"preview": "5"})[1]
    assert body["next_runs"] == ["2026-11-22T10:00:00.000Z", "2026-11-22T11:00:00.000Z", "2026-11-22T12:00:00.000Z"]
    assert call("PATCH", f"/jobs/{job['job_id']}", {"delete_after_last": False})[1]["delete_after_last"] is False
    # every with a count, iso8601 with an end; a job without an end has no count of fires left
    every = world.submit({"schedule": {"every": "PT10M", "count": 2}})
    assert every["schedule"]["end"] == "2026-11-22T10:20:00.000Z" and every["remaining_fires"] == 2
    iso = world.submit({"schedule": {"iso8601": "R/2026-11-22T10:00:00Z/PT1H", "end": "2026-11-22T14:00:00Z"}})
    assert iso["remaining_fires"] == 5
    assert world.submit(HOURLY)["remaining_fires"] is None
    assert [j["remaining_fires"] for j in call("GET", "/jobs")[1]["items"]] == [None] * 4  # not in lists


@pytest.mark.parametrize(("schedule", "field"), [
    ({"cron": "0 * * * *", "count": 0}, "schedule.count"),
    ({"cron": "0 * * * *", "count": 1001}, "schedule.count"),
    ({"iso8601": "R/2026-11-22T10:00:00Z/PT1H", "count": 2}, "schedule.count"),
    ({"at": "2026-11-22T11:00:00Z", "end": "2026-11-22T12:00:00Z"}, "schedule.end"),
    ({"cron": "0 * * * *", "end": "2026-11-22T09:00:00Z"}, "schedule"),  # ends before its first fire
])
def test_a_wrong_end_condition_names_its_field_and_writes_nothing(
    world: World, schedule: dict[str, Any], field: str
) -> None:
    before = world.state()
    status, body = call("POST", "/jobs", {"schedule": schedule})
    assert status == 422 and field in fields(body), body
    assert world.state() == before


# -- overlap and catch-up policies --------------------------------------------------------------------------------


def test_the_overlap_and_catch_up_policies_are_kept_returned_and_changed(world: World) -> None:
    job = world.submit({**HOURLY, "overlap": "buffer_one", "catch_up": {"window_s": 3600, "most": 3}})
    assert (job["overlap"], job["catch_up"]) == ("buffer_one", {"window_s": 3600, "most": 3})
    assert world.store.jobs[("alice", job["job_id"])].spec.overlap.value == "buffer_one"
    body = call("PATCH", f"/jobs/{job['job_id']}", {"overlap": "skip", "catch_up": {}})[1]
    assert (body["overlap"], body["catch_up"]) == ("skip", {})
    assert body["next_run_at"] == job["next_run_at"]  # a policy plans nothing
    assert world.submit(HOURLY)["overlap"] == "allow_all" and world.submit(HOURLY)["catch_up"] == {}


@pytest.mark.parametrize(("extra", "field"), [
    ({"overlap": "sometimes"}, "overlap"),
    ({"catch_up": {"most": 0}}, "catch_up.most"),
    ({"catch_up": {"window_s": 10**9}}, "catch_up.window_s"),
    ({"catch_up": {"latest": True}}, "catch_up.latest"),
])
def test_a_wrong_policy_names_its_field_and_writes_nothing(world: World, extra: dict[str, Any], field: str) -> None:
    before = world.state()
    status, body = call("POST", "/jobs", {**HOURLY, **extra})
    assert status == 422 and field in fields(body), body
    assert world.state() == before


# -- GET /jobs/{id} ------------------------------------------------------------------------------------------


def test_get_job_with_a_preview_of_the_next_runs(world: World) -> None:
    job = world.submit({"schedule": {"every": "PT15M", "start": "2026-11-22T10:30:00Z"}})
    status, body = call("GET", f"/jobs/{job['job_id']}", query={"preview": "3"})
    assert status == 200
    assert body["next_runs"] == ["2026-11-22T10:30:00.000Z", "2026-11-22T10:45:00.000Z", "2026-11-22T11:00:00.000Z"]
    preview = ("next_runs", "excluded_runs")
    assert {k: v for k, v in body.items() if k not in preview} == {k: v for k, v in job.items() if k not in preview}
    assert body["excluded_runs"] == []  # no calendar: nothing excluded
    assert call("GET", f"/jobs/{job['job_id']}")[1]["next_runs"] is None


@pytest.mark.parametrize(("dst", "runs"), [
    (None, ["2027-10-31T00:30:00.000Z", "2028-10-31T01:30:00.000Z"]),  # Debian's: the first 02:30 (CEST)
    ({"fold": "second"}, ["2027-10-31T01:30:00.000Z", "2028-10-31T01:30:00.000Z"]),
    ({"gap": "skip", "fold": "both"}, ["2027-10-31T00:30:00.000Z", "2027-10-31T01:30:00.000Z"]),
])
def test_a_crons_daylight_saving_policy_is_kept_returned_and_previewed(
    world: World, dst: dict[str, str] | None, runs: list[str]
) -> None:
    # Given a yearly cron at 02:30 in Paris on 31 October, which occurs twice in 2027 (03:00 CEST -> 02:00 CET)
    schedule: dict[str, Any] = {"cron": "30 2 31 10 *", "timezone": "Europe/Paris"}
    job = world.submit({"schedule": {**schedule, **({"dst": dst} if dst else {})}})
    status, body = call("GET", f"/jobs/{job['job_id']}", query={"preview": "2"})
    assert status == 200 and body["next_runs"] == runs
    expected = {**schedule, "dst": {"gap": "shift", "fold": "first", **dst}} if dst else schedule
    assert body["schedule"] == expected


@pytest.mark.parametrize(("dst", "field"), [
    ({"fold": "last"}, "schedule.dst.fold"), ({"gap": "later"}, "schedule.dst.gap"),
    ({"when": "now"}, "schedule.dst.when"), ("both", "schedule.dst"),
])
def test_a_wrong_daylight_saving_policy_names_its_field(world: World, dst: Any, field: str) -> None:
    status, body = call("POST", "/jobs", {"schedule": {"cron": "30 2 * * *", "dst": dst}})
    assert status == 422 and field in [error["field"] for error in body["errors"]], body
    assert world.store.jobs == {}


def test_a_description_is_shown_with_the_job_changed_by_a_patch_and_removed_by_a_null(world: World) -> None:
    # Given a job submitted with a description
    job = world.submit({**HOURLY, "description": "the payroll export; ask #payments"})
    assert call("GET", f"/jobs/{job['job_id']}")[1]["description"] == "the payroll export; ask #payments"
    # When a PATCH changes it, another leaves it out, and a third sends null
    assert call("PATCH", f"/jobs/{job['job_id']}", {"description": "weekly"})[1]["description"] == "weekly"
    assert call("PATCH", f"/jobs/{job['job_id']}", {"payload": {}})[1]["description"] == "weekly"
    # Then the null removes it; one too long is refused, naming the field
    assert call("PATCH", f"/jobs/{job['job_id']}", {"description": None})[1]["description"] is None
    status, body = call("POST", "/jobs", {**HOURLY, "description": "x" * 1025})
    assert (status, fields(body)) == (422, {"description"})


# -- PATCH, DELETE, pause, resume, run ---------------------------------------------------------------------


def test_patch_changes_only_the_given_fields(world: World) -> None:
    job = world.submit({**HOURLY, "max_retries": 2, "backoff": {"initial_delay_s": 5, "multiplier": 3,
                                                                "max_delay_s": 60}, "timeout_s": 30})
    status, body = call("PATCH", f"/jobs/{job['job_id']}", {"payload": {"n": 2}, "topic": "reports"})
    assert status == 200
    assert (body["payload"], body["topic"], body["version"], body["next_run_at"]) == (
        {"n": 2}, "reports", 2, job["next_run_at"]
    )
    assert (body["max_retries"], body["backoff"], body["timeout_s"]) == (2, job["backoff"], 30)
    # max_retries alone keeps the backoff; backoff alone keeps max_retries; a null timeout clears it
    body = call("PATCH", f"/jobs/{job['job_id']}", {"max_retries": 4})[1]
    assert (body["max_retries"], body["backoff"]) == (4, job["backoff"])
    body = call("PATCH", f"/jobs/{job['job_id']}", {"backoff": {"initial_delay_s": 1}})[1]
    assert (body["max_retries"], body["backoff"]) == (4, {"initial_delay_s": 1.0, "multiplier": 2.0,
                                                          "max_delay_s": 300.0})
    assert call("PATCH", f"/jobs/{job['job_id']}", {"timeout_s": None})[1]["timeout_s"] is None
    assert world.store.jobs[("alice", job["job_id"])].version == 5
    # and a jitter window is set and cleared the same way
    assert call("PATCH", f"/jobs/{job['job_id']}", {"jitter_s": 90})[1]["jitter_s"] == 90
    assert world.store.jobs[("alice", job["job_id"])].spec.jitter_s == 90
    assert call("PATCH", f"/jobs/{job['job_id']}", {"jitter_s": None})[1]["jitter_s"] is None


def test_a_job_submitted_with_a_jitter_window_returns_it(world: World) -> None:
    job = world.submit({**HOURLY, "jitter_s": 300})
    assert job["jitter_s"] == 300 and world.store.jobs[("alice", job["job_id"])].spec.jitter_s == 300
    assert call("POST", "/jobs", {**HOURLY, "jitter_s": 3601})[0] == 422


def test_patch_schedule_replans_from_now(world: World) -> None:
    job = world.submit()
    world.clock.advance(timedelta(minutes=7))
    status, body = call("PATCH", f"/jobs/{job['job_id']}", {"schedule": {"every": "PT10M"}})
    assert status == 200
    assert (body["schedule"], body["next_run_at"]) == (
        {"every": "PT10M", "start": "2026-11-22T10:17:00.000Z"}, "2026-11-22T10:17:00.000Z"
    )


def test_delete_cancels_and_is_idempotent(world: World) -> None:
    job = world.submit()
    status, body = call("DELETE", f"/jobs/{job['job_id']}")
    assert (status, body["state"], body["status"], body["next_run_at"], body["version"]) == (
        200, "CANCELLED", "CANCELLED", None, 2
    )
    assert call("DELETE", f"/jobs/{job['job_id']}") == (200, body)
    # a cancelled job can no longer be changed, paused, resumed or run
    for method, path, payload in (("PATCH", "", {"payload": {}}), ("POST", "/pause", None),
                                  ("POST", "/resume", None), ("POST", "/run", None)):
        status, answer = call(method, f"/jobs/{job['job_id']}{path}", payload)
        assert (status, answer["error"]) == (409, "conflict"), path


def test_pause_and_resume_without_body(world: World) -> None:
    job = world.submit({"schedule": {"every": "PT10M", "start": "2026-11-22T10:10:00Z"}})
    status, body = call("POST", f"/jobs/{job['job_id']}/pause")
    assert (status, body["status"], body["next_run_at"]) == (200, "PAUSED", None)
    world.clock.set(NOW + timedelta(minutes=35))
    status, body = call("POST", f"/jobs/{job['job_id']}/resume")
    assert (status, body["status"], body["next_run_at"]) == (200, "SCHEDULED", "2026-11-22T10:40:00.000Z")


@pytest.mark.parametrize(
    ("body", "next_run_at"),
    [
        ({"catch_up": True}, "2026-11-22T10:10:00.000Z"),
        ({"catch_up": False}, "2026-11-22T10:40:00.000Z"),
        ({}, "2026-11-22T10:40:00.000Z"),
        ("", "2026-11-22T10:40:00.000Z"),
    ],
    ids=["catch-up", "no-catch-up", "empty-object", "empty-body"],
)
def test_resume_with_body(world: World, body: Any, next_run_at: str) -> None:
    job = world.submit({"schedule": {"every": "PT10M", "start": "2026-11-22T10:10:00Z"}})
    call("POST", f"/jobs/{job['job_id']}/pause")
    world.clock.set(NOW + timedelta(minutes=35))
    status, answer = call("POST", f"/jobs/{job['job_id']}/resume", body)
    assert (status, answer["next_run_at"]) == (200, next_run_at)


def test_resume_of_a_one_time_job_whose_time_passed_is_a_conflict(world: World) -> None:
    job = world.submit({"schedule": {"at": "2026-11-22T10:10:00Z"}})
    call("POST", f"/jobs/{job['job_id']}/pause")
    world.clock.set(NOW + timedelta(minutes=20))
    assert call("POST", f"/jobs/{job['job_id']}/resume")[0] == 409


def test_run_answers_202_with_the_manual_execution(world: World) -> None:
    job = world.submit()
    world.clock.set(NOW + timedelta(seconds=42))
    status, body = call("POST", f"/jobs/{job['job_id']}/run")
    assert status == 202
    assert body == {
        "execution_id": execution_id_for(job["job_id"], NOW + timedelta(seconds=42), 1, Trigger.MANUAL),
        # due LATE_LEAD (2 s) after the request: the late lane's lead (domain.placement)
        "job_id": job["job_id"], "due_at": "2026-11-22T10:00:44.000Z", "trigger": "MANUAL",
    }
    assert body["execution_id"] in {r.execution_id for r in world.store.rows.values()}


# -- executions ---------------------------------------------------------------------------------------------


def add_history(world: World, job_id: str, fires: int, attempts: int = 1) -> list[str]:
    """Finished records of ``fires`` fires, newest last; returns their execution ids newest first."""
    ids = []
    for minute in range(fires):
        scheduled_at = NOW + timedelta(minutes=minute)
        for attempt in range(1, attempts + 1):
            execution_id = execution_id_for(job_id, scheduled_at, attempt, Trigger.SCHEDULE)
            world.store.write_outcomes([Outcome(ExecutionRecord(
                job_id=job_id, scheduled_at=scheduled_at, attempt=attempt, execution_id=execution_id,
                user_id="alice", status=ExecutionStatus.SUCCESS, trigger=Trigger.SCHEDULE, due_at=scheduled_at,
                published_at=scheduled_at, finished_at=scheduled_at + timedelta(seconds=1),
            ), None)])
            ids.append(execution_id)
    return ids[::-1]


@pytest.mark.parametrize(("fires", "attempts", "limit"), [(5, 1, 2), (4, 1, 2), (3, 3, 2), (1, 1, 50)])
def test_executions_page_with_cursor_newest_first(world: World, fires: int, attempts: int, limit: int) -> None:
    job = world.submit()
    expected = add_history(world, job["job_id"], fires, attempts)
    seen: list[str] = []
    cursor = None
    for _ in range(20):
        status, page = call("GET", f"/jobs/{job['job_id']}/executions",
                            query={"limit": str(limit), **({"cursor": cursor} if cursor else {})})
        assert status == 200, page
        assert len(page["items"]) <= limit
        seen += [item["execution_id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == expected


def test_execution_fields(world: World) -> None:
    job = world.submit()
    [execution_id] = add_history(world, job["job_id"], 1)
    status, page = call("GET", f"/jobs/{job['job_id']}/executions")
    assert status == 200
    assert page == {"items": [{
        "execution_id": execution_id, "scheduled_at": "2026-11-22T10:00:00.000Z", "attempt": 1,
        "status": "SUCCESS", "trigger": "SCHEDULE", "due_at": "2026-11-22T10:00:00.000Z",
        "published_at": "2026-11-22T10:00:00.000Z", "finished_at": "2026-11-22T10:00:01.000Z", "error": None,
    }], "next_cursor": None}


# -- segments, openapi -------------------------------------------------------------------------------------


def test_segments_report_watermark_lag_and_health(world: World) -> None:
    world.leases.advance_watermark(1, NOW - timedelta(minutes=1))
    world.leases.beat(1, "scan:abc", NOW - timedelta(seconds=20), 7)
    world.leases.advance_watermark(2, NOW - timedelta(minutes=10))
    status, body = call("GET", "/segments", tenant="ops")
    assert status == 200
    assert [s["segment"] for s in body["items"]] == [0, 1, 2, 3]
    assert body["items"][1] == {
        "segment": 1, "watermark": "2026-11-22T09:59:00.000Z", "lag_s": 0.0,
        "last_heartbeat": "2026-11-22T09:59:40.000Z", "last_owner": "scan:abc", "published_total": 7, "healthy": True,
        "retired": False, "parked": 0,
    }
    assert (body["items"][2]["lag_s"], body["items"][2]["healthy"]) == (540.0, False)
    assert (body["items"][0]["watermark"], body["items"][0]["healthy"]) == (None, False)
    assert call("GET", "/segments", tenant=None)[0] == 401


def test_segments_are_an_operator_view_refused_to_other_tenants(world: World) -> None:
    # Given segments with progress that belongs to every tenant's jobs
    world.leases.beat(1, "scan:abc", NOW - timedelta(seconds=20), 7)
    # When a tenant that is not an operator asks for them
    status, body = call("GET", "/segments", tenant="alice")
    # Then it is refused, naming what and why, and learns no count
    assert (status, body["error"]) == (403, "forbidden")
    assert body["errors"] == [{"field": "segments", "reason": "an operator view, and this tenant is not an operator"}]
    assert "published_total" not in json.dumps(body)


def test_segments_show_retired_segments_and_parked_partitions(world: World) -> None:
    # Given a count once higher than the configured 4, and a parked partition in segment 1
    world.leases.record_segment_count(6)
    world.leases.park(1, [NOW - timedelta(minutes=30)])
    status, body = call("GET", "/segments", tenant="ops")
    assert status == 200
    assert [(s["segment"], s["retired"]) for s in body["items"]] == [(i, i >= 4) for i in range(6)]
    assert (body["items"][1]["parked"], body["items"][1]["healthy"]) == (1, False)


def test_openapi_lists_every_route(world: World) -> None:
    status, document = call("GET", "/openapi.json", tenant=None)
    assert status == 200
    routes = {(path, method) for path, item in document["paths"].items() for method in item}
    assert routes >= {
        ("/health", "get"), ("/jobs", "post"), ("/jobs", "get"), ("/jobs/{job_id}", "get"),
        ("/jobs/{job_id}", "patch"), ("/jobs/{job_id}", "delete"), ("/jobs/{job_id}/pause", "post"),
        ("/jobs/{job_id}/resume", "post"), ("/jobs/{job_id}/run", "post"), ("/jobs/{job_id}/executions", "get"),
        ("/segments", "get"),
    }
    jobs_get = {p["name"] for p in document["paths"]["/jobs"]["get"]["parameters"]}
    assert jobs_get >= {"limit", "cursor", "status"}


# -- tenancy: another tenant's job is "not found" on every route, and nothing changes -----------------------

JOB_ROUTES = [
    ("GET", "", None, None),
    ("GET", "", None, {"preview": "3"}),
    ("PATCH", "", {"payload": {"stolen": True}}, None),
    ("PATCH", "", {"schedule": {"every": "PT10S"}}, None),
    ("DELETE", "", None, None),
    ("POST", "/pause", None, None),
    ("POST", "/resume", None, None),
    ("POST", "/resume", {"catch_up": True}, None),
    ("POST", "/run", None, None),
    ("GET", "/executions", None, None),
    ("GET", "/executions", None, {"limit": "1"}),
]
JOB_ROUTE_IDS = ["get", "get-preview", "patch-payload", "patch-schedule", "delete", "pause", "resume",
                 "resume-catch-up", "run", "executions", "executions-limit"]


@pytest.mark.parametrize(("method", "suffix", "body", "query"), JOB_ROUTES, ids=JOB_ROUTE_IDS)
def test_another_tenants_job_is_not_found_and_untouched(
    world: World, method: str, suffix: str, body: Any, query: dict[str, str] | None
) -> None:
    # Given Alice's job, paused so that resume would change it too, with some history
    job = world.submit()
    call("POST", f"/jobs/{job['job_id']}/pause")
    add_history(world, job["job_id"], 2)
    before = world.state()
    # When Mallory uses its id
    status, answer = call(method, f"/jobs/{job['job_id']}{suffix}", body, tenant="mallory", query=query)
    # Then she is told there is no such job, exactly as for an id that does not exist, and nothing changed
    assert (status, answer["error"]) == (404, "not_found")
    missing_status, missing = call(method, f"/jobs/no-such-job{suffix}", body, tenant="mallory", query=query)
    assert (missing_status, missing["message"].replace("no-such-job", job["job_id"])) == (404, answer["message"])
    assert world.state() == before


def test_another_tenant_lists_none_of_alices_jobs(world: World) -> None:
    world.submit()
    call("POST", f"/jobs/{world.submit()['job_id']}/pause")
    for query in ({}, {"status": "PAUSED"}, {"status": "SCHEDULED", "limit": "1"}):
        assert call("GET", "/jobs", tenant="mallory", query=query) == (200, {"items": [], "next_cursor": None})


def test_another_tenant_reusing_an_idempotency_key_gets_a_job_of_its_own(world: World) -> None:
    alices = world.submit({**HOURLY, "idempotency_key": "k-1"})
    status, mallorys = call("POST", "/jobs", {**HOURLY, "idempotency_key": "k-1"}, tenant="mallory")
    assert status == 201 and mallorys["job_id"] != alices["job_id"]
    assert world.store.jobs[("alice", alices["job_id"])].spec.payload == {"n": 1}


# -- idempotent submission ----------------------------------------------------------------------------------


def test_post_with_an_idempotency_key_twice_answers_201_then_200_with_the_same_job(world: World) -> None:
    body = {**HOURLY, "idempotency_key": "order-42"}
    first_status, first = call("POST", "/jobs", body)
    world.clock.advance(timedelta(seconds=3))
    second_status, second = call("POST", "/jobs", body)
    assert (first_status, second_status) == (201, 200)
    assert second == first
    assert len(world.store.jobs) == 1 and len(world.store.rows) == 1
    status, answer = call("POST", "/jobs", {**body, "payload": {"n": 2}})
    assert (status, answer["error"]) == (409, "conflict")
    assert len(world.store.jobs) == 1


# -- bad input on every field of every route: 4xx naming the field, nothing written -------------------------

def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


OVERFLOWING_CURSOR = b64(b"99999999999999999999999:1")

BAD_INPUT: list[tuple[str, str, Any, dict[str, str] | None, str]] = [
    # GET /jobs
    ("GET", "/jobs", None, {"limit": "0"}, "limit"),
    ("GET", "/jobs", None, {"limit": "501"}, "limit"),
    ("GET", "/jobs", None, {"limit": "ten"}, "limit"),
    ("GET", "/jobs", None, {"status": "DONE"}, "status"),
    ("GET", "/jobs", None, {"cursor": "not-a-cursor"}, "cursor"),
    ("GET", "/jobs", None, {"cursor": "x" * 2049}, "cursor"),
    ("GET", "/jobs", None, {"cursor": b64(b"j1:")}, "cursor"),
    ("GET", "/jobs", None, {"cursor": b64(b"x1:some-job")}, "cursor"),
    # GET /jobs/{id}
    ("GET", "/jobs/{id}", None, {"preview": "-1"}, "preview"),
    ("GET", "/jobs/{id}", None, {"preview": "51"}, "preview"),
    ("GET", "/jobs/{id}", None, {"preview": "three"}, "preview"),
    ("GET", "/jobs/" + "j" * 65, None, None, "job_id"),
    # PATCH /jobs/{id}
    ("PATCH", "/jobs/{id}", {"colour": "red"}, None, "colour"),
    ("PATCH", "/jobs/{id}", '{"payload": ', None, "body"),
    ("PATCH", "/jobs/{id}", {"schedule": {"every": "PT5S"}}, None, "schedule.every"),
    ("PATCH", "/jobs/{id}", {"schedule": {"every": "PT5M", "colour": "red"}}, None, "schedule.colour"),
    ("PATCH", "/jobs/{id}", {"schedule": {}}, None, "schedule"),
    ("PATCH", "/jobs/{id}", {"topic": "payroll"}, None, "topic"),
    ("PATCH", "/jobs/{id}", {"topic": ""}, None, "topic"),
    ("PATCH", "/jobs/{id}", {"payload": "x" * 1000}, None, "payload"),
    ("PATCH", "/jobs/{id}", {"timeout_s": 0}, None, "timeout_s"),
    ("PATCH", "/jobs/{id}", {"timeout_s": 86_401}, None, "timeout_s"),
    ("PATCH", "/jobs/{id}", {"jitter_s": 0}, None, "jitter_s"),
    ("PATCH", "/jobs/{id}", {"jitter_s": 3601}, None, "jitter_s"),
    ("PATCH", "/jobs/{id}", {"max_retries": 21}, None, "max_retries"),
    ("PATCH", "/jobs/{id}", {"max_retries": -1}, None, "max_retries"),
    ("PATCH", "/jobs/{id}", {"backoff": {"initial_delay_s": 0}}, None, "backoff.initial_delay_s"),
    ("PATCH", "/jobs/{id}", {"backoff": {"multiplier": 0.5}}, None, "backoff.multiplier"),
    ("PATCH", "/jobs/{id}", {"backoff": {"max_delay_s": 86_401}}, None, "backoff.max_delay_s"),
    ("PATCH", "/jobs/{id}", {"backoff": {"jitter": 1}}, None, "backoff.jitter"),
    # POST /jobs/{id}/resume
    ("POST", "/jobs/{id}/resume", {"catchup": True}, None, "catchup"),
    ("POST", "/jobs/{id}/resume", {"catch_up": "maybe"}, None, "catch_up"),
    ("POST", "/jobs/{id}/resume", '{"catch_up": tru', None, "body"),
    # GET /jobs/{id}/executions
    ("GET", "/jobs/{id}/executions", None, {"limit": "0"}, "limit"),
    ("GET", "/jobs/{id}/executions", None, {"limit": "501"}, "limit"),
    ("GET", "/jobs/{id}/executions", None, {"cursor": "not-a-cursor"}, "cursor"),
    ("GET", "/jobs/{id}/executions", None, {"cursor": OVERFLOWING_CURSOR}, "cursor"),
    ("GET", "/jobs/{id}/executions", None, {"cursor": "x" * 65}, "cursor"),
    ("GET", "/jobs/{id}/executions", None, {"cursor": b64(b"-1:1")}, "cursor"),
    ("GET", "/jobs/{id}/executions", None, {"cursor": b64(b"253402300800000:1")}, "cursor"),
    ("GET", "/jobs/{id}/executions", None, {"cursor": b64(b"0:0")}, "cursor"),
    ("GET", "/jobs/{id}/executions", None, {"cursor": b64(b"0:1001")}, "cursor"),
    # POST /jobs
    ("POST", "/jobs", {**HOURLY, "timeout_s": 0}, None, "timeout_s"),
    ("POST", "/jobs", {**HOURLY, "timeout_s": 86_401}, None, "timeout_s"),
    ("POST", "/jobs", {**HOURLY, "timeout_s": "soon"}, None, "timeout_s"),
    ("POST", "/jobs", {**HOURLY, "max_retries": 21}, None, "max_retries"),
    ("POST", "/jobs", {**HOURLY, "max_retries": "many"}, None, "max_retries"),
    ("POST", "/jobs", {**HOURLY, "backoff": {"initial_delay_s": -1}}, None, "backoff.initial_delay_s"),
    ("POST", "/jobs", {**HOURLY, "backoff": {"multiplier": 11}}, None, "backoff.multiplier"),
    ("POST", "/jobs", {**HOURLY, "backoff": {"max_delay_s": 0}}, None, "backoff.max_delay_s"),
    ("POST", "/jobs", {**HOURLY, "backoff": {"colour": "red"}}, None, "backoff.colour"),
    ("POST", "/jobs", {**HOURLY, "backoff": 5}, None, "backoff"),
    ("POST", "/jobs", {**HOURLY, "idempotency_key": "k" * 129}, None, "idempotency_key"),
    ("POST", "/jobs", {**HOURLY, "idempotency_key": ""}, None, "idempotency_key"),
    ("POST", "/jobs", {**HOURLY, "topic": "payroll"}, None, "topic"),
    ("POST", "/jobs", {**HOURLY, "payload": {"blob": "x" * 1000}}, None, "payload"),
    ("POST", "/jobs", {**HOURLY, "schedule": {"at": "2026-11-22T10:30:00Z", "every": "PT5M"}}, None, "schedule"),
]


def bad_input_id(case: tuple[str, str, Any, dict[str, str] | None, str]) -> str:
    method, path, _, query, field = case
    route = path.replace("/jobs/{id}", "/jobs/id").replace("j" * 65, "long-id").strip("/").replace("/", "-")
    detail = next(iter(query.values()))[:12] if query else ""
    return f"{method}-{route}-{field}{'=' + detail if detail else ''}"


@pytest.mark.parametrize(("method", "path", "body", "query", "field"), BAD_INPUT,
                         ids=[bad_input_id(c) for c in BAD_INPUT])
def test_bad_input_names_the_field_and_writes_nothing(
    world: World, method: str, path: str, body: Any, query: dict[str, str] | None, field: str
) -> None:
    job = world.submit()
    add_history(world, job["job_id"], 1)
    before = world.state()
    status, answer = call(method, path.replace("{id}", job["job_id"]), body, query=query)
    assert 400 <= status < 500 and status != 404, answer
    assert field in fields(answer), answer
    assert world.state() == before


def test_bad_input_from_an_anonymous_caller_is_401_first(world: World) -> None:
    job = world.submit()
    for method, path, body, query, _ in BAD_INPUT:
        status, answer = call(method, path.replace("{id}", job["job_id"]), body, tenant=None, query=query)
        assert (status, answer["error"]) == (401, "unauthenticated"), (method, path)


# -- tenants' limits ------------------------------------------------------------------------------------


def test_a_submission_over_the_tenants_rate_gets_429_with_retry_after_naming_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jobrunner.adapters.quotas.memory import MemoryTenantQuotas

    monkeypatch.setattr(wiring, "_container", None)  # restored after the test
    store = MemoryJobStore()
    wiring.install(Container(
        Settings.from_env({"JOBRUNNER_SEGMENTS": "4",
                           "JOBRUNNER_TENANT_LIMITS": json.dumps({"*": {"submissions_per_second": 1}})}),
        store=store, publisher=MemoryPublisher(), leases=MemoryLeaseStore(), invoker=RecordingInvoker(),
        clock=ManualClock(NOW), quotas=MemoryTenantQuotas(),
    ))
    assert call("POST", "/jobs", HOURLY)[0] == 201
    response = handle(event("POST", "/jobs", HOURLY), None)
    assert (response["statusCode"], response["multiValueHeaders"]["Retry-After"]) == (429, ["1"])
    body = json.loads(response["body"])
    assert (body["error"], body["errors"]) == ("limit_reached", [{
        "field": "submissions_per_second", "reason": "this tenant may submit at most 1 jobs a second"}])
    assert len(store.jobs) == 1


def test_openapi_documents_the_tenants_refusals(world: World) -> None:
    _, document = call("GET", "/openapi.json", tenant=None)
    assert {"403", "429"} <= set(document["paths"]["/jobs"]["post"]["responses"])
    assert {"403", "429"} <= set(document["paths"]["/jobs/{job_id}"]["patch"]["responses"])
    assert "429" in document["paths"]["/jobs/{job_id}/run"]["post"]["responses"]
    assert "jobs_held" in document["paths"]["/jobs"]["post"]["responses"]["429"]["description"]
    assert "history_days" in document["paths"]["/jobs/{job_id}/executions"]["get"]["description"]
    assert "403" in document["paths"]["/segments"]["get"]["responses"]


# -- POST /jobs/batch ----------------------------------------------------------------------------------------


def test_a_batch_creates_every_job_in_order_with_its_first_run(world: World) -> None:
    at = {"schedule": {"at": "2026-11-22T11:00:00Z"}, "payload": {"n": 0}}
    body = {"jobs": [at, HOURLY, {**at, "payload": {"n": 2}, "tags": {"team": "a"}}]}
    status, answer = call("POST", "/jobs/batch", body)
    assert status == 201, answer
    assert [item["created"] for item in answer["items"]] == [True, True, True]
    jobs = [item["job"] for item in answer["items"]]
    assert [j["payload"] for j in jobs] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert jobs[2]["tags"] == {"team": "a"}
    # each job is stored with its first run, as POST /jobs stores it
    assert {job_id for _, job_id in world.store.jobs} == {j["job_id"] for j in jobs}
    assert sorted(r.job_id for r in world.store.rows.values()) == sorted(j["job_id"] for j in jobs)
    for job in jobs:
        status, read = call("GET", f"/jobs/{job['job_id']}")
        assert status == 200 and read["next_run_at"] == job["next_run_at"]


def test_a_batch_with_wrong_jobs_names_every_wrong_field_and_creates_nothing(world: World) -> None:
    before = world.state()
    body = {"jobs": [HOURLY, {"schedule": {"cron": "61 * * * *"}, "payload": {}},
                     {**HOURLY, "payload": {"pad": "x" * 2000}}, {**HOURLY, "surprise": 1}]}
    status, answer = call("POST", "/jobs/batch", body)
    assert status == 422, answer
    # the model names every wrong field in one pass, the unknown one with the others
    assert fields(answer) == {"jobs.1.schedule.cron", "jobs.2.payload", "jobs.3.surprise"}
    assert world.state() == before
    del body["jobs"][3]
    status, answer = call("POST", "/jobs/batch", body)
    assert status == 422, answer
    assert fields(answer) == {"jobs.1.schedule.cron", "jobs.2.payload"}
    assert world.state() == before


@pytest.mark.parametrize("jobs", [[], [HOURLY] * 101])
def test_a_batch_holds_1_to_100_jobs(world: World, jobs: list[dict[str, Any]]) -> None:
    status, answer = call("POST", "/jobs/batch", {"jobs": jobs})
    assert status == 422 and fields(answer) == {"jobs"}, answer


def test_a_batch_repeating_an_idempotency_key_returns_the_first_job(world: World) -> None:
    first = world.submit({**HOURLY, "idempotency_key": "k-1"})
    status, answer = call("POST", "/jobs/batch", {"jobs": [{**HOURLY, "idempotency_key": "k-1"}, HOURLY]})
    assert status == 201, answer
    assert [item["created"] for item in answer["items"]] == [False, True]
    assert answer["items"][0]["job"]["job_id"] == first["job_id"]
    status, again = call("POST", "/jobs/batch", {"jobs": [{**HOURLY, "idempotency_key": "k-1"}]})
    assert status == 200 and again["items"][0]["job"]["job_id"] == first["job_id"]


def test_a_batch_naming_a_topic_the_deployment_does_not_allow_creates_nothing(world: World) -> None:
    before = world.state()
    status, answer = call("POST", "/jobs/batch", {"jobs": [HOURLY, {**HOURLY, "topic": "secret"}]})
    assert status == 422 and fields(answer) == {"jobs.1.topic"}, answer
    assert world.state() == before


def test_a_patch_of_the_retries_alone_keeps_a_backoff_changed_while_it_was_on_its_way(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a job, and a PATCH of its backoff that lands just after the next request first reads the job
    job = world.submit({**HOURLY, "max_retries": 1, "backoff": {"initial_delay_s": 5}})
    job_id = job["job_id"]
    read = world.store.get_job
    raced: list[int] = []

    def get_job(*args: Any, **kwargs: Any) -> Any:
        found = read(*args, **kwargs)
        if not raced:
            raced.append(1)
            status, _ = call("PATCH", f"/jobs/{job_id}", {"backoff": {"initial_delay_s": 40, "max_delay_s": 600}})
            assert status == 200
        return found

    monkeypatch.setattr(world.store, "get_job", get_job)
    # When a PATCH of the retries alone is applied
    status, body = call("PATCH", f"/jobs/{job_id}", {"max_retries": 4})
    # Then it changes the retries and keeps the backoff that landed first (it merged what it read in its own
    # compare-and-set loop, not a copy read before it)
    assert status == 200 and raced, body
    assert body["max_retries"] == 4
    assert body["backoff"]["initial_delay_s"] == 40 and body["backoff"]["max_delay_s"] == 600
    stored = read("alice", job_id).spec.retry
    assert (stored.max_retries, stored.initial_delay_s, stored.max_delay_s) == (4, 40, 600)


@pytest.mark.parametrize("path", ["/jobs/batch", "/jobs/bulk", "/jobs/batch/"])
@pytest.mark.parametrize(("method", "body"), [("GET", None), ("DELETE", None), ("PATCH", {"max_retries": "x"}),
                                              ("OPTIONS", None), ("PUT", None)])
def test_a_path_a_route_names_literally_is_never_a_job_id(world: World, path: str, method: str, body: Any) -> None:
    # Found by the OpenAPI fuzz test: GET /jobs/batch looked for the job "batch" (404), and OPTIONS listed
    # DELETE, GET and PATCH as allowed. As in OpenAPI, a literal path is its own routes' only.
    response = handle(event(method, path, body), None)
    assert (response["statusCode"], json.loads(response["body"])["error"]) == (405, "method_not_allowed"), response
    assert {**response["headers"], **response.get("multiValueHeaders", {})}["Allow"] in ("POST", ["POST"])
