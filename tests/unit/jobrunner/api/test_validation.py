"""A request body is validated once, by its model: every wrong field at once, the schedule a union of its kinds.

Through the Lambda entry point with the memory adapters, as ``test_routes.py`` does (its ``world`` fixture).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jobrunner.api.schedules import AtIn, CronIn, EveryIn, Iso8601In
from jobrunner.domain.schedules.parsing import ALLOWED
from tests.unit.jobrunner.api.test_routes import HOURLY, World, call, fields, world

__all__ = ["world"]

ROOT = Path(__file__).resolve().parents[4]
THREE_WRONG = {"schedule": {"cron": "61 * * * *", "timezone": "Mars/Olympus"}, "max_retries": 99}


def reasons(answer: dict[str, Any]) -> dict[str, str]:
    return {e["field"]: e["reason"] for e in answer["errors"]}


def test_a_body_with_three_wrong_fields_gets_three_errors(world: World) -> None:
    status, answer = call("POST", "/jobs", THREE_WRONG)
    assert (status, answer["error"]) == (422, "validation_error"), answer
    assert fields(answer) == {"schedule.cron", "schedule.timezone", "max_retries"}
    assert "minute 61 is out of range" in reasons(answer)["schedule.cron"]
    assert "unknown time zone 'Mars/Olympus'" in reasons(answer)["schedule.timezone"]


def test_a_patch_with_three_wrong_fields_gets_three_errors(world: World) -> None:
    job = world.submit()
    status, answer = call("PATCH", f"/jobs/{job['job_id']}", THREE_WRONG)
    assert status == 422 and fields(answer) == {"schedule.cron", "schedule.timezone", "max_retries"}, answer


def test_an_unknown_field_comes_back_with_the_other_wrong_fields(world: World) -> None:
    body = {"schedule": {"every": "PT1S", "start": "yesterday"}, "surprise": 1, "timeout_s": 0,
            "payload": {"pad": "x" * 2000}}
    status, answer = call("POST", "/jobs", body)
    assert status == 422, answer
    assert fields(answer) == {"schedule.every", "schedule.start", "surprise", "timeout_s", "payload"}
    assert reasons(answer)["surprise"] == "unknown field"
    assert reasons(answer)["payload"].endswith("the limit is 1000")  # the tenant's limit (test_routes' settings)


@pytest.mark.parametrize("method", ["POST", "PATCH"])
@pytest.mark.parametrize("wrong", [{"every": {}}, {"every": [None, None]}, {"every": False}, {"every": 0},
                                   {"cron": 5}, {"at": []}, {"iso8601": {}}, {"cron": "* * * * *", "timezone": 1},
                                   {"every": "PT1M", "start": False}])
def test_a_schedule_field_that_is_not_text_is_a_422_naming_it(world: World, method: str,
                                                               wrong: dict[str, Any]) -> None:
    # Found by the OpenAPI fuzz test: these reached the domain's text parsers and answered 500.
    path = f"/jobs/{world.submit()['job_id']}" if method == "PATCH" else "/jobs"
    status, answer = call(method, path, {"schedule": wrong})
    assert status == 422, answer
    named = {f"schedule.{key}" for key, value in wrong.items() if not isinstance(value, str)}
    assert fields(answer) == named, answer
    assert set(reasons(answer).values()) == {"Input should be a valid string"}


def test_a_key_of_another_kind_says_which_kind_refuses_it(world: World) -> None:
    status, answer = call("POST", "/jobs", {"schedule": {"at": "2026-11-22T11:00:00Z", "count": 2}})
    assert (status, reasons(answer)) == (422, {"schedule.count": "not allowed with 'at'"})
    status, answer = call("POST", "/jobs", {"schedule": {"iso8601": "R2/2026-11-22T11:00:00Z/PT1H", "count": 2}})
    assert reasons(answer) == {"schedule.count": "an ISO 8601 repeat states its own count: R<n>/..."}
    status, answer = call("POST", "/jobs", {"schedule": {"cron": "0 * * * *", "dst": {"gap": "skip", "x": 1}}})
    assert reasons(answer) == {"schedule.dst.x": "unknown field"}


def test_a_schedule_with_no_kind_or_two_names_the_schedule(world: World) -> None:
    for schedule in ({}, {"at": "2026-11-22T11:00:00Z", "every": "PT1H"}, "PT1H"):
        status, answer = call("POST", "/jobs", {"schedule": schedule, "max_retries": -1})
        assert status == 422 and reasons(answer) == {
            "schedule": "needs exactly one of 'at', 'every', 'cron', 'iso8601'",
            "max_retries": "Input should be greater than or equal to 0"}, answer


def test_the_openapi_document_names_the_schedule_kinds_as_a_union(world: World) -> None:
    _, document = call("GET", "/openapi.json", tenant=None)
    schemas = document["components"]["schemas"]
    for model in ("JobIn", "JobPatchIn"):
        schedule = schemas[model]["properties"]["schedule"]
        refs = [part["$ref"] for part in schedule.get("anyOf", [schedule]) if "$ref" in part]
        assert refs == ["#/components/schemas/ScheduleIn"]
    union = schemas["ScheduleIn"]["oneOf"]
    assert [ref["$ref"].rsplit("/", 1)[1] for ref in union] == ["AtIn", "EveryIn", "CronIn", "Iso8601In"]
    # every kind's fields listed together too, for a reader (which go together is the oneOf's to say)
    assert set(schemas["ScheduleIn"]["properties"]) == {"at", "every", "cron", "iso8601", "start", "end", "count",
                                                        "timezone", "dst"}
    assert schemas["AtIn"]["required"] == ["at"] and schemas["AtIn"]["additionalProperties"] is False
    assert set(schemas["CronIn"]["properties"]) == {"cron", "timezone", "dst", "start", "end", "count"}
    assert set(schemas["Iso8601In"]["properties"]) == {"iso8601", "end"}


def test_no_module_reads_the_resolvers_private_route_tables() -> None:
    private = re.compile(r"\._(static|dynamic)_routes\b")
    readers = [str(path.relative_to(ROOT)) for folder in ("layers", "functions", "devstack", "tests", "bench", "chaos")
               for path in (ROOT / folder).rglob("*.py") if private.search(path.read_text(encoding="utf-8"))
               and path != Path(__file__).resolve()]
    assert readers == []


def test_a_bound_changed_in_its_constant_changes_the_models_check_and_the_specs_message() -> None:
    # Given the timeout bound set to 600 in its one constant, before anything reads it
    script = """
