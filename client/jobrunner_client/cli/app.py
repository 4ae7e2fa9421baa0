"""The ``jobrunner`` command: the HTTP API from a shell, plus following Kafka topics and bulk imports.

Exit codes: 0 ok; 1 the API refused (its message is printed) or another client-side failure; 2 usage
error (including no API URL configured); 3 not found; 4 cannot connect (to the API or to Kafka).

Typer reads the parameter annotations at run time, so this module does not use
``from __future__ import annotations``: every type in a signature must be importable as it stands.
"""

import functools
import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from jobrunner.domain.jobs import JobStatus
from jobrunner_client.cli import bulk, render
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
from jobrunner_client.cli.tail import Consumer, KafkaUnreachable, TailRecord, TopicMissing, follow, kafka_consumer

EXIT_API = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_CONNECT = 4

app = typer.Typer(
    name="jobrunner",
    help="Submit and manage jobs of the Distributed Job Runner, follow its topics, import jobs in bulk.\n\n"
         "Finds the API in --url/--token, else JOBRUNNER_API_URL/JOBRUNNER_TOKEN, else .local/env "
         "(written by `make run`). With --sigv4 it signs requests for an AWS deployment instead.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class OutputMode(StrEnum):
    table = "table"
    json = "json"


class FileFormat(StrEnum):
    jsonl = "jsonl"
    csv = "csv"


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


def _session() -> Session:
    """The session the root callback made for this invocation."""
    return _SESSION.get()


F = TypeVar("F", bound=Callable[..., Any])


def _reports_errors(command: F) -> F:
    """Turn the CLI's failures into a message (the server's own, for API errors) and an exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        session = _session()
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


OutputOption = Annotated[OutputMode | None, typer.Option("--output", "-o", help="table (default) or json",
                                                         show_default=False)]
JobIdArgument = Annotated[str, typer.Argument(help="the job's id", metavar="JOB_ID")]


@app.callback()
def root(
    ctx: typer.Context,
    url: Annotated[str | None, typer.Option(help="the API's base URL [env: JOBRUNNER_API_URL]",
                                            show_default=False)] = None,
    token: Annotated[str | None, typer.Option(help="bearer token [env: JOBRUNNER_TOKEN]", show_default=False)] = None,
    sigv4: Annotated[bool, typer.Option("--sigv4", help="sign requests with AWS SigV4 (execute-api) using the "
                                                       "default credential chain, instead of a bearer token")] = False,
    region: Annotated[str | None, typer.Option(help="AWS region for --sigv4 [env: AWS_REGION; default: from "
                                                   "the URL]", show_default=False)] = None,
    output: Annotated[OutputMode, typer.Option("--output", "-o", help="table or json (every command)")
                      ] = OutputMode.table,
    env_file: Annotated[Path | None, typer.Option(help="read settings from this file instead of .local/env",
                                                  show_default=False)] = None,
    http_timeout: Annotated[float, typer.Option(help="seconds to wait for the API", min=1)] = 30.0,
) -> None:
    deps = ctx.obj if isinstance(ctx.obj, Deps) else Deps()
    _SESSION.set(Session(deps, url, token, sigv4, region, env_file, output, http_timeout))


# --- jobs -------------------------------------------------------------------------------------------

_RELATIVE = re.compile(r"^([+-])(\d+)\s*(s|m|h|d)$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def _instant(value: str, now: datetime) -> str:
    """An RFC 3339 instant as given, or ``now`` / ``+30s`` / ``+5m`` / ``-2h`` / ``+1d`` made absolute."""
    if value == "now":
        return now.strftime("%Y-%m-%dT%H:%M:%SZ")
    match = _RELATIVE.match(value.strip())
    if match:
        sign = -1 if match.group(1) == "-" else 1
        instant = now + sign * timedelta(**{_UNITS[match.group(3)]: int(match.group(2))})
        return instant.strftime("%Y-%m-%dT%H:%M:%SZ")
    return value


def _json_argument(value: str, name: str) -> Any:
    """JSON text, ``@path`` (a file) or ``-`` (standard input)."""
    if value == "-":
        text = sys.stdin.read()
    elif value.startswith("@"):
        try:
            text = Path(value[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise typer.BadParameter(f"cannot read {value[1:]}: {exc.strerror}", param_hint=name) from None
    else:
        text = value
    try:
        return json.loads(text)
    except ValueError as exc:
        raise typer.BadParameter(f"not valid JSON: {exc}", param_hint=name) from None


@app.command()
@_reports_errors
def submit(
    at: Annotated[str | None, typer.Option(help="run once at this RFC 3339 instant, or now, +30s, +5m, +2h, +1d",
                                           rich_help_panel="Schedule (exactly one)")] = None,
    every: Annotated[str | None, typer.Option(help="run every ISO 8601 duration, e.g. PT5M",
                                              rich_help_panel="Schedule (exactly one)")] = None,
    start: Annotated[str | None, typer.Option(help="with --every: first fire (default: one interval from now); "
                                                   "with --cron: no fire before it",
                                              rich_help_panel="Schedule (exactly one)")] = None,
    end: Annotated[str | None, typer.Option(help="with --every, --cron or --iso8601: no fire after this",
                                            rich_help_panel="Schedule (exactly one)")] = None,
    count: Annotated[int | None, typer.Option(help="with --every or --cron: at most this many fires, from now",
                                              rich_help_panel="Schedule (exactly one)")] = None,
    cron: Annotated[str | None, typer.Option(help="five-field cron expression, e.g. '0 9 * * MON-FRI'",
                                             rich_help_panel="Schedule (exactly one)")] = None,
    timezone: Annotated[str | None, typer.Option(help="with --cron: IANA time zone (default UTC)",
                                                 rich_help_panel="Schedule (exactly one)")] = None,
    iso8601: Annotated[str | None, typer.Option(help="ISO 8601 repeating interval, e.g. R5/2026-11-22T10:00:00Z/PT1H",
                                                rich_help_panel="Schedule (exactly one)")] = None,
    payload: Annotated[str | None, typer.Option(help="JSON payload: text, @file or - for stdin")] = None,
    topic: Annotated[str | None, typer.Option(help="an allowed topic (default jobs)")] = None,
    max_retries: Annotated[int | None, typer.Option(help="retries after a failed attempt", min=0)] = None,
    backoff_initial: Annotated[float | None, typer.Option(help="first retry delay, seconds")] = None,
    backoff_multiplier: Annotated[float | None, typer.Option(help="delay multiplier per retry")] = None,
    backoff_max: Annotated[float | None, typer.Option(help="longest retry delay, seconds")] = None,
    timeout_s: Annotated[int | None, typer.Option(help="an execution not reported by then fails")] = None,
    jitter_s: Annotated[int | None, typer.Option(help="each fire is due up to this many seconds after it, at an "
                                                      "offset fixed per job and fire")] = None,
    tag: Annotated[list[str] | None, typer.Option(help="a key=value label (repeat for more)")] = None,
    calendar: Annotated[str | None, typer.Option(help="one of your calendars: its excluded dates are not run")] = None,
    delete_after_last: Annotated[bool, typer.Option("--delete-after-last", help=(
        "delete the job once its schedule has no fire left and its executions have ended (history is kept)"))] = False,
    overlap: Annotated[str | None, typer.Option(help=(
        "while the previous execution has not reported: allow_all (default), skip, buffer_one, buffer_all or "
        "cancel_other"))] = None,
    catch_up_window: Annotated[int | None, typer.Option(help="replay only the missed fires of the last this many "
                                                             "seconds")] = None,
    catch_up_most: Annotated[int | None, typer.Option(help="replay only the latest this many missed fires")] = None,
    idempotency_key: Annotated[str | None, typer.Option(help="the same key never makes a second job")] = None,
    body: Annotated[str | None, typer.Option("--json", help="a whole POST /jobs body (text, @file or -); the "
                                                            "other options override its fields")] = None,
    output: OutputOption = None,
) -> None:
    """Submit a job: one schedule option, a payload, and delivery options."""
    session = _session()
    request: dict[str, Any] = dict(_json_argument(body, "--json")) if body else {}
    if body and not isinstance(request, dict):
        raise typer.BadParameter("must be a JSON object", param_hint="--json")
    kinds = {"at": at, "every": every, "cron": cron, "iso8601": iso8601}
    given = [k for k, v in kinds.items() if v is not None]
    if len(given) > 1:
        raise UsageError(f"give one schedule, not {' and '.join('--' + k for k in given)}")
    recurring = {k for k in ("every", "cron", "iso8601") if kinds[k] is not None or k in request.get("schedule", {})}
    if start and not recurring & {"every", "cron"}:
        raise UsageError("--start goes with --every or --cron")
    if (end or count) and not recurring:
        raise UsageError("--end and --count go with a recurring schedule (--every, --cron, --iso8601)")
    if timezone and cron is None and "cron" not in request.get("schedule", {}):
        raise UsageError("--timezone goes with --cron")
    if given:
        schedule: dict[str, Any] = {}
        if at is not None:
            schedule["at"] = _instant(at, session.deps.now())
        if every is not None:
            schedule["every"] = every
        if cron is not None:
            schedule["cron"] = cron
        if iso8601 is not None:
            schedule["iso8601"] = iso8601
        request["schedule"] = schedule
    if start:
        request["schedule"]["start"] = _instant(start, session.deps.now())
    if end:
        request["schedule"]["end"] = _instant(end, session.deps.now())
    if count is not None:
        request["schedule"]["count"] = count
    if delete_after_last:
        request["delete_after_last"] = True
    if overlap is not None:
        request["overlap"] = overlap
    policy = {k: v for k, v in (("window_s", catch_up_window), ("most", catch_up_most)) if v is not None}
    if policy:
        request["catch_up"] = {**request.get("catch_up", {}), **policy}
    if timezone:
        request["schedule"]["timezone"] = timezone
    if "schedule" not in request:
        raise UsageError("give a schedule: --at, --every, --cron or --iso8601 (or a --json body with one)")
    if payload is not None:
        request["payload"] = _json_argument(payload, "--payload")
    for name, value in (("topic", topic), ("max_retries", max_retries), ("timeout_s", timeout_s),
                        ("jitter_s", jitter_s), ("calendar", calendar), ("idempotency_key", idempotency_key)):
        if value is not None:
            request[name] = value
    if tag:
        request["tags"] = {**request.get("tags", {}), **dict(_tag(text) for text in tag)}
    backoff = {k: v for k, v in (("initial_delay_s", backoff_initial), ("multiplier", backoff_multiplier),
                                 ("max_delay_s", backoff_max)) if v is not None}
    if backoff:
        request["backoff"] = {**request.get("backoff", {}), **backoff}

    answer = session.client().submit(request)
    out = session.out(output)
    job = answer.data
    if out.json:
        out.data(job)
        return
    created = answer.status == 201
    verb = "Submitted" if created else "Already submitted (same idempotency key):"
    line = Text(f"{verb} job {job['job_id']}  ") + render.status(job["status"])
    if job.get("next_run_at"):
        line += Text(f"  next run {render.fmt_time(job['next_run_at'])} "
                     f"({render.relative(job['next_run_at'], session.deps.now())})")
    out.show(line)


def _tag(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise typer.BadParameter(f"{text!r} is not key=value", param_hint="--tag")
    return key, value


@app.command("list")
@_reports_errors
def list_jobs(
    status: Annotated[JobStatus | None, typer.Option(help="only jobs in this status", case_sensitive=False,
                                                  show_default=False)] = None,
    kind: Annotated[str | None, typer.Option(help="only jobs of this schedule kind: at, every, cron, iso8601")] = None,
    tag: Annotated[str | None, typer.Option(help="only jobs with this tag: key:value, or key for any value")] = None,
    limit: Annotated[int, typer.Option(help="jobs per page", min=1, max=500)] = 50,
    cursor: Annotated[str | None, typer.Option(help="the next_cursor of a previous page")] = None,
    all_pages: Annotated[bool, typer.Option("--all", help="follow the cursors to the last page")] = False,
    output: OutputOption = None,
) -> None:
    """List your jobs, newest pages first as the API returns them."""
    session = _session()
    client = session.client()
    items: list[dict[str, Any]] = []
    while True:
        page = client.list_jobs(limit, cursor, status.value if status else None, kind, tag)
        items.extend(page["items"])
        cursor = page.get("next_cursor")
        if not all_pages or not cursor:
            break
    out = session.out(output)
    if out.json:
        out.data({"items": items, "next_cursor": cursor})
        return
    if not items:
        out.note("no jobs")
        return
    out.show(render.jobs_table(items, session.deps.now()))
    if cursor:
        out.note(f"more: jobrunner list --cursor {cursor}   (or --all)")


@app.command("bulk")
@_reports_errors
def bulk_change(
    action: Annotated[str, typer.Argument(help="pause, resume or cancel")],
    tag: Annotated[str, typer.Option(help="the jobs with this tag: key:value, or key for any value")],
    status: Annotated[JobStatus | None, typer.Option(help="and in this status", case_sensitive=False,
                                                  show_default=False)] = None,
    kind: Annotated[str | None, typer.Option(help="and of this schedule kind")] = None,
    output: OutputOption = None,
) -> None:
    """Pause, resume or cancel every job a tag selects (page by page, until none is left)."""
    session = _session()
    client = session.client()
    body: dict[str, Any] = {"action": action, "tag": tag, "limit": 500, "status": status.value if status else None,
                            "kind": kind}
    totals: dict[str, list[Any]] = {"changed": [], "unchanged": [], "failed": []}
    while True:
        page = client.bulk({k: v for k, v in body.items() if v is not None})
        for name, done in totals.items():
            done.extend(page[name])
        if not page.get("next_cursor"):
            break
        body["cursor"] = page["next_cursor"]
    out = session.out(output)
    if out.json:
        out.data(totals)
        return
    out.show(f"{action}: {len(totals['changed'])} changed, {len(totals['unchanged'])} already so, "
             f"{len(totals['failed'])} failed")
    for failure in totals["failed"]:
        out.note(f"{failure['job_id']}: {failure['reason']}")


@app.command()
@_reports_errors
def show(
    job_id: JobIdArgument,
    preview: Annotated[int, typer.Option(help="how many next fire times to show", min=0, max=50)] = 5,
    output: OutputOption = None,
) -> None:
    """Show a job, with its next fire times."""
    session = _session()
    job = session.client().job(job_id, preview)
    out = session.out(output)
    if out.json:
        out.data(job)
    else:
        out.show(render.job_detail(job, session.deps.now()))


def _changed(job: dict[str, Any], output: OutputMode | None) -> None:
    session = _session()
    out = session.out(output)
    if out.json:
        out.data(job)
        return
    line = Text(f"Job {job['job_id']} is now ") + render.status(job["status"])
    if job.get("next_run_at"):
        line += Text(f"; next run {render.fmt_time(job['next_run_at'])}")
    out.show(line)


@app.command()
@_reports_errors
def cancel(job_id: JobIdArgument, output: OutputOption = None) -> None:
    """Cancel a job: nothing further is published for it."""
    _changed(_session().client().cancel(job_id), output)


@app.command()
@_reports_errors
def pause(job_id: JobIdArgument, output: OutputOption = None) -> None:
    """Pause a job until it is resumed."""
    _changed(_session().client().pause(job_id), output)


@app.command()
@_reports_errors
def resume(
    job_id: JobIdArgument,
    catch_up: Annotated[bool, typer.Option("--catch-up", help="also run the fires missed while paused")] = False,
    output: OutputOption = None,
) -> None:
    """Resume a paused job from its next fire (or from the first one missed, with --catch-up)."""
    _changed(_session().client().resume(job_id, catch_up), output)


@app.command()
@_reports_errors
def run(job_id: JobIdArgument, output: OutputOption = None) -> None:
    """Run a job now, once, besides its schedule (trigger MANUAL)."""
    session = _session()
    result = session.client().run(job_id)
    out = session.out(output)
    if out.json:
        out.data(result)
    else:
        out.show(f"Queued manual run {result['execution_id']} of job {result['job_id']}, "
                 f"due {render.fmt_time(result['due_at'])}")


@app.command()
@_reports_errors
def changes(
    job_id: JobIdArgument,
    limit: Annotated[int, typer.Option(help="entries per page", min=1, max=500)] = 50,
    output: OutputOption = None,
) -> None:
    """The job's change log, newest first: who asked for each change, what, and when."""
    session = _session()
    page = session.client().changes(job_id, limit)
    out = session.out(output)
    if out.json:
        out.data(page)
        return
    if not page["items"]:
        out.note("no changes logged")
        return
    out.show(render.changes_table(page["items"]))


calendars_app = typer.Typer(help="Your calendars of excluded dates and ranges (holidays, freeze windows).",
                            no_args_is_help=True)
app.add_typer(calendars_app, name="calendars")
CalendarName = Annotated[str, typer.Argument(help="the calendar's name", metavar="NAME")]


def _exclusion(text: str) -> dict[str, str]:
    """``2026-12-25``, ``2026-12-24..2026-12-26`` or ``2026-12-24T18:00..2026-12-27T06:00``, each optionally
    followed by ``=note``."""
    spec, _, note = text.partition("=")
    low, dots, high = spec.partition("..")
    exclusion = {"from": low.strip(), "to": high.strip()} if dots else {"date": spec.strip()}
    if note:
        exclusion["note"] = note
    return exclusion


@calendars_app.command("put")
@_reports_errors
def put_calendar(
    name: CalendarName,
    timezone: Annotated[str | None, typer.Option(help="IANA time zone its dates are read in (default UTC)")] = None,
    exclude: Annotated[list[str] | None, typer.Option(
        help="2026-12-25, 2026-12-24..2026-12-26 or 2026-12-24T18:00..2026-12-27T06:00, optionally =note "
             "(repeat for more)")] = None,
    description: Annotated[str | None, typer.Option(help="what the calendar is for")] = None,
    body: Annotated[str | None, typer.Option("--json", help="a whole PUT /calendars body (text, @file or -)")] = None,
    output: OutputOption = None,
) -> None:
    """Create or replace a calendar (whole). Jobs that name it skip its dates from their next fire on."""
    session = _session()
    request: dict[str, Any] = dict(_json_argument(body, "--json")) if body else {}
    if timezone is not None:
        request["timezone"] = timezone
    if exclude:
        request["exclude"] = [*request.get("exclude", []), *(_exclusion(text) for text in exclude)]
    if description is not None:
        request["description"] = description
    answer = session.client().put_calendar(name, request)
    out = session.out(output)
    if out.json:
        out.data(answer.data)
        return
    verb = "Created" if answer.status == 201 else "Replaced"
    out.show(f"{verb} calendar {name}: {len(answer.data['exclude'])} exclusion(s) in {answer.data['timezone']}")


@calendars_app.command("show")
@_reports_errors
def show_calendar(name: CalendarName, output: OutputOption = None) -> None:
    """Show a calendar and what it excludes."""
    session = _session()
    calendar = session.client().calendar(name)
    out = session.out(output)
    if out.json:
        out.data(calendar)
    else:
        out.show(render.calendar_detail(calendar))


@calendars_app.command("list")
@_reports_errors
def list_calendars(
    limit: Annotated[int, typer.Option(help="calendars per page", min=1, max=500)] = 100,
    cursor: Annotated[str | None, typer.Option(help="the next_cursor of a previous page")] = None,
    output: OutputOption = None,
) -> None:
    """Your calendars, by name."""
    session = _session()
    page = session.client().calendars(limit, cursor)
    out = session.out(output)
    if out.json:
        out.data(page)
        return
    if not page["items"]:
        out.note("no calendars")
        return
    out.show(render.calendars_table(page["items"]))
    if page.get("next_cursor"):
        out.note(f"more: jobrunner calendars list --cursor {page['next_cursor']}")


@calendars_app.command("delete")
@_reports_errors
def delete_calendar(name: CalendarName, output: OutputOption = None) -> None:
    """Delete a calendar (refused while a job that is not cancelled names it)."""
    session = _session()
    session.client().delete_calendar(name)
    session.out(output).note(f"deleted calendar {name}")


@app.command()
@_reports_errors
def fires(
    job_id: JobIdArgument,
    start: Annotated[str, typer.Option("--from", help="the first instant: RFC 3339, or -1d, -2h, now")] = "-1d",
    end: Annotated[str, typer.Option("--to", help="the last instant (may be ahead: +1h)")] = "now",
    limit: Annotated[int, typer.Option(help="fires per page", min=1, max=500)] = 100,
    cursor: Annotated[str | None, typer.Option(help="the next_cursor of a previous page")] = None,
    output: OutputOption = None,
) -> None:
    """The job's firing ledger: each fire its schedule called for in a range, and what became of it."""
    session = _session()
    now = session.deps.now()
    start_at, end_at = _instant(start, now), _instant(end, now)
    page = session.client().fires(job_id, start_at, end_at, limit, cursor)
    out = session.out(output)
    if out.json:
        out.data(page)
        return
    if not page["items"]:
        out.note("no fire in this range")
    else:
        out.show(render.fires_table(page["items"]))
    counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(page["summary"].items()))
    verdict = ("every past fire ran once or was not run for a stated reason" if not page["unaccounted"]
               else f"{page['unaccounted']} fire(s) nothing explains")
    out.note(f"{counts or 'no fires'}: {verdict}")
    for note in page.get("notes") or []:
        out.note(note)
    if page.get("next_cursor"):
        out.note(f"more: jobrunner fires {job_id} --from {start_at} --to {end_at} --cursor {page['next_cursor']}")
    if page["unaccounted"]:
        raise typer.Exit(EXIT_API)


