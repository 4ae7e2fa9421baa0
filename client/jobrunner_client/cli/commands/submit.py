"""``jobrunner submit``: one schedule option (or a ``--json`` body), a payload and delivery options (a topic,
or a target: an https URL, a Lambda function or an SQS queue), as a ``POST /jobs`` body.

Typer reads the parameter annotations at run time: no ``from __future__ import annotations`` here.
"""

from datetime import datetime
from typing import Annotated, Any

import typer
from rich.text import Text

from jobrunner_client.cli import render
from jobrunner_client.cli.arguments import OutputOption, instant, json_argument, json_body
from jobrunner_client.cli.client import Answer
from jobrunner_client.cli.session import OutputMode, Session, current, reports_errors
from jobrunner_client.cli.settings import UsageError


@reports_errors
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
    target_url: Annotated[str | None, typer.Option(help="deliver each execution to this https URL (a signed "
                                                        "webhook) instead of a topic's workers",
                                                   rich_help_panel="Target (instead of a topic)")] = None,
    target_method: Annotated[str | None, typer.Option(help="with --target-url: POST (default), PUT, PATCH, GET or "
                                                           "DELETE",
                                                      rich_help_panel="Target (instead of a topic)")] = None,
    target_header: Annotated[list[str] | None, typer.Option(help="with --target-url: a Name=value header to send "
                                                                 "(repeat for more)",
                                                            rich_help_panel="Target (instead of a topic)")] = None,
    target_timeout: Annotated[int | None, typer.Option(help="with --target-url: seconds a call may take (1-30, "
                                                            "default 10)",
                                                       rich_help_panel="Target (instead of a topic)")] = None,
    target_lambda: Annotated[str | None, typer.Option(help="invoke this Lambda function ARN with each execution",
                                                      rich_help_panel="Target (instead of a topic)")] = None,
    target_sqs: Annotated[str | None, typer.Option(help="send each execution to this SQS queue URL",
                                                   rich_help_panel="Target (instead of a topic)")] = None,
    target_group_id: Annotated[str | None, typer.Option(help="with --target-sqs: the message group id (FIFO queues)",
                                                        rich_help_panel="Target (instead of a topic)")] = None,
    idempotency_key: Annotated[str | None, typer.Option(help="the same key never makes a second job")] = None,
    body: Annotated[str | None, typer.Option("--json", help="a whole POST /jobs body (text, @file or -); the "
                                                            "other options override its fields")] = None,
    output: OutputOption = None,
) -> None:
    """Submit a job: one schedule option, a payload, and delivery options (a topic's workers, or a target)."""
    session = current()
    now = session.deps.now()
    request = json_body(body)
    kinds = {"at": at, "every": every, "cron": cron, "iso8601": iso8601}
    check_schedule_options(request.get("schedule", {}), kinds, start=start, end=end, count=count, timezone=timezone)
    schedule = schedule_of(kinds, now)
    if schedule is not None:
        request["schedule"] = schedule
    if "schedule" not in request:
        raise UsageError("give a schedule: --at, --every, --cron or --iso8601 (or a --json body with one)")
    merge(request, "schedule", {"start": instant(start, now) if start else None,
                                "end": instant(end, now) if end else None, "count": count,
                                "timezone": timezone or None})
    if delete_after_last:
        request["delete_after_last"] = True
    if payload is not None:
        request["payload"] = json_argument(payload, "--payload")
    request.update(given({"overlap": overlap, "topic": topic, "max_retries": max_retries, "timeout_s": timeout_s,
                          "jitter_s": jitter_s, "calendar": calendar, "idempotency_key": idempotency_key}))
    merge(request, "catch_up", {"window_s": catch_up_window, "most": catch_up_most})
    merge(request, "tags", dict(tag_of(text) for text in tag or []))
    merge(request, "backoff", {"initial_delay_s": backoff_initial, "multiplier": backoff_multiplier,
                               "max_delay_s": backoff_max})
    target = target_of(url=target_url, method=target_method, headers=target_header, timeout=target_timeout,
                       function=target_lambda, queue=target_sqs, group=target_group_id)
    if target is not None:
        if topic is not None:
            raise UsageError("a job with a target has no topic: give --topic or a target, not both")
        request["target"] = target
        request.pop("topic", None)  # a --json body's topic gives way to the target the options name
    show_submitted(session, session.client().submit(request), output)


def check_schedule_options(in_body: Any, kinds: dict[str, str | None], *, start: str | None, end: str | None,
                           count: int | None, timezone: str | None) -> None:
    """Refuse options that do not go together: two schedule kinds, or a bound that the schedule (given as an
    option, or in the ``--json`` body: ``in_body``) has no use for."""
    named = [k for k, v in kinds.items() if v is not None]
    if len(named) > 1:
        raise UsageError(f"give one schedule, not {' and '.join('--' + k for k in named)}")
    recurring = {k for k in ("every", "cron", "iso8601") if kinds[k] is not None or k in in_body}
    if start and not recurring & {"every", "cron"}:
        raise UsageError("--start goes with --every or --cron")
    if (end or count) and not recurring:
        raise UsageError("--end and --count go with a recurring schedule (--every, --cron, --iso8601)")
    if timezone and kinds["cron"] is None and "cron" not in in_body:
        raise UsageError("--timezone goes with --cron")


def schedule_of(kinds: dict[str, str | None], now: datetime) -> dict[str, Any] | None:
    """The ``schedule`` the kind options give (``--at`` made absolute), or None when none is given."""
    schedule: dict[str, Any] = given(kinds)
    if not schedule:
        return None
    if "at" in schedule:
        schedule["at"] = instant(schedule["at"], now)
    return schedule


def given(options: dict[str, Any]) -> dict[str, Any]:
    """The options given (not None), in order."""
    return {k: v for k, v in options.items() if v is not None}


def merge(request: dict[str, Any], name: str, options: dict[str, Any]) -> None:
    """Set the ``options`` given in the object ``request[name]``, over what a ``--json`` body has there."""
    fields = given(options)
    if fields:
        request[name] = {**request.get(name, {}), **fields}


def target_of(*, url: str | None, method: str | None, headers: list[str] | None, timeout: int | None,
              function: str | None, queue: str | None, group: str | None) -> dict[str, Any] | None:
    """The ``target`` the options give (the API checks its rules), or None when they give none; options that
    do not go together are refused."""
    kinds = given({"--target-url": url, "--target-lambda": function, "--target-sqs": queue})
    if len(kinds) > 1:
        raise UsageError(f"give one target, not {' and '.join(kinds)}")
    if (method or headers or timeout is not None) and url is None:
        raise UsageError("--target-method, --target-header and --target-timeout go with --target-url")
    if group is not None and queue is None:
        raise UsageError("--target-group-id goes with --target-sqs")
    if url is not None:
        https = given({"url": url, "method": method, "timeout_s": timeout})
        if headers:
            https["headers"] = dict(header_of(text) for text in headers)
        return {"https": https}
    if function is not None:
        return {"lambda": {"function_arn": function}}
    if queue is not None:
        return {"sqs": given({"queue_url": queue, "message_group_id": group})}
    return None


def header_of(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise typer.BadParameter(f"{text!r} is not Name=value", param_hint="--target-header")
    return name.strip(), value.strip()


def tag_of(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise typer.BadParameter(f"{text!r} is not key=value", param_hint="--tag")
    return key, value


def show_submitted(session: Session, answer: Answer, output: OutputMode | None) -> None:
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
