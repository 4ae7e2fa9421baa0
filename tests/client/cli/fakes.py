"""Fakes for the CLI tests: an HTTP layer answering from a route table, a fixed clock, a runner."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from typer.testing import CliRunner

from jobrunner_client.cli import app
from jobrunner_client.cli.client import CannotConnect, HttpRequest, HttpResponse
from jobrunner_client.cli.session import Deps

if TYPE_CHECKING:
    from pathlib import Path

    from typer.testing import Result

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
URL = "http://api.test"
TOKEN = "t0ken"

Reply = HttpResponse | Callable[[HttpRequest], HttpResponse]


def reply(status: int, body: Any = None) -> HttpResponse:
    return HttpResponse(status, b"" if body is None else json.dumps(body).encode())


def job(job_id: str = "job-1", **changes: Any) -> dict[str, Any]:
    """A job as the API answers it."""
    base: dict[str, Any] = {
        "job_id": job_id, "state": "ACTIVE", "status": "SCHEDULED", "schedule": {"every": "PT5M"},
        "payload": {"n": 1}, "topic": "jobs", "max_retries": 0,
        "backoff": {"initial_delay_s": 10.0, "multiplier": 2.0, "max_delay_s": 300.0}, "timeout_s": None,
        "version": 1, "next_run_at": "2026-11-22T10:05:00.000Z", "last_run_at": None, "last_execution_id": None,
        "last_status": None, "created_at": "2026-11-22T10:00:00.000Z", "updated_at": "2026-11-22T10:00:00.000Z",
        "next_runs": None,
    }
    return {**base, **changes}


@dataclass
class Sent:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeTransport:
    """Answers by (method, path) from ``routes``; a list of replies is used up in order. Keeps what was sent."""

    routes: dict[tuple[str, str], Reply | list[Reply]] = field(default_factory=dict)
    sent: list[Sent] = field(default_factory=list)
    down: bool = False

    def on(self, method: str, path: str, *replies: Reply) -> FakeTransport:
        self.routes[(method, path)] = list(replies) if len(replies) > 1 else replies[0]
        return self

    def send(self, request: HttpRequest) -> HttpResponse:
        if self.down:
            raise CannotConnect("[Errno 111] Connection refused")
        url = urlsplit(request.url)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = json.loads(request.body) if request.body else None
        self.sent.append(Sent(request.method, url.path, query, request.headers, body))
        route = self.routes.get((request.method, url.path))
        if route is None:
            return reply(404, {"error": "not_found", "message": f"no route {request.method} {url.path}"})
        if isinstance(route, list):
            route = route.pop(0) if len(route) > 1 else route[0]
        return route(request) if callable(route) else route


@dataclass
class Cli:
    transport: FakeTransport
    tmp_path: Path
    environ: dict[str, str]

    def __call__(self, *args: str, input: str | None = None, **deps: Any) -> Result:
        runner = CliRunner()
        obj = Deps(transport=self.transport, environ=self.environ, cwd=self.tmp_path, now=lambda: NOW, **deps)
        return runner.invoke(app, list(args), obj=obj, input=input, env={"COLUMNS": "220"})
