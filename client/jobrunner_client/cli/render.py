"""What the CLI prints: rich tables for people, plain JSON (``--output json``) for scripts.

Data goes to stdout; messages about the run (errors, hints, progress) go to stderr, so that
``jobrunner list -o json | jq`` always reads clean JSON.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

STATUS_STYLES = {
    "PENDING": "white",
    "SCHEDULED": "cyan",
    "RUNNING": "yellow",
    "SUCCESS": "green",
    "FAILED": "bold red",
    "PAUSED": "magenta",
    "CANCELLED": "dim",
}


def console(stderr: bool = False) -> Console:
    """A console on the current stdout/stderr; wide when piped, so that ids are never cut."""
    plain = Console(stderr=stderr, highlight=False)
    if plain.is_terminal or os.environ.get("COLUMNS"):
        return plain
    return Console(stderr=stderr, highlight=False, width=200)


class Output:
    def __init__(self, mode: str) -> None:
        self.mode = mode

    @property
    def json(self) -> bool:
        return self.mode == "json"

    def data(self, value: Any) -> None:
        print(json.dumps(value, indent=2, ensure_ascii=False), flush=True)

    def line(self, value: Any) -> None:
        """One JSON document per line (streams: tail)."""
        print(json.dumps(value, separators=(",", ":"), ensure_ascii=False), flush=True)

    def show(self, renderable: Any, one_line: bool = False) -> None:
        """Print for people; ``one_line`` cuts a long line with an ellipsis instead of wrapping it."""
        if one_line:
            console().print(renderable, no_wrap=True, overflow="ellipsis", crop=True)
        else:
            console().print(renderable)

    def note(self, text: str) -> None:
        """A hint for people, on stderr (never mixed into data)."""
        console(stderr=True).print(text, style="dim")

    def error(self, message: str, details: list[str] | None = None, data: dict[str, Any] | None = None) -> None:
        if self.json and data is not None:
            print(json.dumps({"error": data}, ensure_ascii=False), file=console(stderr=True).file, flush=True)
            return
        err = console(stderr=True)
        err.print(Text("error: ", style="bold red") + Text(message))
        for detail in details or []:
            err.print(Text(f"  - {detail}"))


# --- formatting -------------------------------------------------------------------------------------


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def fmt_time(value: str | None, millis: bool = True) -> str:
    instant = parse_time(value)
    if instant is None:
        return value or "-"
    text = instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    fraction = instant.microsecond // 1000
    return f"{text}.{fraction:03d}Z" if millis and fraction else f"{text}Z"


def fmt_seconds(seconds: float) -> str:
    magnitude = abs(seconds)
    sign = "-" if seconds < 0 else ""
    if magnitude < 1:
        return f"{sign}{magnitude * 1000:.0f} ms"
    if magnitude < 60:
        return f"{sign}{magnitude:.1f} s" if magnitude < 10 else f"{sign}{magnitude:.0f} s"
    if magnitude < 3600:
        return f"{sign}{int(magnitude // 60)} min {int(magnitude % 60)} s"
    if magnitude < 86400:
        return f"{sign}{int(magnitude // 3600)} h {int(magnitude % 3600 // 60)} min"
    return f"{sign}{magnitude / 86400:.1f} d"


def relative(value: str | None, now: datetime) -> str:
    instant = parse_time(value)
    if instant is None:
        return ""
    delta = (instant - now).total_seconds()
    if abs(delta) < 1:
        return "now"
    magnitude = abs(delta)
    text = f"{round(magnitude)} s" if magnitude < 60 else fmt_seconds(magnitude)
    return f"in {text}" if delta > 0 else f"{text} ago"


def between(start: str | None, end: str | None) -> str:
    a, b = parse_time(start), parse_time(end)
    return fmt_seconds((b - a).total_seconds()) if a and b else "-"


def status(value: str | None) -> Text:
    if not value:
        return Text("-", style="dim")
    return Text(value, style=STATUS_STYLES.get(value, ""))


def kind_of(schedule: dict[str, Any]) -> str:
    return next((k for k in ("at", "every", "cron", "iso8601") if schedule.get(k)), "?")


def schedule_summary(schedule: dict[str, Any]) -> str:
    kind = kind_of(schedule)
    if kind == "at":
        return f"once at {fmt_time(schedule['at'])}"
    if kind == "every":
        text = f"every {schedule['every']}"
        if schedule.get("start"):
            text += f" from {fmt_time(schedule['start'])}"
        if schedule.get("end"):
            text += f" until {fmt_time(schedule['end'])}"
        return text
    if kind == "cron":
        return f"cron '{schedule['cron']}' {schedule.get('timezone') or 'UTC'}"
    if kind == "iso8601":
        return str(schedule["iso8601"])
    return json.dumps(schedule)


def compact(value: Any, width: int = 60) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


# --- tables -----------------------------------------------------------------------------------------


def jobs_table(items: list[dict[str, Any]], now: datetime) -> Table:
    table = Table(header_style="bold", show_edge=False)
    table.add_column("JOB ID", no_wrap=True)  # never cut: people copy it
    table.add_column("STATUS", no_wrap=True)
    table.add_column("SCHEDULE", ratio=3)
    table.add_column("NEXT RUN", ratio=2)
    table.add_column("LAST RUN", ratio=2)
    for job in items:
        next_run = Text("-", style="dim")
        if job.get("next_run_at"):
            next_run = Text(f"{fmt_time(job['next_run_at'])} ({relative(job['next_run_at'], now)})")
        last_run = Text("-", style="dim")
        if job.get("last_run_at"):
            last_run = Text(f"{fmt_time(job['last_run_at'])} ") + status(job.get("last_status"))
        table.add_row(job["job_id"], status(job["status"]), schedule_summary(job["schedule"]), next_run, last_run)
    return table


def changes_table(items: list[dict[str, Any]]) -> Table:
    table = Table(header_style="bold", show_edge=False)
    for name in ("WHEN", "ACTION", "VERSION", "WHO", "DETAILS"):
        table.add_column(name, no_wrap=name != "DETAILS")
    for change in items:
        table.add_row(fmt_time(change["changed_at"]), change["action"], str(change["version"]), change["actor"],
                      compact(change.get("details") or {}, 80))
    return table


#: How each outcome of the firing ledger is shown: a fire that ran, one not run for a stated reason, one to come,
#: and one nothing explains.
OUTCOME_STYLES = {"published": "green", "caught_up": "yellow", "backfilled": "yellow", "repaired": "yellow",
                  "skipped": "magenta", "held": "magenta", "dropped": "magenta", "excluded": "magenta",
                  "paused": "magenta", "cancelled": "dim", "replaced": "dim", "due": "cyan", "upcoming": "cyan",
                  "expired": "dim", "missing": "bold red"}


def fires_table(items: list[dict[str, Any]]) -> Table:
    """The firing ledger, oldest first: each fire, what became of it, and why."""
    table = Table(header_style="bold", show_edge=False)
    for name in ("FIRE", "OUTCOME", "LATENESS", "RUNS"):
        table.add_column(name, no_wrap=True, justify="right" if name in ("LATENESS", "RUNS") else "left")
    table.add_column("DETAIL", overflow="fold")
    for fire in items:
        lateness = fire.get("lateness_ms")
        detail = "; ".join(text for text in (fire.get("detail"), fire.get("dst")) if text)
        table.add_row(fmt_time(fire["at"]), Text(fire["outcome"], style=OUTCOME_STYLES.get(fire["outcome"], "")),
                      "-" if lateness is None else fmt_seconds(lateness / 1000), str(len(fire.get("executions") or [])),
                      detail)
    return table


def exclusion_text(exclusion: dict[str, str]) -> str:
    text = exclusion["date"] if "date" in exclusion else f"{exclusion['from']} .. {exclusion['to']}"
    return f"{text}  {exclusion['note']}" if exclusion.get("note") else text


def calendars_table(items: list[dict[str, Any]]) -> Table:
    table = Table(header_style="bold", show_edge=False)
    for name in ("NAME", "TIME ZONE", "EXCLUDES", "UPDATED"):
        table.add_column(name, no_wrap=name != "EXCLUDES", overflow="fold")
    for calendar in items:
        excluded = calendar["exclude"]
        shown = "; ".join(exclusion_text(e) for e in excluded[:3]) + (f"; +{len(excluded) - 3} more"
                                                                        if len(excluded) > 3 else "")
        table.add_row(calendar["name"], calendar["timezone"], shown or "nothing", fmt_time(calendar.get("updated_at")))
    return table


def calendar_detail(calendar: dict[str, Any]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    table.add_row("calendar", calendar["name"])
    table.add_row("time zone", calendar["timezone"])
    table.add_row("description", calendar.get("description") or "-")
    table.add_row("excludes", "\n".join(exclusion_text(e) for e in calendar["exclude"]) or "nothing")
    table.add_row("updated", fmt_time(calendar.get("updated_at")))
    return table


def ends_text(job: dict[str, Any]) -> str:
    """The job's end conditions in words: its count, its end, the fires left, whether it is then deleted."""
    schedule = job.get("schedule") or {}
    parts = []
    if schedule.get("count"):
        parts.append(f"after {schedule['count']} fire(s)")
    if schedule.get("end"):
        parts.append(("the last at " if schedule.get("count") else "at ") + fmt_time(schedule["end"]))
    if job.get("remaining_fires") is not None:
        parts.append(f"{job['remaining_fires']} left")
    if not parts:
        parts.append("after its one fire" if kind_of(schedule) == "at" else "never")
    if job.get("delete_after_last"):
        parts.append("then the job is deleted (its history is kept)")
    return "; ".join(parts)


