"""``jobrunner import``: bodies from JSONL and CSV, failures reported by line, resumable, never duplicated."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from jobrunner_client.cli.bulk import idempotency_key, state_path
from tests.client.cli.fakes import job, reply

if TYPE_CHECKING:
    from pathlib import Path

    from jobrunner_client.cli.client import HttpRequest, HttpResponse
    from tests.client.cli.fakes import Cli, FakeTransport


class FakeApi:
    """POST /jobs as the API does it: 422 for a schedule without a kind, one job per idempotency key."""

    def __init__(self) -> None:
        self.jobs: dict[str, str] = {}

    def __call__(self, request: HttpRequest) -> HttpResponse:
        body = json.loads(request.body or b"{}")
        if not any(k in body.get("schedule", {}) for k in ("at", "every", "cron", "iso8601")):
            return reply(422, {"error": "validation_error", "message": "schedule: needs exactly one of ...",
                               "errors": [{"field": "schedule", "reason": "needs exactly one of 'at', 'every'"}]})
        key = body["idempotency_key"]
        if key in self.jobs:
            return reply(200, job(self.jobs[key]))
        self.jobs[key] = f"job-{len(self.jobs) + 1}"
        return reply(201, job(self.jobs[key]))


JSONL = "\n".join([
    '{"schedule": {"every": "PT1M"}, "payload": {"n": 1}}',
    "",
    "# a comment",
    '{"schedule": {"at": "2026-11-23T00:00:00Z"}, "payload": {"n": 2}}',
    "{not json",
    '{"schedule": {}, "payload": {"n": 4}}',
    '{"schedule": {"cron": "0 * * * *"}, "idempotency_key": "mine"}',
]) + "\n"


def test_jsonl_lines_become_jobs_and_bad_lines_are_reported_by_number(
    cli: Cli, transport: FakeTransport, tmp_path: Path
) -> None:
    source = tmp_path / "jobs.jsonl"
    source.write_text(JSONL)
    api = FakeApi()
    transport.on("POST", "/jobs", api)
    result = cli("import", str(source))
    assert result.exit_code == 1, result.output  # some lines failed
    assert "5 record(s): 3 created, 0 already there, 0 done before, 2 failed" in result.stdout
    failures = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()[:1].isdigit()}
    assert "not valid JSON" in failures["5"]
    assert "schedule: needs exactly one of" in failures["6"]
    # Each line carries its own key, hash(file, line); a key the line names itself wins
    sent = [s.body for s in transport.sent]
    assert [b["idempotency_key"] for b in sent[:2]] == [
        idempotency_key(source, 1, '{"schedule": {"every": "PT1M"}, "payload": {"n": 1}}'),
        idempotency_key(source, 4, '{"schedule": {"at": "2026-11-23T00:00:00Z"}, "payload": {"n": 2}}'),
    ]
    assert sent[-1]["idempotency_key"] == "mine"
    state = json.loads(state_path(source).read_text())
    assert sorted(state["done"]) == ["1", "4", "7"]


def test_a_rerun_skips_the_lines_done_and_sends_only_the_fixed_ones(
    cli: Cli, transport: FakeTransport, tmp_path: Path
) -> None:
    source = tmp_path / "jobs.jsonl"
    source.write_text(JSONL)
    api = FakeApi()
    transport.on("POST", "/jobs", api)
    cli("import", str(source))
    transport.sent.clear()
    # When line 6 is fixed and the import runs again
    source.write_text(JSONL.replace('{"schedule": {}, "payload": {"n": 4}}', '{"schedule": {"every": "PT5M"}}'))
    result = cli("-o", "json", "import", str(source))
    summary = json.loads(result.stdout)
    # Then only the fixed line is sent; line 5 is still bad; nothing is duplicated
    assert [s.body["schedule"] for s in transport.sent] == [{"every": "PT5M"}]
    assert (summary["created"], summary["skipped"], len(summary["failed"])) == (1, 3, 1)
    assert summary["failed"][0]["line"] == 5
    assert len(api.jobs) == 4
    assert result.exit_code == 1


def test_without_its_state_file_a_rerun_still_makes_no_duplicate(
    cli: Cli, transport: FakeTransport, tmp_path: Path
) -> None:
    source = tmp_path / "jobs.jsonl"
    source.write_text('{"schedule": {"every": "PT1M"}}\n{"schedule": {"every": "PT2M"}}\n')
    api = FakeApi()
    transport.on("POST", "/jobs", api)
    assert cli("import", str(source)).exit_code == 0
    state_path(source).unlink()
    summary = json.loads(cli("import", str(source), "-o", "json").stdout)
    assert (summary["created"], summary["existing"]) == (0, 2)
    assert len(api.jobs) == 2


def test_csv_columns_become_the_body(cli: Cli, transport: FakeTransport, tmp_path: Path) -> None:
    source = tmp_path / "jobs.csv"
    source.write_text(
        "at,every,cron,timezone,payload,topic,max_retries,initial_delay_s,timeout_s\n"
        '2026-11-23T00:00:00Z,,,,"{""n"": 1}",jobs,2,1.5,30\n'
        ',PT5M,,,,,,,\n'
        ',,0 9 * * *,Europe/Paris,"{""multi"":\n""line""}",,,,\n'
        ",,,,,,lots,,\n"
    )
    api = FakeApi()
    transport.on("POST", "/jobs", api)
    result = cli("-o", "json", "import", str(source))
    summary = json.loads(result.stdout)
    bodies = [s.body for s in transport.sent]
    for body in bodies:
        body.pop("idempotency_key")
    assert bodies == [
        {"schedule": {"at": "2026-11-23T00:00:00Z"}, "payload": {"n": 1}, "topic": "jobs", "max_retries": 2,
         "timeout_s": 30, "backoff": {"initial_delay_s": 1.5}},
        {"schedule": {"every": "PT5M"}},
        {"schedule": {"cron": "0 9 * * *", "timezone": "Europe/Paris"}, "payload": {"multi": "line"}},
    ]
    assert summary["failed"] == [{"line": 6, "message": "max_retries must be a whole number, not 'lots'",
                                  "errors": []}]
    assert [j["line"] for j in summary["jobs"]] == [2, 3, 4]


def test_csv_target_columns_become_the_bodys_target(cli: Cli, transport: FakeTransport, tmp_path: Path) -> None:
    source = tmp_path / "jobs.csv"
    source.write_text(
        "every,target_url,target_lambda,target_sqs,target_group_id,target\n"
        "PT5M,https://hooks.example.com/a,,,,\n"
        "PT5M,,arn:aws:lambda:eu-west-1:123456789012:function:f,,,\n"
        "PT5M,,,https://sqs.eu-west-1.amazonaws.com/123456789012/q.fifo,g1,\n"
        'PT5M,,,,,"{""https"": {""url"": ""https://hooks.example.com/b"", ""method"": ""PUT""}}"\n'
        "PT5M,https://hooks.example.com/a,arn:aws:lambda:eu-west-1:123456789012:function:f,,,\n"
        "PT5M,https://hooks.example.com/a,,,g1,\n"
        "PT5M,,,,,[1]\n"
    )
    transport.on("POST", "/jobs", FakeApi())
    summary = json.loads(cli("-o", "json", "import", str(source)).stdout)
    assert [s.body["target"] for s in transport.sent] == [
        {"https": {"url": "https://hooks.example.com/a"}},
        {"lambda": {"function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:f"}},
        {"sqs": {"queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/q.fifo", "message_group_id": "g1"}},
        {"https": {"url": "https://hooks.example.com/b", "method": "PUT"}},
    ]
    assert [(f["line"], f["message"]) for f in summary["failed"]] == [
        (6, "give one target, not target_url and target_lambda"),
        (7, "target_group_id goes with target_sqs"),
        (8, 'target must be a JSON object, e.g. {"https": {"url": "https://..."}}'),
    ]


def test_an_unknown_csv_column_or_format_is_a_usage_error(cli: Cli, transport: FakeTransport, tmp_path: Path) -> None:
    (tmp_path / "jobs.csv").write_text("at,colour\nnow,red\n")
    result = cli("import", str(tmp_path / "jobs.csv"))
    assert result.exit_code == 2
    assert "unknown CSV column 'colour'" in result.output
    (tmp_path / "jobs.txt").write_text("{}\n")
    assert cli("import", str(tmp_path / "jobs.txt")).exit_code == 2
    assert cli("import", str(tmp_path / "missing.jsonl")).exit_code == 2
    assert transport.sent == []


def test_a_rejected_token_stops_the_import_at_once(cli: Cli, transport: FakeTransport, tmp_path: Path) -> None:
    source = tmp_path / "jobs.jsonl"
    source.write_text('{"schedule": {"every": "PT1M"}}\n' * 5)
    transport.on("POST", "/jobs", reply(401, {"error": "unauthenticated", "message": "no authenticated tenant"}))
    result = cli("import", str(source))
    assert result.exit_code == 1
    assert len(transport.sent) == 1
    assert "no authenticated tenant" in result.stderr
    assert "stopped early" in result.stderr


def test_losing_the_api_midway_keeps_what_was_done_and_exits_4(
    cli: Cli, transport: FakeTransport, tmp_path: Path
) -> None:
    source = tmp_path / "jobs.jsonl"
    source.write_text("".join(f'{{"schedule": {{"every": "PT{n + 10}S"}}}}\n' for n in range(4)))
    api = FakeApi()

    def flaky(request: HttpRequest) -> HttpResponse:
        if len(api.jobs) == 2:
            transport.down = True  # the next request cannot connect
        return api(request)

    transport.on("POST", "/jobs", flaky)
    result = cli("import", str(source))
    assert result.exit_code == 4
    assert sorted(json.loads(state_path(source).read_text())["done"]) == ["1", "2", "3"]
    # When the API is back, the rerun sends only line 4
    transport.down = False
    transport.sent.clear()
    result = cli("import", str(source))
    assert result.exit_code == 0, result.output
    assert [s.body["schedule"]["every"] for s in transport.sent] == ["PT13S"]
