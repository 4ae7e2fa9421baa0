"""The ``jobrunner`` CLI end to end: real HTTP to the local stack, real Kafka for ``tail``."""

from __future__ import annotations

import json
import socket
import time
from typing import TYPE_CHECKING, Any

import pytest
from typer.testing import CliRunner

from jobrunner_client.cli import app
from jobrunner_client.cli.bulk import state_path
from jobrunner_client.cli.session import Deps

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from typer.testing import Result

    from devstack.stack import LocalStack

pytestmark = pytest.mark.e2e

@pytest.fixture
def cli(local_stack: LocalStack, tmp_path: Path) -> Callable[..., Result]:
    environ = {"JOBRUNNER_API_URL": local_stack.url, "JOBRUNNER_TOKEN": local_stack.token,
               "KAFKA_BOOTSTRAP": local_stack.settings.kafka.bootstrap}

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(app, list(args), obj=Deps(environ=environ, cwd=tmp_path), env={"COLUMNS": "220"})

    return invoke


def documents(stdout: str) -> list[Any]:
    """The JSON documents the CLI printed. The local stack runs in this process, and its threads print to the
    same stdout that CliRunner captures (metrics as single-line JSON with "_aws", the example worker's lines),
    so each document the CLI wrote in one piece is picked out from between theirs."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    position = 0
    while position < len(stdout):
        if stdout[position] in "{[" and (position == 0 or stdout[position - 1] == "\n"):
            try:
                value, end = decoder.raw_decode(stdout, position)
            except ValueError:
                value, end = None, position + 1
            if value is not None and not (isinstance(value, dict) and "_aws" in value):
                found.append(value)
            position = max(end, position + 1)
        else:
            position += 1
    return found


def data(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    found = documents(result.stdout)
    assert len(found) == 1, result.stdout
    return found[0]


def wait_for(read: Callable[[], Any], done: Callable[[Any], bool], timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    value = read()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.5)
        value = read()
    assert done(value), value
    return value


def test_submit_list_show_run_executions_and_cancel(cli: Callable[..., Result]) -> None:
    # Given a one-time job submitted for three seconds from now
    job = data(cli("-o", "json", "submit", "--at", "+3s", "--payload", '{"type": "echo", "from": "cli"}'))
    job_id = job["job_id"]
    assert job["status"] == "SCHEDULED"
    # Then it is listed, and `show` tells its schedule and payload
    assert job_id in {j["job_id"] for j in data(cli("list", "--all", "-o", "json"))["items"]}
    table = cli("list")
    assert table.exit_code == 0 and job_id in table.stdout
    shown = cli("show", job_id)
    assert shown.exit_code == 0 and "once at" in shown.stdout and '"from":"cli"' in shown.stdout

    # When it runs, Then its execution succeeds
    def history() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = data(cli("executions", job_id, "-o", "json"))["items"]
        return items

    wait_for(history, lambda h: [e["status"] for e in h] == ["SUCCESS"])
    # When it is run by hand, Then a MANUAL execution joins the history and succeeds too
    queued = data(cli("run", job_id, "-o", "json"))
    assert queued["trigger"] == "MANUAL"
    final = wait_for(history, lambda h: len(h) == 2 and all(e["status"] == "SUCCESS" for e in h))
    assert {e["trigger"] for e in final} == {"SCHEDULE", "MANUAL"}
    table = cli("executions", job_id)
    assert table.exit_code == 0 and "MANUAL" in table.stdout and "LATENESS" in table.stdout

    # When it is cancelled, Then it says so, and a manual run is refused with the server's reason
    cancelled = cli("cancel", job_id)
    assert cancelled.exit_code == 0 and "is now CANCELLED" in cancelled.stdout
    refused = cli("run", job_id)
    assert refused.exit_code == 1 and "the job is cancelled" in refused.stderr
    missing = cli("show", "no-such-job")
    assert missing.exit_code == 3 and "no job no-such-job" in missing.stderr


def test_pause_and_resume(cli: Callable[..., Result]) -> None:
    job_id = data(cli("-o", "json", "submit", "--every", "PT1H", "--start", "+2h"))["job_id"]
    assert data(cli("pause", job_id, "-o", "json"))["status"] == "PAUSED"
    resumed = cli("resume", job_id)
    assert resumed.exit_code == 0 and "is now SCHEDULED" in resumed.stdout


def test_a_rejected_submit_prints_the_field_and_exits_1(cli: Callable[..., Result]) -> None:
    result = cli("submit", "--every", "PT1S")
    assert result.exit_code == 1
    assert "schedule.every: must be at least 10 seconds" in result.stderr


def test_segments(cli: Callable[..., Result], local_stack: LocalStack) -> None:
    items = data(cli("segments", "-o", "json"))["items"]
    assert [s["segment"] for s in items] == list(range(local_stack.settings.segments))
    assert "WATERMARK" in cli("segments").stdout


def test_tail_shows_the_execution_published_for_a_job(cli: Callable[..., Result]) -> None:
    job_id = data(cli("-o", "json", "submit", "--at", "+4s", "--payload", '{"tail": true}'))["job_id"]
    result = cli("tail", "jobs", "--job", job_id, "--count", "1", "--timeout", "60")
    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if job_id in line)
    assert "SCHEDULE" in row and '{"tail":true}' in row
    # and the worker's report on job-results, as JSON lines
    reports = cli("-o", "json", "tail", "job-results", "--job", job_id, "--from-beginning", "--count", "1",
                  "--timeout", "60")
    assert reports.exit_code == 0, reports.output
    report = next(d for d in documents(reports.stdout) if d.get("topic") == "job-results")
    assert (report["key"], report["value"]["status"]) == (job_id, "SUCCESS")


def test_import_reports_the_bad_line_and_a_rerun_adds_nothing(cli: Callable[..., Result], tmp_path: Path) -> None:
    source = tmp_path / "jobs.jsonl"
    source.write_text(
        '{"schedule": {"every": "PT10M", "start": "2030-01-01T00:00:00Z"}, "payload": {"n": 1}}\n'
        '{"schedule": {"every": "PT1S"}, "payload": {"n": 2}}\n'
        '{"schedule": {"cron": "0 4 * * *", "timezone": "Europe/Paris"}, "payload": {"n": 3}}\n'
    )
    before = len(data(cli("list", "--all", "-o", "json"))["items"])
    result = cli("import", str(source))
    assert result.exit_code == 1
    assert "3 record(s): 2 created, 0 already there, 0 done before, 1 failed" in result.stdout
    bad = next(line for line in result.stdout.splitlines() if line.strip().startswith("2 "))
    assert "schedule.every: must be at least 10 seconds" in bad
    assert state_path(source).exists()
    assert len(data(cli("list", "--all", "-o", "json"))["items"]) == before + 2

    # When it runs again (without its state too), Then no job is added
    again = documents(cli("import", str(source), "-o", "json").stdout)[0]
    assert (again["created"], again["skipped"], len(again["failed"])) == (0, 2, 1)
    state_path(source).unlink()
    fresh = documents(cli("import", str(source), "-o", "json").stdout)[0]
    assert (fresh["created"], fresh["existing"]) == (0, 2)
    assert len(data(cli("list", "--all", "-o", "json"))["items"]) == before + 2


def test_cannot_connect_exits_4(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = CliRunner().invoke(app, ["--url", f"http://127.0.0.1:{port}", "list"],
                                obj=Deps(environ={}, cwd=tmp_path))
    assert result.exit_code == 4
    assert "cannot connect to the API" in result.stderr and "make run" in result.stderr