@app.command()
@_reports_errors
def backfill(
    job_id: JobIdArgument,
    start: Annotated[str, typer.Option("--from", help="the first fire considered: RFC 3339, or -2h, -1d")],
    end: Annotated[str, typer.Option("--to", help="the last fire considered (not in the future): RFC 3339, now, -5m")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="only list the fires")] = False,
    output: OutputOption = None,
) -> None:
    """Run the fires the job's schedule had in a past range (each once), or list them with --dry-run."""
    session = _session()
    now = session.deps.now()
    result = session.client().backfill(job_id, _instant(start, now), _instant(end, now), dry_run)
    out = session.out(output)
    if out.json:
        out.data(result)
        return
    verb = "would run" if dry_run else "queued"
    out.show(f"{verb} {len(result['fires'])} fire(s)")
    for fire in result["fires"]:
        out.show(f"  {render.fmt_time(fire)}")


@app.command()
@_reports_errors
def executions(
    job_id: JobIdArgument,
    limit: Annotated[int, typer.Option(help="how many, newest first", min=1, max=500)] = 20,
    cursor: Annotated[str | None, typer.Option(help="the next_cursor of a previous page")] = None,
    output: OutputOption = None,
) -> None:
    """A job's executions: attempts, lateness (published - due), errors."""
    session = _session()
    page = session.client().executions(job_id, limit, cursor)
    out = session.out(output)
    if out.json:
        out.data(page)
        return
    if not page["items"]:
        out.note("no executions yet")
        return
    out.show(render.executions_table(page["items"]))
    if page.get("next_cursor"):
        out.note(f"older: jobrunner executions {job_id} --cursor {page['next_cursor']}")


