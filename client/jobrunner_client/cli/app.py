"""The ``jobrunner`` command: the HTTP API from a shell, plus following Kafka topics and bulk imports.

This module makes the application: its options common to every command (``root``) and its commands, in the
order ``--help`` lists them; each command lives in ``commands/``, the invocation's session in ``session``.

Typer reads the parameter annotations at run time, so this module does not use
``from __future__ import annotations``: every type in a signature must be importable as it stands.
"""

from pathlib import Path
from typing import Annotated

import typer

from jobrunner_client.cli.commands import bulk_import, calendars, jobs, secrets, submit, tail
from jobrunner_client.cli.session import Deps, OutputMode, Session, begin

app = typer.Typer(
    name="jobrunner",
    help="Submit and manage jobs of the Distributed Job Runner, follow its topics, import jobs in bulk.\n\n"
         "Finds the API in --url/--token, else JOBRUNNER_API_URL/JOBRUNNER_TOKEN, else .local/env "
         "(written by `make run`). With --sigv4 it signs requests for an AWS deployment instead.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


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
    begin(Session(deps, url, token, sigv4, region, env_file, output, http_timeout))


app.command()(submit.submit)
app.command("list")(jobs.list_jobs)
app.command("bulk")(jobs.bulk_change)
app.command()(jobs.show)
app.command()(jobs.cancel)
app.command()(jobs.pause)
app.command()(jobs.resume)
app.command()(jobs.run)
app.command()(jobs.changes)
app.add_typer(calendars.app, name="calendars")
app.command()(jobs.fires)
app.command()(jobs.backfill)
app.command()(jobs.executions)
app.command()(jobs.segments)
app.add_typer(secrets.app, name="secrets")
app.command()(tail.tail)
app.command("import")(bulk_import.import_jobs)

def main() -> None:
    app(prog_name="jobrunner")
