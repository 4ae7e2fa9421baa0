"""One invocation of the ``jobrunner`` command: what it talks to (``Deps``), the connection and output it
resolved (``Session``), and how a command's failure becomes a message and an exit code (``reports_errors``).

Exit codes: 0 ok; 1 the API refused (its message is printed) or another client-side failure; 2 usage
error (including no API URL configured); 3 not found; 4 cannot connect (to the API or to Kafka).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

import typer

from jobrunner_client.cli import render
from jobrunner_client.cli.client import (
    ApiClient,
    ApiError,
    Auth,
    BearerAuth,
    CannotConnect,
    SigV4Auth,
    Transport,
    UrllibTransport,
)
from jobrunner_client.cli.settings import Connection, UsageError, resolve
from jobrunner_client.cli.tail import Consumer, kafka_consumer

EXIT_API = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_CONNECT = 4


class OutputMode(StrEnum):
    table = "table"
    json = "json"


@dataclass
class Deps:
    """What the CLI talks to; tests pass fakes with ``CliRunner().invoke(app, args, obj=Deps(...))``."""

    transport: Transport | None = None
    consumer: Callable[[str, str], Consumer] = kafka_consumer
    environ: Mapping[str, str] | None = None
    cwd: Path | None = None
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))


@dataclass
class Session:
    deps: Deps
    url: str | None
    token: str | None
    sigv4: bool
    region: str | None
    env_file: Path | None
    output: OutputMode
    http_timeout_s: float
    _connection: Connection | None = None

    def connection(self) -> Connection:
        if self._connection is None:
            self._connection = resolve(
                url=self.url, token=self.token, sigv4=self.sigv4, region=self.region,
                environ=os.environ if self.deps.environ is None else self.deps.environ,
                cwd=self.deps.cwd or Path.cwd(), env_file=self.env_file,
            )
        return self._connection

    def client(self) -> ApiClient:
        connection = self.connection()
        auth: Auth = SigV4Auth(connection.signing_region()) if connection.sigv4 else BearerAuth(connection.token)
        transport = self.deps.transport or UrllibTransport(self.http_timeout_s)
        return ApiClient(connection.api_url(), auth, transport)

    def out(self, override: OutputMode | None = None) -> render.Output:
        return render.Output((override or self.output).value)


_SESSION: ContextVar[Session] = ContextVar("jobrunner_cli_session")


def begin(session: Session) -> None:
    """Make ``session`` the one of this invocation (the root callback does, before the command runs)."""
    _SESSION.set(session)


def current() -> Session:
    """The session the root callback made for this invocation."""
    return _SESSION.get()


F = TypeVar("F", bound=Callable[..., Any])


def reports_errors(command: F) -> F:
    """Turn the CLI's failures into a message (the server's own, for API errors) and an exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        session = current()
        out = session.out(kwargs.get("output"))
        try:
            return command(*args, **kwargs)
        except ApiError as exc:
            details = [f"{e.get('field', '?')}: {e.get('reason', '')}" for e in exc.errors]
            message = _with_status(exc)
            if details and exc.message == "; ".join(details):  # a 422 whose message just lists the fields
                message = f"the API rejected the request (HTTP {exc.status})"
            if exc.status == 401:
                details.append(_token_hint(session))
            out.error(message, details, exc.to_dict())
            raise typer.Exit(EXIT_NOT_FOUND if exc.status == 404 else EXIT_API) from None
        except CannotConnect as exc:
            url = session.connection().url
            out.error(f"cannot connect to the API at {url}: {exc}",
                      ["is the local stack running? `make run` starts it"] if _is_local(url) else None,
                      {"status": 0, "error": "cannot_connect", "message": str(exc)})
            raise typer.Exit(EXIT_CONNECT) from None
        except UsageError as exc:
            out.error(str(exc), None, {"status": 0, "error": "usage", "message": str(exc)})
            raise typer.Exit(EXIT_USAGE) from None

    return wrapper  # type: ignore[return-value]


def _with_status(exc: ApiError) -> str:
    return f"{exc.message} (HTTP {exc.status})" if exc.status else exc.message


def _token_hint(session: Session) -> str:
    connection = session.connection()
    if connection.sigv4:
        return "the request was signed (SigV4); check that these credentials may invoke this API"
    if not connection.token:
        return "no token: pass --token, set JOBRUNNER_TOKEN, or use the one `make run` writes to .local/env"
    return "the token was rejected: tokens of the local stack are in .local/tokens.json"


def _is_local(url: str | None) -> bool:
    return bool(url) and any(host in str(url) for host in ("127.0.0.1", "localhost", "[::1]"))