def target_summary(target: dict[str, Any]) -> str:
    """Where a job's executions are delivered, in one line: its kind and address (an https target's headers by
    name only: their values may be credentials)."""
    kind, fields = next(iter(target.items()))
    if kind == "https":
        extra = [f"timeout {fields.get('timeout_s')} s"]
        if fields.get("headers"):
            extra.append("headers " + ", ".join(sorted(fields["headers"])))
        return f"https {fields.get('method', 'POST')} {fields.get('url')} ({'; '.join(extra)})"
    if kind == "lambda":
        return f"lambda {fields.get('function_arn')}"
    group = f" (group {fields['message_group_id']})" if fields.get("message_group_id") else ""
    return f"{kind} {fields.get('queue_url')}{group}"


def job_detail(job: dict[str, Any], now: datetime) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    backoff = job.get("backoff") or {}
    rows: list[tuple[str, Any]] = [
        ("job", job["job_id"]),
        ("status", status(job["status"])),
        ("state", f"{job['state']} (version {job['version']})"),
        ("schedule", schedule_summary(job["schedule"])),
        ("next run", f"{fmt_time(job.get('next_run_at'))} {relative(job.get('next_run_at'), now)}".strip()),
        ("last run", Text(f"{fmt_time(job['last_run_at'])} ") + status(job.get("last_status"))
         if job.get("last_run_at") else "-"),
        ("topic", job.get("topic", "")),
        ("retries", f"{job['max_retries']} (backoff {backoff.get('initial_delay_s'):g} s x "
                    f"{backoff.get('multiplier'):g}, at most {backoff.get('max_delay_s'):g} s)"),
        ("timeout", f"{job['timeout_s']} s" if job.get("timeout_s") else "none"),
        ("jitter", f"up to {job['jitter_s']} s after each fire" if job.get("jitter_s") else "none"),
        ("tags", ", ".join(f"{k}={v}" for k, v in sorted(job.get("tags", {}).items())) or "none"),
        ("calendar", job.get("calendar") or "none"),
        ("ends", ends_text(job)),
        ("overlap", job.get("overlap") or "allow_all"),
        ("catch-up", ", ".join(f"{k} {v}" for k, v in (job.get("catch_up") or {}).items()) or "every missed fire"),
        ("payload", compact(job.get("payload"), 100)),
        ("created", fmt_time(job.get("created_at"))),
        ("updated", fmt_time(job.get("updated_at"))),
    ]
    if job.get("target"):
        # a job with a target has no topic: where its executions go is the target
        rows[rows.index(("topic", job.get("topic", "")))] = ("target", Text(target_summary(job["target"])))
    if job.get("description"):
        # the user's note on the job, right after its id: shown as written, never marked up
        rows.insert(1, ("description", Text(job["description"])))
    if job.get("next_runs") is not None:
        excluded = {e["at"] for e in job.get("excluded_runs") or []}
        fires = [f"{fmt_time(t)}  {relative(t, now)}" + ("  excluded by its calendar" if t in excluded else "")
                 for t in job["next_runs"]]
        rows.append(("next fires", "\n".join(fires) if fires else "none"))
    for name, value in rows:
        table.add_row(name, value)
    return table


