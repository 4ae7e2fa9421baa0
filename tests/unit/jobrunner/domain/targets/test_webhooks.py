"""The request of one attempt: the body template, the context headers and a signature a receiver verifies."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook

from jobrunner.domain.jobs import Trigger
from jobrunner.domain.targets.model import HttpsTarget
from jobrunner.domain.targets.signing import WebhookSecret
from jobrunner.domain.targets.templates import DeliveryContext, render_body, render_payload, unknown_keywords
from jobrunner.domain.targets.webhooks import context_headers, webhook_request

CONTEXT = DeliveryContext(
    execution_id="0b6c2f1e-9a4d-5e3f-8c7b-1d2e3f4a5b6c", job_id="job-42",
    scheduled_at=datetime(2026, 11, 22, 10, 0, tzinfo=UTC), attempt=2, trigger=Trigger.RETRY,
)
SECRET = WebhookSecret(b"s" * 32)
OLD_SECRET = WebhookSecret(b"t" * 32)
TARGET = HttpsTarget("https://hooks.example.com/run", headers={"Authorization": "Bearer k", "X-Team": "pay"})


@pytest.mark.parametrize(("payload", "rendered"), [
    ("<jobrunner.attempt>", 2),
    ({"n": "<jobrunner.attempt>"}, {"n": 2}),
    ({"at": "<jobrunner.scheduled-time>"}, {"at": "2026-11-22T10:00:00.000Z"}),
    ({"id": "<jobrunner.execution-id>", "job": "<jobrunner.job-id>", "why": "<jobrunner.trigger>"},
     {"id": CONTEXT.execution_id, "job": "job-42", "why": "RETRY"}),
    ({"text": "attempt <jobrunner.attempt> of <jobrunner.job-id>"}, {"text": "attempt 2 of job-42"}),
    ([{"deep": ["<jobrunner.trigger>"]}], [{"deep": ["RETRY"]}]),
    ({"<jobrunner.attempt>": "key"}, {"<jobrunner.attempt>": "key"}),  # keys are never read
    ({"other": "<jobrunner.unknown>", "plain": "<b>bold</b>"},
     {"other": "<jobrunner.unknown>", "plain": "<b>bold</b>"}),
    ({"n": 1.5, "t": True, "z": None}, {"n": 1.5, "t": True, "z": None}),
])
def test_keywords_are_substituted_in_string_values(payload: Any, rendered: Any) -> None:
    assert render_payload(payload, CONTEXT) == rendered


def test_a_substituted_value_cannot_break_out_of_its_string() -> None:
    # Given a job id that holds JSON syntax, when it is substituted, then the body is still one string value
    context = DeliveryContext('x","admin":true,"y":"', "job\"}\n", CONTEXT.scheduled_at, 1, Trigger.SCHEDULE)
    body = render_body({"note": "run <jobrunner.execution-id> of <jobrunner.job-id>"}, context)
    assert json.loads(body) == {"note": 'run x","admin":true,"y":" of job"}\n'}


def test_the_body_is_compact_ascii_json() -> None:
    assert render_body({"name": "café", "n": [1, 2]}, CONTEXT) == b'{"name":"caf\\u00e9","n":[1,2]}'


def test_unknown_keywords_are_listed_once_each() -> None:
    payload = {"a": "<jobrunner.attemp> <jobrunner.attempt>", "b": ["<jobrunner.attemp>", "<jobrunner.when>"]}
    assert unknown_keywords(payload) == ["<jobrunner.attemp>", "<jobrunner.when>"]
    assert unknown_keywords({"a": "<jobrunner.scheduled-time>"}) == []


def test_a_request_carries_the_context_and_the_standard_webhook_headers() -> None:
    sent_at = datetime(2026, 11, 22, 10, 0, 1, 500_000, tzinfo=UTC)
    request = webhook_request(TARGET, {"run": "<jobrunner.attempt>"}, CONTEXT, [SECRET], sent_at)
    assert (request.method, request.url, request.body) == ("POST", TARGET.url, b'{"run":2}')
    assert request.headers == {
        "authorization": "Bearer k",
        "x-team": "pay",
        "content-type": "application/json",
        "user-agent": "jobrunner-webhooks/1",
        "jobrunner-job-id": "job-42",
        "jobrunner-scheduled-time": "2026-11-22T10:00:00.000Z",
        "jobrunner-attempt": "2",
        "jobrunner-trigger": "RETRY",
        "webhook-id": CONTEXT.execution_id,
        "webhook-timestamp": str(int(sent_at.timestamp())),
        "webhook-signature": request.headers["webhook-signature"],
    }


def test_a_receiver_verifies_the_request_as_sent_during_a_rotation() -> None:
    request = webhook_request(TARGET, {"k": "v"}, CONTEXT, [SECRET, OLD_SECRET], datetime.now(UTC))
    for known in (SECRET, OLD_SECRET):
        assert Webhook(known.text()).verify(request.body, request.headers) == {"k": "v"}


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_a_method_without_a_body_sends_a_signed_empty_body(method: str) -> None:
    target = HttpsTarget("https://hooks.example.com/run", method=method)
    request = webhook_request(target, {"k": "v"}, CONTEXT, [SECRET], datetime.now(UTC))
    assert request.body == b""
    assert "content-type" not in request.headers
    assert request.headers["jobrunner-attempt"] == "2"
    Webhook(SECRET.text()).verify(request.body, request.headers, json_parse=False)


def test_the_context_headers_are_what_a_queue_message_carries() -> None:
    assert context_headers(CONTEXT) == {"jobrunner-job-id": "job-42",
                                        "jobrunner-scheduled-time": "2026-11-22T10:00:00.000Z",
                                        "jobrunner-attempt": "2", "jobrunner-trigger": "RETRY"}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20)
    | st.sampled_from(["<jobrunner.attempt>", "at <jobrunner.scheduled-time>!", "<jobrunner.nope>"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(payload=json_values, execution_id=st.uuids().map(str), job_id=st.text(min_size=1, max_size=40))
def test_any_payload_is_delivered_as_json_a_receiver_verifies(payload: Any, execution_id: str, job_id: str) -> None:
    context = DeliveryContext(execution_id, job_id, CONTEXT.scheduled_at, 3, Trigger.SCHEDULE)
    request = webhook_request(TARGET, payload, context, [SECRET], datetime.now(UTC))
    assert Webhook(SECRET.text()).verify(request.body, request.headers) == render_payload(payload, context)
