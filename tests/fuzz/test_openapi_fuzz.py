"""Generated requests against the served OpenAPI document, over HTTP, on the live local stack: the document
as a contract a client generator can trust.

Schemathesis' engine (what its CLI runs) reads ``GET /openapi.json`` and, with a fixed seed, sends every
operation: the coverage phase (boundary values, missing and wrong-typed fields, wrong content types,
undeclared methods), then property-based fuzzing of valid and invalid requests. Half of the job ids are
real jobs of the fuzzing tenant, so bodies reach the services rather than stopping at 404.

Every check of schemathesis but two is on (``CHECKS``), and one of ours: every error a JSON object naming its
``error``. So on every response: no 5xx, an answer within ``REQUEST_TIMEOUT_S`` (a hang fails the run), a status,
Content-Type, headers and body the document lists for the operation, a request that breaks the document
refused (4xx), 405 with ``Allow`` for an undeclared method. The two checks off (``OFF``) contradict the
documented design:

- ``positive_data_acceptance`` wants every request the document allows accepted (2xx, or 404, 409, 429).
  The document gives the shape of each value, not every rule the domain checks on it, so some of these
  are refused by design with a 422 naming the field: an ``at`` more than 5 minutes in the past or a
  backfill range against the clock, a topic not granted to the tenant, a cursor this api did not write,
  a cron, duration, date-time or tag that does not parse.
- ``use_after_free`` wants a resource answered 404 once a DELETE succeeded; ``DELETE /jobs/{job_id}``
  cancels a job, which stays readable, with its history, as CANCELLED (README.md, the API). (It needs the
  stateful phase, off here, to relate two requests; it stays off so that turning that phase on does
  not bring it in.)
"""

from __future__ import annotations

import importlib
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
import schemathesis
from schemathesis.core.result import Ok
from schemathesis.engine import Status, events, from_schema

from jobrunner.api.app import PUBLIC_PATHS, app
from tests.fuzz.conftest import REQUEST_TIMEOUT_S, Tenant

if TYPE_CHECKING:
    from schemathesis.schemas import APIOperation, BaseSchema

pytestmark = pytest.mark.e2e

SEED = 20261122
#: Per operation and generation mode, in the fuzzing phase. With the coverage phase this sends about
#: 2,300 requests, in 20 to 40 s on two busy cores.
MAX_EXAMPLES = 80
MIN_REQUESTS = 2000
#: Schemathesis' checks that contradict the documented design (see above).
OFF = frozenset({"positive_data_acceptance", "use_after_free"})
#: Every other check of schemathesis (4.x), and ours.
CHECKS = (
    "not_a_server_error", "max_response_time", "status_code_conformance", "content_type_conformance",
    "response_headers_conformance", "response_schema_conformance", "negative_data_rejection",
    "missing_required_header", "unsupported_method", "allow_header_conformance", "ensure_resource_availability",
    "ignored_auth", "object_level_authorization", "error_bodies_are_json",
)
LIVE_JOBS: list[dict[str, Any]] = [
    {"schedule": {"cron": "0 0 1 1 *", "timezone": "Europe/Paris"}, "payload": {"kind": "cron"}},
    {"schedule": {"every": "P1D", "start": "2099-01-01T00:00:00Z"}, "max_retries": 2},
    {"schedule": {"at": "2099-01-01T00:00:00Z"}, "timeout_s": 60},
    {"schedule": {"iso8601": "R3/2099-01-01T00:00:00Z/P1M"}, "idempotency_key": "fuzz-live"},
]


@schemathesis.check
def error_bodies_are_json(ctx: Any, response: schemathesis.Response, case: Any) -> None:
    """Every error answer is a JSON object that names the error (the api's ``ErrorOut``)."""
    if response.status_code < 400:
        return
    content_type = response.headers.get("content-type", [""])[0]
    assert content_type.startswith("application/json"), f"error answered as {content_type!r}: {response.text[:200]}"
    body = response.json()
    assert isinstance(body, dict) and isinstance(body.get("error"), str), f"error body {response.text[:200]}"


@dataclass
class Run:
    requests: int = 0
    by_phase: Counter[str] = field(default_factory=Counter)
    by_status: Counter[int] = field(default_factory=Counter)
    checks_run: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    stop_reason: str = ""

    def record(self, event: events.EngineEvent) -> None:
        if isinstance(event, events.ScenarioFinished):
            for interaction in event.recorder.interactions.values():
                if interaction.response is not None:
                    self.requests += 1
                    self.by_phase[event.phase.value] += 1
                    self.by_status[interaction.response.status_code] += 1
            for checks in event.recorder.checks.values():
                for check in checks:
                    self.checks_run[check.name] += 1
                    if check.status == Status.FAILURE and check.failure_info is not None:
                        failure = check.failure_info.failure
                        self.failures.append(f"{event.label} [{check.name}] {failure.title}: {failure.message}\n"
                                             f"    {check.failure_info.code_sample}")
        elif isinstance(event, events.NonFatalError):
            # A request that got no answer (the handler raised, or it hung past the timeout) lands here
            self.failures.append(f"{event.label} [no answer] {event.value!r}")
        elif isinstance(event, events.FatalError):
            self.failures.append(f"[fatal] {event.exception!r}")
        elif isinstance(event, events.EngineFinished):
            self.stop_reason = str(event.stop_reason)