def executions_table(items: list[dict[str, Any]]) -> Table:
    """Newest first; lateness is published_at - due_at, took is finished_at - published_at."""
    table = Table(header_style="bold", show_edge=False)
    for name in ("ATTEMPT", "TRIGGER", "STATUS", "SCHEDULED", "PUBLISHED", "LATENESS", "TOOK"):
        table.add_column(name, no_wrap=True, justify="right" if name in ("ATTEMPT", "LATENESS", "TOOK") else "left")
    table.add_column("ERROR", style="red", overflow="fold")
    for e in items:
        table.add_row(str(e["attempt"]), e["trigger"], status(e["status"]), fmt_time(e["scheduled_at"]),
                      fmt_time(e.get("published_at")), between(e.get("due_at"), e.get("published_at")),
                      between(e.get("published_at"), e.get("finished_at")), e.get("error") or "")
    return table


def segments_table(items: list[dict[str, Any]]) -> Table:
    table = Table(header_style="bold", show_edge=False)
    for name in ("SEGMENT", "HEALTH", "WATERMARK", "LAG", "LAST HEARTBEAT"):
        table.add_column(name, no_wrap=True, justify="right" if name in ("SEGMENT", "LAG") else "left")
    table.add_column("LAST OWNER", overflow="fold")
    table.add_column("PUBLISHED", no_wrap=True, justify="right")
    for s in items:
        lag = s.get("lag_s")
        table.add_row(
            str(s["segment"]), Text("healthy", style="green") if s["healthy"] else Text("BEHIND", style="bold red"),
            fmt_time(s.get("watermark"), millis=False), "-" if lag is None else fmt_seconds(lag) if lag else "none",
            fmt_time(s.get("last_heartbeat"), millis=False), s.get("last_owner") or "-", f"{s['published_total']:,}",
        )
    return table


def webhook_secrets_table(items: list[dict[str, Any]]) -> Table:
    """The tenant's webhook secrets, newest first: the current one, and the previous one during a rotation."""
    table = Table(header_style="bold", show_edge=False)
    for name in ("ID", "STATE", "CREATED", "VALID UNTIL"):
        table.add_column(name, no_wrap=True)
    table.add_column("SECRET", overflow="fold")
    for secret in items:
        state = Text("current", style="green") if secret["current"] else Text("previous", style="yellow")
        table.add_row(secret["id"], state, fmt_time(secret.get("created_at"), millis=False),
                      fmt_time(secret.get("valid_until"), millis=False) if secret.get("valid_until") else "-",
                      secret["secret"])
    return table
