"""The OpenAPI document the api serves, held to a snapshot: moving routes between modules must not change it.

A change to the api that is meant to change the document rewrites the snapshot:
``JOBRUNNER_WRITE_OPENAPI_SNAPSHOT=1 pytest tests/unit/jobrunner/api/test_openapi.py``, then review its diff.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from jobrunner import wiring
from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.invokers.memory import RecordingInvoker
from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.api.app import PUBLIC_PATHS, handle
from jobrunner.api.body_limits import BODY_METHODS
from jobrunner.config import Settings
from jobrunner.wiring import Container

SNAPSHOT = Path(__file__).with_name("openapi.snapshot.json")


@pytest.fixture(autouse=True)
def _container(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wiring, "_container", None)  # restored after the test
    wiring.install(Container(
        Settings.from_env({"JOBRUNNER_SEGMENTS": "4"}), store=MemoryJobStore(), publisher=MemoryPublisher(),
        leases=MemoryLeaseStore(), invoker=RecordingInvoker(),
        clock=ManualClock(datetime(2026, 11, 22, 10, 0, tzinfo=UTC)),
    ))


def served() -> str:
    """The body of ``GET /openapi.json``, asked for without a token as a browser would."""
    event: dict[str, Any] = {
        "resource": "/openapi.json", "path": "/openapi.json", "httpMethod": "GET", "headers": {},
        "multiValueHeaders": {}, "queryStringParameters": None, "multiValueQueryStringParameters": None,
        "pathParameters": None, "stageVariables": None, "body": None, "isBase64Encoded": False,
        "requestContext": {"requestId": "r-1", "stage": "test", "httpMethod": "GET", "path": "/openapi.json"},
    }
    response = handle(event, None)
    assert response["statusCode"] == 200, response
    return str(response["body"])


def test_the_served_openapi_document_is_the_snapshot() -> None:
    document = json.dumps(json.loads(served()), indent=1, ensure_ascii=False) + "\n"
    if os.environ.get("JOBRUNNER_WRITE_OPENAPI_SNAPSHOT"):
        SNAPSHOT.write_text(document, encoding="utf-8")
    # The text, not only the parsed value: the order of paths, operations and schemas is the reader's too.
    assert document == SNAPSHOT.read_text(encoding="utf-8")


def test_the_snapshot_holds_every_operation_with_its_parameters_and_schemas() -> None:
    snapshot = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    operations = [(method.upper(), path) for path, item in snapshot["paths"].items() for method in item]
    # 24 routes: every one but GET /openapi.json itself is in the document
    assert len(operations) == 23 and len(set(operations)) == 23 and ("GET", "/openapi.json") not in operations
    assert ("GET", "/jobs/{job_id}/fires") in operations and ("PUT", "/calendars/{name}") in operations
    assert {p["name"] for p in snapshot["paths"]["/jobs"]["get"]["parameters"]} >= {"limit", "cursor", "tag"}
    assert {"JobIn", "JobPatchIn", "CalendarIn", "RotationIn"} <= set(snapshot["components"]["schemas"])
    assert ("POST", "/webhook-secrets/rotate") in operations and ("DELETE", "/webhook-secrets/previous") in operations


ERROR_OUT = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    snapshot = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    return [(method.upper(), path, operation) for path, item in snapshot["paths"].items()
            for method, operation in item.items()]


@pytest.mark.parametrize(("method", "path", "operation"), operations(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_operation_documents_every_status_it_can_answer(method: str, path: str, operation: Any) -> None:
    # What the edge answers any route with (api/app.py's _respond), and what a job's routes answer (the services)
    expected = {"400", "413", "422"}
    expected |= {"415"} if method in BODY_METHODS else set()
    expected |= {"401", "503"} if path not in PUBLIC_PATHS else set()
    expected |= {"404"} if path.startswith("/jobs/{job_id}") else set()
    expected |= {"409"} if path.startswith("/jobs/{job_id}") and method != "GET" else set()
    assert expected <= set(operation["responses"]), operation["responses"].keys()
    assert any(status.startswith("2") for status in operation["responses"])


@pytest.mark.parametrize(("method", "path", "operation"), operations(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_refusal_is_an_error_out_and_every_success_names_its_model(method: str, path: str,
                                                                          operation: Any) -> None:
    for status, response in operation["responses"].items():
        if status >= "400":
            assert response["content"] == ERROR_OUT, (status, response)
        elif status == "204":
            assert not response.get("content"), response  # no body, so no media type either
        else:
            assert response["content"]["application/json"]["schema"]["$ref"].endswith("Out"), (status, response)