def config(tenant: Tenant, live: list[str], doomed: list[str]) -> schemathesis.Config:
    return schemathesis.Config.from_dict({
        "seed": SEED,
        "workers": 1,
        "base-url": tenant.url,
        "headers": tenant.auth,
        "request-timeout": REQUEST_TIMEOUT_S,
        "continue-on-failure": True,
        "generation": {"mode": "all", "max-examples": MAX_EXAMPLES, "database": "none"},
        "dictionaries": {"live": {"values": live}, "doomed": {"values": doomed}},
        # Half the job ids are real: DELETE gets jobs of its own, so that the others stay alive
        "parameters": {"path.job_id": {"dictionary": "live", "probability": 0.5}},
        "operations": [{"include-method": "DELETE",
                        "parameters": {"path.job_id": {"dictionary": "doomed", "probability": 0.5}}}],
        "phases": {
            "examples": {"enabled": True},
            "coverage": {"enabled": True},  # every undeclared method, QUERY and TRACE included
            "fuzzing": {"enabled": True},
            "stateful": {"enabled": False},  # the document declares no links
        },
        "checks": {
            "enabled": False,
            "max_response_time": REQUEST_TIMEOUT_S,
            **{name: {"enabled": True} for name in CHECKS if name != "max_response_time"},
        },
    })


def load(tenant: Tenant, live: list[str] | None = None, doomed: list[str] | None = None) -> BaseSchema:
    return schemathesis.openapi.from_url(f"{tenant.url}/openapi.json", config=config(tenant, live or ["-"],
                                                                                      doomed or ["-"]))


def operations(schema: BaseSchema) -> list[APIOperation[Any, Any, Any, Any]]:
    results = list(schema.get_all_operations())
    invalid = [result for result in results if not isinstance(result, Ok)]
    assert not invalid, invalid
    return [result.ok() for result in results if isinstance(result, Ok)]


def test_every_check_of_schemathesis_is_on_or_said_off() -> None:
    # A check a new version of schemathesis brings is on, or named in OFF with its reason
    from schemathesis.checks import CHECKS as REGISTERED

    importlib.import_module("schemathesis.specs.openapi.checks")  # registers its checks, if not yet done
    assert set(CHECKS) | OFF == {*REGISTERED.get_all_names(), "max_response_time"}
    assert not set(CHECKS) & OFF


def test_the_openapi_document_is_valid_and_loads(tenant: Tenant) -> None:
    schema = load(tenant)
    schema.validate()  # against the OpenAPI 3.1 meta-schema
    assert len(operations(schema)) >= 11


def test_every_route_is_in_the_document(tenant: Tenant) -> None:
    documented = {(op.method.upper(), op.path) for op in operations(load(tenant))}
    routes = {(route.method, re.sub(r"<(\w+)>", r"{\1}", route.template)) for route in app.routes}
    assert documented <= routes
    # Left out: only public documents (the OpenAPI document itself), never an API route
    assert all(method == "GET" and path in PUBLIC_PATHS for method, path in routes - documented), routes


def test_generated_requests_get_no_5xx_and_no_hang(tenant: Tenant, capsys: pytest.CaptureFixture[str]) -> None:
    live = [tenant.submit(body) for body in LIVE_JOBS]
    paused = tenant.submit(LIVE_JOBS[0] | {"idempotency_key": None})
    assert tenant.request("POST", f"/jobs/{paused}/pause").status_code == 200
    doomed = [tenant.submit({"schedule": {"cron": "0 0 1 1 *"}}) for _ in range(3)]
    run = Run()
    started = time.monotonic()

    for event in from_schema(load(tenant, [*live, paused], doomed)).execute():
        run.record(event)

    elapsed = time.monotonic() - started
    with capsys.disabled():
        print(f"\nschemathesis: {run.requests} requests in {elapsed:.0f} s (seed {SEED}); "
              f"by phase {dict(run.by_phase)}; by status {dict(sorted(run.by_status.items()))}; "
              f"checks run {dict(run.checks_run)}; stop: {run.stop_reason}")
    assert not run.failures, f"{len(run.failures)} failures:\n" + "\n".join(run.failures[:30])
    assert run.requests >= MIN_REQUESTS
    assert set(CHECKS) <= set(run.checks_run), run.checks_run
    assert run.by_status[405] > 0 and run.by_status[415] > 0  # the coverage phase tried methods and media types
