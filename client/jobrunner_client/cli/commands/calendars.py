"""``jobrunner calendars``: your calendars of excluded dates and ranges.

Typer reads the parameter annotations at run time: no ``from __future__ import annotations`` here.
"""

from typing import Annotated

import typer

from jobrunner_client.cli import render
from jobrunner_client.cli.arguments import OutputOption, json_body
from jobrunner_client.cli.session import current, reports_errors

app = typer.Typer(help="Your calendars of excluded dates and ranges (holidays, freeze windows).", no_args_is_help=True)
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


@app.command("put")
@reports_errors
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
    session = current()
    request = json_body(body)
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


@app.command("show")
@reports_errors
def show_calendar(name: CalendarName, output: OutputOption = None) -> None:
    """Show a calendar and what it excludes."""
    session = current()
    calendar = session.client().calendar(name)
    out = session.out(output)
    if out.json:
        out.data(calendar)
    else:
        out.show(render.calendar_detail(calendar))


@app.command("list")
@reports_errors
def list_calendars(
    limit: Annotated[int, typer.Option(help="calendars per page", min=1, max=500)] = 100,
    cursor: Annotated[str | None, typer.Option(help="the next_cursor of a previous page")] = None,
    output: OutputOption = None,
) -> None:
    """Your calendars, by name."""
    session = current()
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


@app.command("delete")
@reports_errors
def delete_calendar(name: CalendarName, output: OutputOption = None) -> None:
    """Delete a calendar (refused while a job that is not cancelled names it)."""
    session = current()
    session.client().delete_calendar(name)
    session.out(output).note(f"deleted calendar {name}")
