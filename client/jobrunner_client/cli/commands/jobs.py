"""The commands on jobs and their runs: list, bulk, show, cancel, pause, resume, run, changes, fires, backfill,
executions, segments.

Typer reads the parameter annotations at run time: no ``from __future__ import annotations`` here.
"""

from typing import Annotated, Any

import typer
from rich.text import Text

from jobrunner_client.cli import render
from jobrunner_client.cli.arguments import JobIdArgument, OutputOption, instant
from jobrunner_client.cli.session import EXIT_API, OutputMode, current, reports_errors
from jobrunner_client.protocol import JobStatus


@reports_errors
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
    session = current()
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


@reports_errors
def bulk_change(
    action: Annotated[str, typer.Argument(help="pause, resume or cancel")],
    tag: Annotated[str, typer.Option(help="the jobs with this tag: key:value, or key for any value")],
    status: Annotated[JobStatus | None, typer.Option(help="and in this status", case_sensitive=False,
                                                  show_default=False)] = None,
    kind: Annotated[str | None, typer.Option(help="and of this schedule kind")] = None,
    output: OutputOption = None,
) -> None:
    """Pause, resume or cancel every job a tag selects (page by page, until none is left)."""
    session = current()
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


@reports_errors
def show(
    job_id: JobIdArgument,
    preview: Annotated[int, typer.Option(help="how many next fire times to show", min=0, max=50)] = 5,
    output: OutputOption = None,
) -> None:
    """Show a job, with its next fire times."""
    session = current()
    job = session.client().job(job_id, preview)
    out = session.out(output)
    if out.json:
        out.data(job)
    else:
        out.show(render.job_detail(job, session.deps.now()))


def _changed(job: dict[str, Any], output: OutputMode | None) -> None:
    session = current()
    out = session.out(output)
    if out.json:
        out.data(job)
        return
    line = Text(f"Job {job['job_id']} is now ") + render.status(job["status"])
    if job.get("next_run_at"):
        line += Text(f"; next run {render.fmt_time(job['next_run_at'])}")
    out.show(line)


@reports_errors
def cancel(job_id: JobIdArgument, output: OutputOption = None) -> None:
    """Cancel a job: nothing further is published for it."""
    _changed(current().client().cancel(job_id), output)


@reports_errors
def pause(job_id: JobIdArgument, output: OutputOption = None) -> None:
    """Pause a job until it is resumed."""
    _changed(current().client().pause(job_id), output)


@reports_errors
def resume(
    job_id: JobIdArgument,
    catch_up: Annotated[bool, typer.Option("--catch-up", help="also run the fires missed while paused")] = False,
    output: OutputOption = None,
) -> None:
    """Resume a paused job from its next fire (or from the first one missed, with --catch-up)."""
    _changed(current().client().resume(job_id, catch_up), output)


@reports_errors
def run(job_id: JobIdArgument, output: OutputOption = None) -> None:
    """Run a job now, once, besides its schedule (trigger MANUAL)."""
    session = current()
    result = session.client().run(job_id)
    out = session.out(output)
    if out.json:
        out.data(result)
    else:
        out.show(f"Queued manual run {result['execution_id']} of job {result['job_id']}, "
                 f"due {render.fmt_time(result['due_at'])}")


@reports_errors
def changes(
    job_id: JobIdArgument,
    limit: Annotated[int, typer.Option(help="entries per page", min=1, max=500)] = 50,
    output: OutputOption = None,
) -> None:
    """The job's change log, newest first: who asked for each change, what, and when."""
    session = current()
    page = session.client().changes(job_id, limit)
    out = session.out(output)
    if out.json:
        out.data(page)
        return
    if not page["items"]:
        out.note("no changes logged")
        return
    out.show(render.changes_table(page["items"]))



@reports_errors
def fires(
    job_id: JobIdArgument,
    start: Annotated[str, typer.Option("--from", help="the first instant: RFC 3339, or -1d, -2h, now")] = "-1d",
    end: Annotated[str, typer.Option("--to", help="the last instant (may be ahead: +1h)")] = "now",
    limit: Annotated[int, typer.Option(help="fires per page", min=1, max=500)] = 100,
    cursor: Annotated[str | None, typer.Option(help="the next_cursor of a previous page")] = None,
    output: OutputOption = None,
) -> None:
    """The job's firing ledger: each fire its schedule called for in a range, and what became of it."""
    session = current()
    now = session.deps.now()
    start_at, end_at = instant(start, now), instant(end, now)
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


@reports_errors
def backfill(
    job_id: JobIdArgument,
    start: Annotated[str, typer.Option("--from", help="the first fire considered: RFC 3339, or -2h, -1d")],
    end: Annotated[str, typer.Option("--to", help="the last fire considered (not in the future): RFC 3339, now, -5m")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="only list the fires")] = False,
    output: OutputOption = None,
) -> None:
    """Run the fires the job's schedule had in a past range (each once), or list them with --dry-run."""
    session = current()
    now = session.deps.now()
    result = session.client().backfill(job_id, instant(start, now), instant(end, now), dry_run)
    out = session.out(output)
    if out.json:
        out.data(result)
        return
    verb = "would run" if dry_run else "queued"
    out.show(f"{verb} {len(result['fires'])} fire(s)")
    for fire in result["fires"]:
        out.show(f"  {render.fmt_time(fire)}")


@reports_errors
def executions(
    job_id: JobIdArgument,
    limit: Annotated[int, typer.Option(help="how many, newest first", min=1, max=500)] = 20,
    cursor: Annotated[str | None, typer.Option(help="the next_cursor of a previous page")] = None,
    output: OutputOption = None,
) -> None:
    """A job's executions: attempts, lateness (published - due), errors."""
    session = current()
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


@reports_errors
def segments(output: OutputOption = None) -> None:
    """Segment health: watermark, lag, last heartbeat and owner, executions published."""
    session = current()
    data = session.client().segments()
    out = session.out(output)
    if out.json:
        out.data(data)
        return
    out.show(render.segments_table(data["items"]))
    behind = [s["segment"] for s in data["items"] if not s["healthy"]]
    if behind:
        out.note(f"{len(behind)} segment(s) behind: {', '.join(map(str, behind))}")
