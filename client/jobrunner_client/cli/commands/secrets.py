"""``jobrunner secrets``: the secrets your webhook deliveries are signed with, and their rotation.

Typer reads the parameter annotations at run time: no ``from __future__ import annotations`` here.
"""

from typing import Annotated, Any

import typer

from jobrunner_client.cli import render
from jobrunner_client.cli.arguments import OutputOption
from jobrunner_client.cli.session import OutputMode, Session, current, reports_errors

app = typer.Typer(help="The secrets your HTTPS targets' deliveries are signed with (Standard Webhooks), and their "
                       "rotation: show, rotate, end-rotation.", no_args_is_help=True)


def _shown(session: Session, answer: dict[str, Any], output: OutputMode | None, note: str = "") -> None:
    out = session.out(output)
    if out.json:
        out.data(answer)
        return
    out.show(render.webhook_secrets_table(answer["items"]))
    if note:
        out.note(note)


@app.command("show")
@reports_errors
def show_secrets(output: OutputOption = None) -> None:
    """Your signing secrets valid now: the current one, and the previous one while a rotation's grace lasts
    (a receiver verifies with either). Your first read creates your secret."""
    session = current()
    _shown(session, session.client().webhook_secrets(), output)


@app.command("rotate")
@reports_errors
def rotate_secret(
    grace: Annotated[int | None, typer.Option(
        "--grace", help="seconds the current secret keeps signing beside the new one (0 to 604800; the API's "
                        "default: 86400)", min=0, max=604_800, show_default=False)] = None,
    output: OutputOption = None,
) -> None:
    """A new secret signs from now on; the current one keeps signing beside it for the grace. Give your receivers
    the new secret within it, then end the rotation."""
    session = current()
    answer = session.client().rotate_webhook_secret(grace)
    _shown(session, answer, output, "deliveries are signed under both until the previous one's grace ends; "
                                    "then: jobrunner secrets end-rotation" if len(answer["items"]) > 1 else "")


@app.command("end-rotation")
@reports_errors
def end_rotation(output: OutputOption = None) -> None:
    """Stop signing under the previous secret now (a receiver that knows only it no longer verifies)."""
    session = current()
    _shown(session, session.client().end_webhook_secret_rotation(), output)