import json
import jobrunner.domain.spec as spec
spec.MAX_TIMEOUT_S = 600
from datetime import timedelta
from pydantic import ValidationError
from jobrunner.api.schemas import JobIn
from jobrunner.domain.errors import InvalidField
from jobrunner.domain.schedules import Every
JobIn.model_validate({"schedule": {"every": "PT1H"}, "timeout_s": 600})
try:
    JobIn.model_validate({"schedule": {"every": "PT1H"}, "timeout_s": 601})
except ValidationError as wrong:
    model = wrong.errors()[0]["msg"]
try:
    spec.JobSpec(Every(timedelta(hours=1)), {}, timeout_s=601).checked()
except InvalidField as wrong:
    service = wrong.reason
print(json.dumps([model, service, JobIn.model_json_schema()["properties"]["timeout_s"]["anyOf"][0]["maximum"]]))
"""
    # When the model and the spec check a timeout
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": f"{ROOT / 'layers'}:{ROOT}"}).stdout
    # Then both use it, and so does the OpenAPI schema
    assert json.loads(out) == ["Input should be less than or equal to 600", "must be between 1 and 600 seconds", 600]


def test_a_valid_schedule_of_each_kind_is_accepted(world: World) -> None:
    for schedule in ({"at": "2026-11-22T11:00:00Z"}, {"every": "PT5M", "count": 3},
                     {"cron": "0 9 * * MON-FRI", "timezone": "Europe/Paris", "dst": {"gap": "skip"}},
                     {"iso8601": "R5/2026-11-22T11:00:00Z/PT1H", "end": "2026-11-22T13:30:00Z"}):
        status, job = call("POST", "/jobs", {**HOURLY, "schedule": schedule})
        assert status == 201, job
        assert next(iter(schedule)) in job["schedule"]


def test_wrong_tags_come_back_with_the_other_wrong_fields(world: World) -> None:
    body = {**HOURLY, "tags": {"team:x": "a", "tier": "x" * 300}, "max_retries": 99}
    status, answer = call("POST", "/jobs", body)
    assert status == 422 and fields(answer) == {"tags.team:x", "tags.tier", "max_retries"}, answer
    assert reasons(answer)["tags.team:x"] == "a key is 1 to 64 letters, digits, '_', '.', '/' or '-'"


def test_each_schedule_kinds_model_takes_the_keys_its_parser_takes() -> None:
    # The shape of a schedule is declared once (domain.schedules.parsing.ALLOWED); each kind's model holds its keys.
    models = {"at": AtIn, "every": EveryIn, "cron": CronIn, "iso8601": Iso8601In}
    assert {kind: set(model.model_fields) for kind, model in models.items()} == {
        kind: set(keys) for kind, keys in ALLOWED.items()}


@pytest.mark.parametrize("value", [0, 1, "true", "yes", 1.0])
def test_a_boolean_field_takes_only_true_or_false(world: World, value: Any) -> None:
    # Found by the OpenAPI fuzz test: {"catch_up": 0} resumed a job, though the document says boolean
    job_id = world.submit()["job_id"]
    for method, path, body, field in [
        ("POST", "/jobs", {"schedule": {"cron": "0 * * * *"}, "delete_after_last": value}, "delete_after_last"),
        ("PATCH", f"/jobs/{job_id}", {"delete_after_last": value}, "delete_after_last"),
        ("POST", f"/jobs/{job_id}/resume", {"catch_up": value}, "catch_up"),
        ("POST", f"/jobs/{job_id}/backfill", {"from": "2026-11-22T08:00:00Z", "to": "2026-11-22T09:00:00Z",
                                             "dry_run": value}, "dry_run"),
    ]:
        status, answer = call(method, path, body)
        assert (status, fields(answer)) == (422, {field}), (method, path, answer)
