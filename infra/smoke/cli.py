"""``python -m infra.smoke``: the smoke test as a command (``make smoke STAGE=dev``, or ``make smoke URL=...``).

Exit codes: 0 every step passed, 1 a step failed or the API could not be found, 2 usage.

Typer reads the parameter annotations at run time, so this module does not use
``from __future__ import annotations``.
"""

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from infra.smoke.report import Report
from infra.smoke.runner import Clock, SystemClock, run_phases
from infra.smoke.steps import Options, Smoke
from infra.smoke.target import Target, TargetError, stage_target, url_target
from jobrunner_client.cli.client import ApiClient, Transport, UrllibTransport

EXIT_FAILED = 1


@dataclass
class Deps:
    """What the smoke talks to; tests pass fakes as ``main(argv, Deps(...))``."""

    transport: Transport | None = None
    cloudformation: Any = None
    credentials: Any = None
    clock: Clock = field(default_factory=SystemClock)
    console: Console | None = None
    environ: dict[str, str] | None = None
    cwd: Path | None = None
    #: Steps of a phase at once (False: one at a time, for tests on a manual clock).
    concurrent: bool = True


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help="Submit a handful of jobs to a deployed stage (or any API), follow each through its history and "
                  "ledger, print each step with its time, clean up; exit 1 if any step failed.")
def smoke(
    ctx: typer.Context,
    stage: Annotated[str | None, typer.Option(help="the stage whose stack JobRunner-<stage> to test",
                                              show_default=False)] = None,
    url: Annotated[str | None, typer.Option(help="the API's base URL instead of a stage (the local stack: "
                                                 "http://127.0.0.1:8080) [env: JOBRUNNER_API_URL]",
                                            show_default=False)] = None,
    token: Annotated[str | None, typer.Option(help="bearer token (with --url; with --stage: a Cognito IdToken "
                                                   "instead of SigV4) [env: JOBRUNNER_TOKEN]",
                                              show_default=False)] = None,
    sigv4: Annotated[bool, typer.Option("--sigv4", help="with --url: sign with SigV4 instead of a token")] = False,
    region: Annotated[str | None, typer.Option(help="the stack's region [default: the stage's in cdk.json, else "
                                                    "the credentials']", show_default=False)] = None,
    lead: Annotated[float, typer.Option(help="seconds ahead the jobs are due", min=2, max=240)] = 10.0,
    patience: Annotated[float, typer.Option(help="seconds a job may show no progress before its step fails",
                                            min=1)] = 30.0,
    http_timeout: Annotated[float, typer.Option(help="seconds to wait for each API answer", min=1)] = 30.0,
) -> None:
    deps = ctx.obj if isinstance(ctx.obj, Deps) else Deps()
    console = deps.console or Console(highlight=False)
    if (stage is None) == (url is None):
        raise typer.BadParameter("give exactly one of --stage and --url", param_hint="--stage / --url")
    try:
        target = find_target(deps, stage=stage, url=url, token=token, sigv4=sigv4, region=region)
    except TargetError as exc:
        console.print(f"[bold red]smoke test: cannot find the API:[/] {exc}")
        raise typer.Exit(EXIT_FAILED) from None
    client = ApiClient(target.url, target.auth, deps.transport or UrllibTransport(http_timeout))
    run = Smoke(client, deps.clock, Options(lead_s=lead, patience_s=patience))
    report = Report(console)
    report.begin(target.where, run.tag)
    began = deps.clock.monotonic()
    results = run_phases(run.phases(), deps.clock, report.step, concurrent=deps.concurrent)
    report.summary(results, deps.clock.monotonic() - began)
    if not all(r.ok for r in results):
        raise typer.Exit(EXIT_FAILED)


def find_target(deps: Deps, *, stage: str | None, url: str | None, token: str | None, sigv4: bool,
                region: str | None) -> Target:
    if stage is not None:
        return stage_target(stage, region=region, token=token, cloudformation=deps.cloudformation,
                            credentials=deps.credentials)
    return url_target(url, token=token, sigv4=sigv4, region=region,
                      environ=os.environ if deps.environ is None else deps.environ, cwd=deps.cwd or Path.cwd())


def main(argv: Sequence[str] | None = None, deps: Deps | None = None) -> int:
    """Run the command with ``argv`` (default: the process's) and return its exit code (usage errors print their
    message and give 2, as the command does)."""
    try:
        app(args=list(sys.argv[1:] if argv is None else argv), prog_name="python -m infra.smoke", obj=deps)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_FAILED)
    return 0
