"""``jobrunner import``: submit every job of a JSONL or CSV file, resumable (``cli.bulk`` keeps the state).

Typer reads the parameter annotations at run time: no ``from __future__ import annotations`` here.
"""

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from jobrunner_client.cli import bulk, render
from jobrunner_client.cli.arguments import OutputOption
from jobrunner_client.cli.client import ApiClient, ApiError, CannotConnect
from jobrunner_client.cli.session import EXIT_API, current, reports_errors
from jobrunner_client.cli.settings import UsageError


class FileFormat(StrEnum):
    jsonl = "jsonl"
    csv = "csv"


_ABORTING = {401, 403}  # every other line would fail the same way


@reports_errors
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
    session = current()
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