@app.command()
@_reports_errors
def segments(output: OutputOption = None) -> None:
    """Segment health: watermark, lag, last heartbeat and owner, executions published."""
    session = _session()
    data = session.client().segments()
    out = session.out(output)
    if out.json:
        out.data(data)
        return
    out.show(render.segments_table(data["items"]))
    behind = [s["segment"] for s in data["items"] if not s["healthy"]]
    if behind:
        out.note(f"{len(behind)} segment(s) behind: {', '.join(map(str, behind))}")


# --- tail -------------------------------------------------------------------------------------------

#: (header, width, right-aligned): fixed widths so that rows printed one by one line up.
_TAIL_COLUMNS = (("TIME", 24, False), ("JOB", 36, False), ("EXECUTION", 9, False), ("ATTEMPT", 7, True),
                 ("STATUS", 9, False), ("SCHEDULED", 24, False))


def _cell(text: str, width: int, right: bool) -> str:
    text = text if len(text) <= width else text[: width - 1] + "…"
    return text.rjust(width) if right else text.ljust(width)


def _tail_header() -> Text:
    return Text("  ".join(_cell(name, width, right) for name, width, right in _TAIL_COLUMNS) + "  DETAIL",
                style="bold")


def _tail_row(record: TailRecord) -> Text:
    value = record.value if isinstance(record.value, dict) else {}
    stamp = datetime.fromtimestamp(record.timestamp_ms / 1000, UTC).isoformat(timespec="milliseconds")
    state = str(value.get("status") or value.get("trigger") or "-")
    execution = str(value.get("execution_id") or "-")
    cells = [render.fmt_time(stamp), str(value.get("job_id") or record.key or "-"),
             execution[:8] + "…" if len(execution) > 9 else execution, str(value.get("attempt", "")), state,
             render.fmt_time(value.get("scheduled_at")) if value.get("scheduled_at") else ""]
    line = Text()
    for (name, width, right), cell in zip(_TAIL_COLUMNS, cells, strict=True):
        line.append(_cell(cell, width, right), style=render.STATUS_STYLES.get(cell, "") if name == "STATUS" else "")
        line.append("  ")
    if value:
        detail = str(value.get("error") or (render.compact(value["payload"]) if "payload" in value else ""))
    else:
        detail = render.compact(record.value)
    line.append(detail, style="red" if value.get("error") else "")
    return line


