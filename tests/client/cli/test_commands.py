"""Each command: the request it sends, what it prints (table and JSON), and its exit code."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from tests.client.cli.fakes import TOKEN, job, reply

if TYPE_CHECKING:
    from pathlib import Path

    from tests.client.cli.fakes import Cli, FakeTransport


def test_submit_sends_the_schedule_and_options_as_a_post_jobs_body(cli: Cli, transport: FakeTransport) -> None:
    transport.on("POST", "/jobs", reply(201, job("j-42")))
    result = cli("submit", "--every", "PT5M", "--start", "+1h", "--payload", '{"type": "echo"}', "--topic", "jobs",
                 "--max-retries", "3", "--backoff-initial", "2", "--timeout-s", "60", "--jitter-s", "30",
                 "--idempotency-key", "k1")
    assert result.exit_code == 0, result.output
    assert transport.sent[0].body == {
        "schedule": {"every": "PT5M", "start": "2026-11-22T11:00:00Z"}, "payload": {"type": "echo"},
        "topic": "jobs", "max_retries": 3, "timeout_s": 60, "jitter_s": 30, "idempotency_key": "k1",
        "backoff": {"initial_delay_s": 2.0},
    }
    assert transport.sent[0].headers["Authorization"] == f"Bearer {TOKEN}"
    assert "Submitted job j-42" in result.stdout
    assert "SCHEDULED" in result.stdout


def test_submit_takes_relative_at_times_and_a_payload_from_a_file(
    cli: Cli, transport: FakeTransport, tmp_path: Path
) -> None:
    transport.on("POST", "/jobs", reply(201, job()))
    (tmp_path / "payload.json").write_text('{"big": [1, 2, 3]}')
    result = cli("submit", "--at", "+30s", "--payload", f"@{tmp_path / 'payload.json'}")
    assert result.exit_code == 0, result.output
    assert transport.sent[0].body == {"schedule": {"at": "2026-11-22T10:00:30Z"}, "payload": {"big": [1, 2, 3]}}


def test_submit_json_body_from_stdin_with_options_overriding_it(cli: Cli, transport: FakeTransport) -> None:
    transport.on("POST", "/jobs", reply(201, job()))
    body = {"schedule": {"cron": "0 9 * * *"}, "payload": {"a": 1}, "max_retries": 1}
    result = cli("submit", "--json", "-", "--timezone", "Europe/Paris", "--max-retries", "5", input=json.dumps(body))
    assert result.exit_code == 0, result.output
    assert transport.sent[0].body == {"schedule": {"cron": "0 9 * * *", "timezone": "Europe/Paris"},
                                      "payload": {"a": 1}, "max_retries": 5}


def test_submit_says_when_the_idempotency_key_gave_back_an_existing_job(cli: Cli, transport: FakeTransport) -> None:
    transport.on("POST", "/jobs", reply(200, job("j-old")))
    result = cli("submit", "--at", "now", "--idempotency-key", "same")
    assert result.exit_code == 0
    assert "Already submitted (same idempotency key): job j-old" in result.stdout


def test_submit_json_output_is_the_job_only(cli: Cli, transport: FakeTransport) -> None:
    transport.on("POST", "/jobs", reply(201, job("j-1")))
    result = cli("-o", "json", "submit", "--every", "PT1M")
    assert json.loads(result.stdout) == job("j-1")
    result = cli("submit", "--every", "PT1M", "-o", "json")  # per command too
    assert json.loads(result.stdout)["job_id"] == "j-1"


def test_usage_errors_exit_2_before_any_request(cli: Cli, transport: FakeTransport) -> None:
    for args in (["submit"], ["submit", "--at", "now", "--every", "PT1M"], ["submit", "--iso8601",
                 "R/2026-11-22T10:00:00Z/PT1H", "--start", "now"], ["submit", "--every", "PT1M", "--timezone", "UTC"],
                 ["submit", "--at", "now", "--payload", "{nope"], ["list", "--limit", "0"], ["nonsense"]):
        result = cli(*args)
        assert result.exit_code == 2, (args, result.output)
    assert transport.sent == []


def test_a_422_exits_1_and_prints_the_servers_field_errors(cli: Cli, transport: FakeTransport) -> None:
    transport.on("POST", "/jobs", reply(422, {
        "error": "validation_error", "message": "schedule.every: must be at least 10 seconds",
        "errors": [{"field": "schedule.every", "reason": "must be at least 10 seconds"}],
    }))
    result = cli("submit", "--every", "PT1S")
    assert result.exit_code == 1
    assert "the API rejected the request (HTTP 422)" in result.stderr
    assert "schedule.every: must be at least 10 seconds" in result.stderr
    assert result.stdout == ""
    result = cli("-o", "json", "submit", "--every", "PT1S")
    assert json.loads(result.stderr)["error"]["errors"] == [
        {"field": "schedule.every", "reason": "must be at least 10 seconds"}]


def test_not_found_exits_3_with_the_servers_message(cli: Cli, transport: FakeTransport) -> None:
    transport.on("GET", "/jobs/missing", reply(404, {"error": "not_found", "message": "no job missing"}))
    result = cli("show", "missing")
    assert result.exit_code == 3
    assert "no job missing (HTTP 404)" in result.stderr


def test_a_conflict_exits_1(cli: Cli, transport: FakeTransport) -> None:
    transport.on("POST", "/jobs/j/run", reply(409, {"error": "conflict", "message": "the job is cancelled"}))
    result = cli("run", "j")
    assert result.exit_code == 1
    assert "the job is cancelled (HTTP 409)" in result.stderr


def test_unauthenticated_exits_1_and_says_where_tokens_come_from(cli: Cli, transport: FakeTransport) -> None:
    transport.on("GET", "/jobs", reply(401, {"error": "unauthenticated", "message": "no authenticated tenant"}))
    cli.environ.pop("JOBRUNNER_TOKEN")
    result = cli("list")
    assert result.exit_code == 1
    assert "no authenticated tenant" in result.stderr
    assert "no token: pass --token" in result.stderr
    assert "Authorization" not in transport.sent[0].headers


def test_cannot_connect_exits_4(cli: Cli, transport: FakeTransport) -> None:
    transport.down = True
    cli.environ["JOBRUNNER_API_URL"] = "http://127.0.0.1:8080"
    result = cli("list")
    assert result.exit_code == 4
    assert "cannot connect to the API at http://127.0.0.1:8080" in result.stderr
    assert "make run" in result.stderr


def test_no_api_url_is_a_usage_error(cli: Cli) -> None:
    cli.environ.clear()
    result = cli("list")
    assert result.exit_code == 2
    assert "no API URL" in result.stderr


def test_list_shows_a_table_and_hints_at_the_next_page(cli: Cli, transport: FakeTransport) -> None:
    transport.on("GET", "/jobs", reply(200, {"items": [job("j-1"), job("j-2", status="PAUSED", next_run_at=None)],
                                             "next_cursor": "c2"}))
    result = cli("list", "--status", "paused", "--limit", "2")
    assert result.exit_code == 0, result.output
    assert transport.sent[0].query == {"limit": "2", "status": "PAUSED"}
    assert "j-1" in result.stdout and "j-2" in result.stdout
    assert "every PT5M" in result.stdout
    assert "2026-11-22 10:05:00Z (in 5 min 0 s)" in result.stdout
    assert "--cursor c2" in result.stderr


def test_list_all_follows_the_cursors(cli: Cli, transport: FakeTransport) -> None:
    transport.on("GET", "/jobs",
                 reply(200, {"items": [job("a")], "next_cursor": "c1"}),
                 reply(200, {"items": [job("b")], "next_cursor": None}))
    result = cli("-o", "json", "list", "--all")
    assert [j["job_id"] for j in json.loads(result.stdout)["items"]] == ["a", "b"]
    assert [s.query.get("cursor") for s in transport.sent] == [None, "c1"]


def test_show_asks_for_a_preview_of_the_next_fires(cli: Cli, transport: FakeTransport) -> None:
    transport.on("GET", "/jobs/j-1", reply(200, job("j-1", next_runs=["2026-11-22T10:05:00.000Z",
                                                                       "2026-11-22T10:10:00.000Z"])))
    result = cli("show", "j-1", "--preview", "2")
    assert result.exit_code == 0, result.output
    assert transport.sent[0].query == {"preview": "2"}
    assert "2026-11-22 10:10:00Z" in result.stdout
    assert "next fires" in result.stdout


def test_show_says_the_description_when_the_job_has_one(cli: Cli, transport: FakeTransport) -> None:
    # Given a job with a description, and one without
    transport.on("GET", "/jobs/j-1", reply(200, job("j-1", description="nightly report [bold]for ops[/bold]")))
    transport.on("GET", "/jobs/j-2", reply(200, job("j-2")))
    # Then show prints the first as written (never read as markup), and no description line for the second
    shown = cli("show", "j-1").stdout
    assert "description" in shown and "nightly report [bold]for ops[/bold]" in shown
    assert "description" not in cli("show", "j-2").stdout


FUNCTION = "arn:aws:lambda:eu-west-1:123456789012:function:export"
QUEUE = "https://sqs.eu-west-1.amazonaws.com/123456789012/work.fifo"


@pytest.mark.parametrize(("options", "target"), [
    (["--target-url", "https://hooks.example.com/run"], {"https": {"url": "https://hooks.example.com/run"}}),
    (["--target-url", "https://hooks.example.com/run", "--target-method", "PUT", "--target-header",
      "Authorization=Bearer t", "--target-header", "X-Team=payments", "--target-timeout", "5"],
     {"https": {"url": "https://hooks.example.com/run", "method": "PUT", "timeout_s": 5,
                "headers": {"Authorization": "Bearer t", "X-Team": "payments"}}}),
    (["--target-lambda", FUNCTION], {"lambda": {"function_arn": FUNCTION}}),
    (["--target-sqs", QUEUE, "--target-group-id", "g1"], {"sqs": {"queue_url": QUEUE, "message_group_id": "g1"}}),
])
def test_submit_sends_a_target(cli: Cli, transport: FakeTransport, options: list[str], target: dict[str, Any]) -> None:
    transport.on("POST", "/jobs", reply(201, job("j-1")))
    result = cli("submit", "--every", "PT5M", *options)
    assert result.exit_code == 0, result.output
    assert transport.sent[0].body == {"schedule": {"every": "PT5M"}, "target": target}


def test_a_target_option_replaces_the_topic_of_a_json_body(cli: Cli, transport: FakeTransport) -> None:
    transport.on("POST", "/jobs", reply(201, job("j-1")))
    body = {"schedule": {"every": "PT5M"}, "topic": "jobs"}
    result = cli("submit", "--json", "-", "--target-lambda", FUNCTION, input=json.dumps(body))
    assert result.exit_code == 0, result.output
    assert transport.sent[0].body == {"schedule": {"every": "PT5M"}, "target": {"lambda": {"function_arn": FUNCTION}}}


@pytest.mark.parametrize("options", [
    ["--target-url", "https://x.example", "--target-lambda", FUNCTION],
    ["--target-url", "https://x.example", "--topic", "jobs"],
    ["--target-method", "PUT"],
    ["--target-lambda", FUNCTION, "--target-timeout", "5"],
    ["--target-group-id", "g1"],
    ["--target-url", "https://x.example", "--target-header", "Authorization"],
])
def test_target_options_that_do_not_go_together_exit_2(cli: Cli, transport: FakeTransport,
                                                       options: list[str]) -> None:
    result = cli("submit", "--every", "PT5M", *options)
    assert result.exit_code == 2, result.output
    assert transport.sent == []


def test_show_says_where_a_job_with_a_target_delivers_without_header_values(
    cli: Cli, transport: FakeTransport,
) -> None:
    # Given a job delivered to a webhook with a credential in a header, and one of a topic's workers
    hook = {"https": {"url": "https://hooks.example.com/run", "method": "POST", "timeout_s": 10,
                      "headers": {"Authorization": "Bearer secret"}}}
    transport.on("GET", "/jobs/j-1", reply(200, job("j-1", target=hook, topic=None)))
    transport.on("GET", "/jobs/j-2", reply(200, job("j-2")))
    # Then show prints the target in the topic's place, its headers by name only
    shown = " ".join(cli("show", "j-1").stdout.split())
    assert "target https POST https://hooks.example.com/run (timeout 10 s; headers Authorization)" in shown
    assert "secret" not in shown and "topic" not in shown
    assert "target" not in cli("show", "j-2").stdout


def test_job_ids_are_escaped_in_paths(cli: Cli, transport: FakeTransport) -> None:
    result = cli("show", "../segments")
    assert result.exit_code == 3
    assert transport.sent[0].path == "/jobs/..%2Fsegments"


def test_cancel_pause_resume_print_the_job_as_it_now_stands(cli: Cli, transport: FakeTransport) -> None:
    transport.on("DELETE", "/jobs/j", reply(200, job("j", state="CANCELLED", status="CANCELLED", next_run_at=None)))
    transport.on("POST", "/jobs/j/pause", reply(200, job("j", state="PAUSED", status="PAUSED", next_run_at=None)))
    transport.on("POST", "/jobs/j/resume", reply(200, job("j")))
    assert "Job j is now CANCELLED" in cli("cancel", "j").stdout
    assert "Job j is now PAUSED" in cli("pause", "j").stdout
    result = cli("resume", "j", "--catch-up")
    assert "Job j is now SCHEDULED; next run 2026-11-22 10:05:00Z" in result.stdout
    assert transport.sent[-1].body == {"catch_up": True}
    cli("resume", "j")
    assert transport.sent[-1].body is None


def test_run_queues_a_manual_execution(cli: Cli, transport: FakeTransport) -> None:
    out = {"execution_id": "e-1", "job_id": "j", "due_at": "2026-11-22T10:00:00.000Z", "trigger": "MANUAL"}
    transport.on("POST", "/jobs/j/run", reply(202, out))
    result = cli("run", "j")
    assert result.exit_code == 0
    assert "Queued manual run e-1 of job j, due 2026-11-22 10:00:00Z" in result.stdout
    assert json.loads(cli("run", "j", "-o", "json").stdout) == out


def test_executions_show_lateness_and_errors(cli: Cli, transport: FakeTransport) -> None:
    transport.on("GET", "/jobs/j/executions", reply(200, {"items": [{
        "execution_id": "e-2", "scheduled_at": "2026-11-22T10:00:00.000Z", "attempt": 2, "status": "FAILED",
        "trigger": "RETRY", "due_at": "2026-11-22T10:00:10.000Z", "published_at": "2026-11-22T10:00:10.250Z",
        "finished_at": "2026-11-22T10:00:12.000Z", "error": "RuntimeError: boom",
    }], "next_cursor": "older"}))
    result = cli("executions", "j", "--limit", "1")
    assert result.exit_code == 0, result.output
    assert transport.sent[0].query == {"limit": "1"}
    row = next(line for line in result.stdout.splitlines() if "RETRY" in line)
    assert "FAILED" in row and "250 ms" in row and "1.8 s" in row and "RuntimeError: boom" in row
    assert "--cursor older" in result.stderr


def test_segments_mark_the_ones_behind(cli: Cli, transport: FakeTransport) -> None:
    items = [
        {"segment": 0, "watermark": "2026-11-22T09:59:00.000Z", "lag_s": 0.0, "last_heartbeat": None,
         "last_owner": "scan:a", "published_total": 1234, "healthy": True},
        {"segment": 1, "watermark": "2026-11-22T09:00:00.000Z", "lag_s": 3540.0, "last_heartbeat": None,
         "last_owner": None, "published_total": 0, "healthy": False},
    ]
    transport.on("GET", "/segments", reply(200, {"items": items}))
    result = cli("segments")
    assert result.exit_code == 0, result.output
    assert "1,234" in result.stdout and "BEHIND" in result.stdout and "59 min 0 s" in result.stdout
    assert "1 segment(s) behind: 1" in result.stderr


def test_list_filters_by_kind_and_tag_and_submit_sends_tags(cli: Cli, transport: FakeTransport) -> None:
    transport.on("GET", "/jobs", reply(200, {"items": [job("j-1")], "next_cursor": None}))
    result = cli("list", "--kind", "cron", "--tag", "team:payments")
    assert result.exit_code == 0, result.output
    assert (transport.sent[0].query["kind"], transport.sent[0].query["tag"]) == ("cron", "team:payments")
    transport.on("POST", "/jobs", reply(201, job("j-2")))
    result = cli("submit", "--every", "PT5M", "--tag", "team=payments", "--tag", "tier=1")
    assert result.exit_code == 0, result.output
    assert transport.sent[-1].body["tags"] == {"team": "payments", "tier": "1"}
    assert cli("submit", "--every", "PT5M", "--tag", "team").exit_code != 0


def test_bulk_follows_the_cursor_until_every_selected_job_is_done(cli: Cli, transport: FakeTransport) -> None:
    pages = iter([{"changed": ["a", "b"], "unchanged": [], "failed": [], "next_cursor": "c1"},
                  {"changed": ["c"], "unchanged": ["d"], "failed": [{"job_id": "e", "reason": "cancelled"}],
                   "next_cursor": None}])
    transport.on("POST", "/jobs/bulk", lambda request: reply(200, next(pages)))
    result = cli("bulk", "pause", "--tag", "team:payments", "-o", "json")
    assert result.exit_code == 0, result.output
    assert [s.body for s in transport.sent] == [
        {"action": "pause", "tag": "team:payments", "limit": 500},
        {"action": "pause", "tag": "team:payments", "limit": 500, "cursor": "c1"}]
    assert json.loads(result.stdout) == {"changed": ["a", "b", "c"], "unchanged": ["d"],
                                         "failed": [{"job_id": "e", "reason": "cancelled"}]}


def test_backfill_sends_the_range_and_lists_the_fires(cli: Cli, transport: FakeTransport) -> None:
    transport.on("POST", "/jobs/j-1/backfill", reply(202, {"fires": ["2026-11-22T09:00:00.000Z"], "dry_run": False,
                                                           "queued": 1}))
    result = cli("backfill", "j-1", "--from", "-2h", "--to", "now")
    assert result.exit_code == 0, result.output
    assert transport.sent[0].body == {"from": "2026-11-22T08:00:00Z", "to": "2026-11-22T10:00:00Z", "dry_run": False}
    assert "queued 1 fire(s)" in result.stdout and "2026-11-22 09:00:00" in result.stdout


def test_changes_shows_the_log_as_a_table(cli: Cli, transport: FakeTransport) -> None:
    transport.on("GET", "/jobs/j-1/changes", reply(200, {"items": [
        {"changed_at": "2026-11-22T10:00:00.000Z", "actor": "arn:aws:iam::1:role/Ops", "action": "pause",
         "version": 3, "details": {}}], "next_cursor": None}))
    result = cli("changes", "j-1")
    assert result.exit_code == 0, result.output
    assert "pause" in result.stdout and "role/Ops" in result.stdout


def test_fires_shows_the_ledger_and_says_whether_every_fire_is_accounted_for(
    cli: Cli, transport: FakeTransport
) -> None:
    fire = {"at": "2026-11-22T09:00:00.000Z", "due_at": "2026-11-22T09:00:00.000Z", "outcome": "published",
            "detail": None, "lateness_ms": 21.0, "dst": None, "executions": [{"execution_id": "e1"}]}
    missing = {**fire, "at": "2026-11-22T09:30:00.000Z", "outcome": "missing", "lateness_ms": None,
               "detail": "no execution is recorded", "executions": []}
    transport.on("GET", "/jobs/j-1/fires", reply(200, {"items": [fire], "summary": {"published": 1},
                                                       "unaccounted": 0, "notes": [], "next_cursor": "c2"}))
    result = cli("fires", "j-1", "--from", "-2h")
    assert result.exit_code == 0, result.output
    assert transport.sent[0].query == {"from": "2026-11-22T08:00:00Z", "to": "2026-11-22T10:00:00Z", "limit": "100"}
    assert "published" in result.stdout and "21 ms" in result.stdout
    assert "every past fire ran once" in result.stderr and "--cursor c2" in result.stderr
    # a fire nothing explains makes the command fail, so that a script can check the ledger
    transport.on("GET", "/jobs/j-1/fires", reply(200, {"items": [fire, missing], "summary": {"published": 1,
                                                       "missing": 1}, "unaccounted": 1, "notes": []}))
    result = cli("fires", "j-1")
    assert result.exit_code == 1 and "1 fire(s) nothing explains" in result.stderr
    assert "missing" in result.stdout


def test_calendars_put_show_list_and_delete(cli: Cli, transport: FakeTransport) -> None:
    stored = {"name": "holidays", "timezone": "Europe/Paris", "description": None, "updated_at": None,
              "exclude": [{"date": "2026-12-25", "note": "Christmas"}, {"from": "2027-01-08T18:00",
                                                                         "to": "2027-01-11T06:00"}]}
    transport.on("PUT", "/calendars/holidays", reply(201, stored))
    result = cli("calendars", "put", "holidays", "--timezone", "Europe/Paris", "--exclude", "2026-12-25=Christmas",
                 "--exclude", "2027-01-08T18:00..2027-01-11T06:00")
    assert result.exit_code == 0, result.output
    assert transport.sent[0].body == {"timezone": "Europe/Paris", "exclude": stored["exclude"]}
    assert "Created calendar holidays: 2 exclusion(s) in Europe/Paris" in result.stdout
    transport.on("GET", "/calendars/holidays", reply(200, stored))
    result = cli("calendars", "show", "holidays")
    assert "2027-01-08T18:00 .. 2027-01-11T06:00" in result.stdout and "Christmas" in result.stdout
    transport.on("GET", "/calendars", reply(200, {"items": [stored], "next_cursor": None}))
    assert "holidays" in cli("calendars", "list").stdout
    # a delete the API refuses (a job still names it) says why and exits 1
    transport.on("DELETE", "/calendars/holidays", reply(409, {"error": "conflict", "errors": [],
                                                              "message": "calendar holidays is named by 1 job(s)"}))
    result = cli("calendars", "delete", "holidays")
    assert result.exit_code == 1 and "named by 1 job" in result.stderr
    transport.on("DELETE", "/calendars/holidays", reply(204))
    assert cli("calendars", "delete", "holidays").exit_code == 0


def test_submit_names_a_calendar(cli: Cli, transport: FakeTransport) -> None:
    transport.on("POST", "/jobs", reply(201, job(calendar="holidays")))
    result = cli("submit", "--every", "PT1H", "--calendar", "holidays")
    assert result.exit_code == 0, result.output
    assert transport.sent[0].body["calendar"] == "holidays"


def test_submit_sends_end_conditions_and_show_says_them(cli: Cli, transport: FakeTransport) -> None:
    answered = job(schedule={"cron": "0 9 * * *", "timezone": "UTC", "start": "2026-11-22T10:00:00.000Z",
                             "end": "2026-11-24T09:00:00.000Z", "count": 2},
                   remaining_fires=2, delete_after_last=True)
    transport.on("POST", "/jobs", reply(201, answered))
    result = cli("submit", "--cron", "0 9 * * *", "--count", "2", "--end", "+3d", "--delete-after-last")
    assert result.exit_code == 0, result.output
    assert transport.sent[0].body["schedule"] == {"cron": "0 9 * * *", "count": 2, "end": "2026-11-25T10:00:00Z"}
    assert transport.sent[0].body["delete_after_last"] is True
    transport.on("GET", "/jobs/job-1", reply(200, answered))
    shown = cli("show", "job-1").stdout
    assert "after 2 fire(s); the last at 2026-11-24 09:00:00Z; 2 left; then the job is deleted" in shown
    # an end condition on a one-time job is a usage error, before anything is sent
    assert cli("submit", "--at", "+5m", "--count", "2").exit_code == 2


def test_submit_sends_the_overlap_and_catch_up_policies_and_show_says_them(cli: Cli, transport: FakeTransport) -> None:
    answered = job(overlap="buffer_one", catch_up={"window_s": 600, "most": 2})
    transport.on("POST", "/jobs", reply(201, answered))
    result = cli("submit", "--every", "PT1M", "--overlap", "buffer_one", "--catch-up-window", "600",
                 "--catch-up-most", "2")
    assert result.exit_code == 0, result.output
    assert (transport.sent[0].body["overlap"], transport.sent[0].body["catch_up"]) == (
        "buffer_one", {"window_s": 600, "most": 2})
    transport.on("GET", "/jobs/job-1", reply(200, answered))
    shown = cli("show", "job-1").stdout
    assert "buffer_one" in shown and "window_s 600, most 2" in shown


@pytest.mark.parametrize("args", [["submit", "--json", "[1]"], ["submit", "--json", '[["schedule", {"at": "now"}]]'],
                                  ["calendars", "put", "holidays", "--json", "5"]])
def test_a_json_body_that_is_not_an_object_is_a_usage_error(cli: Cli, transport: FakeTransport,
                                                            args: list[str]) -> None:
    # Given a --json body that is JSON but not an object (a list, a number)
    result = cli(*args)
    # Then it is refused as such, before any request (it used to crash in dict(), or pass as pairs)
    assert result.exit_code == 2, result.output
    assert "must be a JSON object" in result.output
    assert transport.sent == []


def test_secrets_show_rotate_and_end_rotation(cli: Cli, transport: FakeTransport) -> None:
    current = {"id": "sec_2", "secret": "whsec_QUJDREVGR0hJSktMTU5PUFFSU1RVVldY", "created_at": "2026-11-22T10:00:00Z",
               "current": True, "valid_until": None}
    previous = {"id": "sec_1", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                "created_at": "2026-10-01T00:00:00Z", "current": False, "valid_until": "2026-11-22T11:00:00Z"}
    transport.on("GET", "/webhook-secrets", reply(200, {"items": [previous | {"current": True,
                                                                              "valid_until": None}]}))
    result = cli("secrets", "show")
    assert result.exit_code == 0, result.output
    assert previous["secret"] in result.stdout and "current" in result.stdout
    # a rotation with a grace sends it, and shows both secrets with what to do next
    transport.on("POST", "/webhook-secrets/rotate", reply(200, {"items": [current, previous]}))
    result = cli("secrets", "rotate", "--grace", "3600")
    assert result.exit_code == 0, result.output
    assert transport.sent[-1].body == {"grace_s": 3600}
    assert "previous" in result.stdout and "2026-11-22 11:00:00" in result.stdout
    assert "jobrunner secrets end-rotation" in result.stderr
    # without --grace the API's default applies (an empty body)
    assert cli("secrets", "rotate", "-o", "json").exit_code == 0 and transport.sent[-1].body == {}
    # a grace out of bounds is refused before any request
    sent = len(transport.sent)
    assert cli("secrets", "rotate", "--grace", "604801").exit_code != 0 and len(transport.sent) == sent
    transport.on("DELETE", "/webhook-secrets/previous", reply(200, {"items": [current]}))
    result = cli("secrets", "end-rotation", "-o", "json")
    assert result.exit_code == 0 and json.loads(result.stdout) == {"items": [current]}
