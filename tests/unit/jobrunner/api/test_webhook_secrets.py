"""The tenant's webhook secrets through the API: read, rotated, the rotation ended; each tenant its own only.

The same approach as ``test_routes.py``: API Gateway events through the entry point, memory adapters (the secrets
in memory, on the container's manual clock).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobrunner import wiring
from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.invokers.memory import RecordingInvoker
from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.adapters.webhook_secrets.memory import MemoryWebhookSecrets
from jobrunner.api.app import handle
from jobrunner.config import Settings
from jobrunner.wiring import Container
from tests.unit.jobrunner.api.test_routes import event, fields

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> MemoryWebhookSecrets:
    monkeypatch.setattr(wiring, "_container", None)  # restored after the test
    clock = ManualClock(NOW)
    secrets = MemoryWebhookSecrets(clock=clock)
    wiring.install(Container(
        Settings.from_env({"JOBRUNNER_SEGMENTS": "4"}), store=MemoryJobStore(), publisher=MemoryPublisher(),
        leases=MemoryLeaseStore(), invoker=RecordingInvoker(), clock=clock, webhook_secrets=secrets,
    ))
    return secrets


def answered(method: str, path: str, body: Any = None, tenant: str = "alice") -> tuple[int, dict[str, Any]]:
    """The status and body of a request; every answer about secrets says it must not be cached."""
    response = handle(event(method, path, body, tenant), None)
    if response["statusCode"] == 200:
        assert response["multiValueHeaders"]["Cache-Control"] == ["no-store"]
    return int(response["statusCode"]), json.loads(response["body"])


def test_a_tenant_reads_its_secret_and_the_delivery_signs_with_it(secrets: MemoryWebhookSecrets) -> None:
    status, body = answered("GET", "/webhook-secrets")
    assert status == 200
    [secret] = body["items"]
    assert secret["secret"].startswith("whsec_") and secret["current"] and secret["valid_until"] is None
    assert secret["created_at"] == "2026-11-22T10:00:00.000Z"
    assert secrets.signing_secrets("alice") == [secret["secret"]]
    assert answered("GET", "/webhook-secrets")[1] == body  # read again: the same one


def test_a_rotation_keeps_the_previous_secret_for_the_grace_asked_and_its_end_drops_it(
    secrets: MemoryWebhookSecrets,
) -> None:
    [old] = answered("GET", "/webhook-secrets")[1]["items"]
    # When the tenant rotates with an hour's grace
    status, body = answered("POST", "/webhook-secrets/rotate", {"grace_s": 3600})
    # Then the new secret is current and the old one valid for the hour; deliveries are signed under both
    assert status == 200
    new, previous = body["items"]
    assert (new["current"], previous["current"]) == (True, False)
    assert (previous["id"], previous["secret"], previous["valid_until"]) == (
        old["id"], old["secret"], "2026-11-22T11:00:00.000Z")
    assert secrets.signing_secrets("alice") == [new["secret"], old["secret"]]
    # And ending the rotation leaves the new secret alone
    status, body = answered("DELETE", "/webhook-secrets/previous")
    assert (status, [s["secret"] for s in body["items"]]) == (200, [new["secret"]])
    assert secrets.signing_secrets("alice") == [new["secret"]]


def test_a_rotation_without_a_body_keeps_the_previous_secret_for_a_day(secrets: MemoryWebhookSecrets) -> None:
    answered("GET", "/webhook-secrets")
    _, previous = answered("POST", "/webhook-secrets/rotate")[1]["items"]
    assert previous["valid_until"] == "2026-11-23T10:00:00.000Z"
    secrets._clock.advance(timedelta(days=1))  # type: ignore[attr-defined]
    assert len(answered("GET", "/webhook-secrets")[1]["items"]) == 1  # past its grace: no longer shown


@pytest.mark.parametrize(("body", "field"), [
    ({"grace_s": -1}, "grace_s"), ({"grace_s": 604_801}, "grace_s"), ({"grace_s": "60"}, "grace_s"),
    ({"grace_s": 1.5}, "grace_s"), ({"grace": 60}, "grace"),
])
def test_a_rotation_with_a_wrong_grace_is_refused_naming_it_and_changes_nothing(
    secrets: MemoryWebhookSecrets, body: dict[str, Any], field: str,
) -> None:
    before = answered("GET", "/webhook-secrets")[1]
    status, refused = answered("POST", "/webhook-secrets/rotate", body)
    assert status == 422 and field in fields(refused), refused
    assert answered("GET", "/webhook-secrets")[1] == before


def test_a_tenant_reads_and_rotates_its_own_secrets_only(secrets: MemoryWebhookSecrets) -> None:
    [alices] = answered("GET", "/webhook-secrets", tenant="alice")[1]["items"]
    [bobs] = answered("GET", "/webhook-secrets", tenant="bob")[1]["items"]
    assert bobs["secret"] != alices["secret"] and bobs["id"] != alices["id"]
    # Bob's rotation and its end leave Alice's secret as it was
    answered("POST", "/webhook-secrets/rotate", {"grace_s": 60}, tenant="bob")
    answered("DELETE", "/webhook-secrets/previous", tenant="bob")
    assert answered("GET", "/webhook-secrets", tenant="alice")[1]["items"] == [alices]
    assert alices["secret"] not in json.dumps(answered("GET", "/webhook-secrets", tenant="bob")[1])
    # and without a tenant nothing is answered
    response = handle(event("GET", "/webhook-secrets", tenant=None), None)
    assert response["statusCode"] == 401 and "whsec_" not in response["body"]


@pytest.mark.filterwarnings("ignore:No application metrics to publish")
def test_a_secret_never_reaches_a_log_or_the_trace_of_the_api_function(
    secrets: MemoryWebhookSecrets, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from functions.api.handler import handler
    from jobrunner.observability import tracer

    # Given a tracer that records what the handler puts on its segments, and every log at DEBUG
    recorded: list[Any] = []

    class Segment:
        def put_metadata(self, key: str, value: Any, namespace: str = "") -> None:
            recorded.append((key, value))

        def put_annotation(self, key: str, value: Any) -> None:
            recorded.append((key, value))

    class Provider:
        def in_subsegment(self, name: str) -> Any:
            from contextlib import nullcontext

            return nullcontext(Segment())

    monkeypatch.setattr(tracer, "provider", Provider())
    monkeypatch.setenv("POWERTOOLS_LOGGER_LOG_EVENT", "true")
    caplog.set_level(logging.DEBUG)
    context = type("Context", (), {"function_name": "jobrunner-api", "memory_limit_in_mb": 512,
                                   "invoked_function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:api",
                                   "aws_request_id": "r-1"})()
    # When the tenant reads and rotates its secrets through the function
    texts: list[str] = []
    for method, path in (("GET", "/webhook-secrets"), ("POST", "/webhook-secrets/rotate")):
        response = handler(event(method, path), context)
        texts += [item["secret"] for item in json.loads(response["body"])["items"]]
    # Then no secret is in a log line or on a trace segment
    out = capsys.readouterr()
    written = caplog.text + out.out + out.err + json.dumps(recorded, default=str)
    assert texts and not [text for text in texts if text in written]


def test_a_stage_that_delivers_to_no_https_target_keeps_no_webhook_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wiring, "_container", None)  # restored after the test
    secrets = MemoryWebhookSecrets()
    wiring.install(Container(
        Settings.from_env({"JOBRUNNER_SEGMENTS": "4", "JOBRUNNER_TARGET_KINDS": "lambda,sqs"}),
        store=MemoryJobStore(), publisher=MemoryPublisher(), leases=MemoryLeaseStore(), invoker=RecordingInvoker(),
        clock=ManualClock(NOW), webhook_secrets=secrets,
    ))
    for method, path in (("GET", "/webhook-secrets"), ("POST", "/webhook-secrets/rotate"),
                         ("DELETE", "/webhook-secrets/previous")):
        status, refused = answered(method, path)
        assert (status, refused["error"]) == (404, "not_found"), refused
        assert "no HTTPS target" in refused["message"]
    assert secrets._by_tenant == {}  # nothing created