@app.command()
@_reports_errors
def tail(
    topic: Annotated[str, typer.Argument(help="jobs, job-results, job-dlq or an allowed topic")] = "jobs",
    count: Annotated[int | None, typer.Option(help="stop after this many messages", min=1)] = None,
    timeout: Annotated[float | None, typer.Option(help="stop after this many seconds", min=0)] = None,
    job: Annotated[str | None, typer.Option("--job", help="only this job's messages")] = None,
    from_beginning: Annotated[bool, typer.Option("--from-beginning", help="read the topic from its start")] = False,
    bootstrap: Annotated[str | None, typer.Option(help="Kafka bootstrap servers [env: KAFKA_BOOTSTRAP]",
                                                  show_default=False)] = None,
    output: OutputOption = None,
) -> None:
    """Follow a Kafka topic as a table (or JSON lines with -o json), from now on."""
    from kafka.errors import KafkaError

    session = _session()
    connection = session.connection()
    servers = bootstrap or connection.kafka_bootstrap
    out = session.out(output)
    shown = 0

    def show_record(record: TailRecord) -> None:
        nonlocal shown
        if out.json:
            out.line(record.to_dict())
        else:
            if shown == 0:
                out.show(_tail_header(), one_line=True)
            out.show(_tail_row(record), one_line=True)
        shown += 1

    if not out.json:
        limits = [f"{count} message(s)" if count else "", f"{timeout:g} s" if timeout is not None else ""]
        bound = " or ".join(x for x in limits if x) or "Ctrl-C"
        out.note(f"following {topic} on {servers} until {bound}")
    try:
        seen = follow(session.deps.consumer(servers, connection.kafka_security), topic, show_record, count=count,
                      timeout_s=timeout, from_beginning=from_beginning, job_id=job)
    except KafkaUnreachable:
        out.error(f"cannot connect to Kafka at {servers}", None,
                  {"status": 0, "error": "cannot_connect", "message": f"no Kafka broker at {servers}"})
        raise typer.Exit(EXIT_CONNECT) from None
    except TopicMissing as exc:
        out.error(str(exc), None, {"status": 0, "error": "no_topic", "message": str(exc)})
        raise typer.Exit(EXIT_NOT_FOUND) from None
    except KafkaError as exc:
        out.error(f"Kafka: {exc}", None, {"status": 0, "error": "kafka", "message": str(exc)})
        raise typer.Exit(EXIT_API) from None
    except KeyboardInterrupt:
        return
    if count is not None and seen < count:
        out.error(f"timed out after {timeout:g} s with {seen} of {count} message(s)", None,
                  {"status": 0, "error": "timeout", "message": f"{seen} of {count} messages"})
        raise typer.Exit(EXIT_API)


