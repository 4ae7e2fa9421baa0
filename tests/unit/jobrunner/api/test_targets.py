"""A job's ``target`` through the API: submitted, shown, changed by a PATCH and refused naming its field.

The stage here allows https and lambda targets, and the functions of one account; the same approach as
``test_routes.py`` (API Gateway events through the Lambda entry point, memory adapters, a manual clock).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from jobrunner import wiring
from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.invokers.memory import RecordingInvoker
from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.config import Settings
from jobrunner.domain.targets import HttpsTarget
from jobrunner.wiring import Container
from tests.unit.jobrunner.api.test_routes import HOURLY, call, fields

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
HOOK = {"https": {"url": "https://hooks.example.com/run", "headers": {"Authorization": "Bearer t"}}}
FUNCTION = "arn:aws:lambda:eu-west-1:123456789012:function:export"


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> MemoryJobStore:
    monkeypatch.setattr(wiring, "_container", None)  # restored after the test
    store = MemoryJobStore()
    wiring.install(Container(
        Settings.from_env({"JOBRUNNER_SEGMENTS": "4", "JOBRUNNER_ALLOWED_TOPICS": "jobs,reports",
                           "JOBRUNNER_TARGET_KINDS": "https,lambda",
                           "JOBRUNNER_TARGET_LAMBDA_ALLOW": "123456789012"}),
        store=store, publisher=MemoryPublisher(), leases=MemoryLeaseStore(), invoker=RecordingInvoker(),
        clock=ManualClock(NOW),
    ))
    return store


def submitted(body: dict[str, Any]) -> dict[str, Any]:
    status, job = call("POST", "/jobs", body)
    assert status == 201, job
    return job


def test_a_job_with_a_target_is_shown_with_it_and_without_a_topic(store: MemoryJobStore) -> None:
    # Given a job submitted with an HTTPS target, its method in lower case and its timeout left out
    job = submitted({**HOURLY, "target": {"https": {**HOOK["https"], "method": "put"}}})
    # Then it is shown, and kept, with the target as the domain reads it (the defaults filled in) and no topic
    shown = {"https": {"url": "https://hooks.example.com/run", "method": "PUT",
                       "headers": {"Authorization": "Bearer t"}, "timeout_s": 10}}
    assert (job["target"], job["topic"]) == (shown, None)
    assert call("GET", f"/jobs/{job['job_id']}")[1]["target"] == shown
    [kept] = store.jobs.values()
    assert kept.spec.target == HttpsTarget("https://hooks.example.com/run", "PUT", {"Authorization": "Bearer t"})


def test_a_job_without_a_target_shows_none(store: MemoryJobStore) -> None:
    job = submitted(HOURLY)
    assert (job["target"], job["topic"]) == (None, "jobs")


@pytest.mark.parametrize(("target", "field"), [
    ({"https": {"url": "http://hooks.example.com/"}}, "target.https.url"),
    ({"https": {"url": "https://hooks.example.com/", "timeout_s": 31}}, "target.https.timeout_s"),
    ({"https": {"url": "https://hooks.example.com/", "headers": {"Webhook-Id": "x"}}},
     "target.https.headers.Webhook-Id"),
    ({"https": {"url": "https://hooks.example.com/", "verb": "POST"}}, "target.https.verb"),
    ({"https": {"url": 7}}, "target.https.url"),
    ({"https": {}}, "target.https.url"),
    ({"lambda": {"function_arn": "export"}}, "target.lambda.function_arn"),
    ({"lambda": {"function_arn": "arn:aws:lambda:eu-west-1:210987654321:function:export"}},
     "target.lambda.function_arn"),  # not on the stage's allow-list
    ({"sqs": {"queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/work"}}, "target"),  # a kind not allowed
    ({"https": HOOK["https"], "lambda": {"function_arn": FUNCTION}}, "target"),
    ({"ftp": {}}, "target"),
    ("https://hooks.example.com/", "target"),
])
def test_a_wrong_target_is_refused_naming_its_field(store: MemoryJobStore, target: Any, field: str) -> None:
    status, body = call("POST", "/jobs", {**HOURLY, "target": target})
    assert (status, fields(body)) == (422, {field}), body
    assert store.jobs == {}


def test_a_wrong_target_is_named_with_every_other_wrong_field_and_by_its_item_in_a_batch(
    store: MemoryJobStore,
) -> None:
    status, body = call("POST", "/jobs", {**HOURLY, "timeout_s": 0, "target": {"https": {"url": "http://x.example"}}})
    assert (status, fields(body)) == (422, {"timeout_s", "target.https.url"})
    status, body = call("POST", "/jobs/batch", {"jobs": [HOURLY, {**HOURLY, "target": {"https": {"url": "ftp://x"}}}]})
    assert (status, fields(body)) == (422, {"jobs.1.target.https.url"})


@pytest.mark.parametrize(("extra", "field"), [
    ({"topic": "reports"}, "topic"),
    ({"overlap": "cancel_other"}, "overlap"),
    ({"payload": {"at": "<jobrunner.scheduled-time>", "who": "<jobrunner.user>"}}, "payload"),
])
def test_a_job_with_a_target_keeps_its_rules(store: MemoryJobStore, extra: dict[str, Any], field: str) -> None:
    status, body = call("POST", "/jobs", {**HOURLY, "target": HOOK, **extra})
    assert (status, fields(body)) == (422, {field}), body
    assert store.jobs == {}


def test_an_unknown_context_keyword_is_named_in_the_reason(store: MemoryJobStore) -> None:
    status, body = call("POST", "/jobs", {**HOURLY, "target": HOOK, "payload": ["<jobrunner.user>"]})
    assert status == 422 and body["errors"][0]["reason"].startswith("<jobrunner.user> is not a context keyword")
    # (a job of a topic's workers may hold such text: its workers read the payload as written)
    assert submitted({**HOURLY, "payload": ["<jobrunner.user>"]})["payload"] == ["<jobrunner.user>"]


def test_a_patch_moves_a_job_between_its_topic_and_a_target(store: MemoryJobStore) -> None:
    # Given a job of the reports topic
    job = submitted({**HOURLY, "topic": "reports"})
    path = f"/jobs/{job['job_id']}"
    # When a PATCH gives it a target: it has no topic any more
    status, moved = call("PATCH", path, {"target": {"lambda": {"function_arn": FUNCTION}}})
    assert (status, moved["target"], moved["topic"]) == (200, {"lambda": {"function_arn": FUNCTION}}, None)
    # When a PATCH names a topic without removing the target: refused, naming the topic
    status, body = call("PATCH", path, {"topic": "reports"})
    assert (status, fields(body)) == (422, {"topic"})
    # When a PATCH changes the target to one the stage does not allow: refused, the job as it was
    status, body = call("PATCH", path, {"target": {"lambda": {"function_arn": FUNCTION.replace("1234", "9999")}}})
    assert (status, fields(body)) == (422, {"target.lambda.function_arn"})
    # When a PATCH leaves the target out: it stays
    assert call("PATCH", path, {"description": "x"})[1]["target"] == {"lambda": {"function_arn": FUNCTION}}
    # When a PATCH removes it: the job goes to the default topic, or to the one the PATCH names
    status, back = call("PATCH", path, {"target": None})
    assert (status, back["target"], back["topic"]) == (200, None, "jobs")
    call("PATCH", path, {"target": HOOK})
    status, back = call("PATCH", path, {"target": None, "topic": "reports"})
    assert (status, back["target"], back["topic"]) == (200, None, "reports")


def test_a_patch_with_a_wrong_target_names_its_field(store: MemoryJobStore) -> None:
    job = submitted(HOURLY)
    status, body = call("PATCH", f"/jobs/{job['job_id']}", {"target": {"https": {"url": "https://x.example/#f"}}})
    assert (status, fields(body)) == (422, {"target.https.url"})