# --- import -----------------------------------------------------------------------------------------

_ABORTING = {401, 403}  # every other line would fail the same way


@app.command("import")
@_reports_errors
def import_jobs(
    file: Annotated[Path, typer.Argument(help="JSONL (one POST /jobs body per line) or CSV", exists=True,
                                         dir_okay=False, readable=True)],
    file_format: Annotated[FileFormat | None, typer.Option("--format", help="default: from the file's suffix",
                                                           show_default=False)] = None,
    state: Annotated[Path | None, typer.Option(help="state file (default: <file>.import-state.json)",
                                               show_default=False)] = None,
    output: OutputOption = None,
) -> None:
    """Submit every job in a file; re-run it to resume: lines already done are skipped, none is duplicated."""
    session = _session()
    out = session.out(output)
    try:
        fmt = bulk.detect_format(file, file_format.value if file_format else None)
        state_file = state or bulk.state_path(file)
        progress_state = bulk.ImportState.load(state_file, file)
        todo = list(bulk.records(file, fmt))
    except bulk.BadFile as exc:
        raise UsageError(str(exc)) from None
    client = session.client()
    summary = bulk.Summary(file=str(file), state_file=str(state_file), total=len(todo))
    progress = Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                        console=render.console(stderr=True), transient=True,
                        disable=out.json or not render.console(stderr=True).is_terminal)
    try:
        with progress:
            task = progress.add_task("import", total=len(todo))
            for n, record in enumerate(todo, start=1):
                _import_one(client, file, record, progress_state, summary)
                progress.advance(task)
                if n % bulk.SAVE_EVERY == 0:
                    progress_state.save()
    except CannotConnect as exc:
        summary.stopped = f"cannot connect: {exc}"
        raise
    except ApiError as exc:
        summary.stopped = exc.message
        raise
    finally:
        progress_state.save()
        _report_import(out, summary)
    if summary.failed:
        raise typer.Exit(EXIT_API)


def _import_one(client: ApiClient, file: Path, record: bulk.Record, state: bulk.ImportState,
                summary: bulk.Summary) -> None:
    key = bulk.idempotency_key(file, record.line, record.text)
    if state.is_done(record.line, key):
        summary.skipped += 1
        return
    if record.body is None:
        summary.failed.append({"line": record.line, "message": record.problem, "errors": []})
        return
    body = {**record.body}
    body.setdefault("idempotency_key", key)
    try:
        answer = client.submit(body)
    except ApiError as exc:
        if exc.status in _ABORTING or exc.status >= 500 or exc.status == 0:
            raise
        summary.failed.append({"line": record.line, "message": exc.message, "errors": exc.errors})
        return
    job_id = answer.data["job_id"]
    state.mark(record.line, key, job_id)
    summary.jobs.append({"line": record.line, "job_id": job_id, "created": answer.status == 201})
    if answer.status == 201:
        summary.created += 1
    else:
        summary.existing += 1


def _report_import(out: render.Output, summary: bulk.Summary) -> None:
    if out.json:
        out.data(summary.to_dict())
        return
    counts = (f"{summary.total} record(s): {summary.created} created, {summary.existing} already there, "
              f"{summary.skipped} done before, {len(summary.failed)} failed")
    out.show(Text(counts, style="bold red" if summary.failed else "bold green"))
    if summary.failed:
        table = Table(header_style="bold", show_edge=False)
        table.add_column("LINE", justify="right")
        table.add_column("ERROR", style="red")
        for failure in summary.failed:
            reasons = "; ".join(f"{e.get('field')}: {e.get('reason')}" for e in failure["errors"])
            table.add_row(str(failure["line"]), reasons or str(failure["message"]))
        out.show(table)
        out.note(f"fix those lines and run the same command again; done lines are skipped ({summary.state_file})")
    if summary.stopped:
        out.note(f"stopped early ({summary.stopped}); run the same command again to resume")


def main() -> None:
    app(prog_name="jobrunner")
