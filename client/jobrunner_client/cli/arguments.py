"""What the commands' arguments share: the ``--output`` option, a job id, relative instants and JSON arguments.

Typer reads the parameter annotations at run time, so this module (like every command module) does not use
``from __future__ import annotations``: every type in a signature must be importable as it stands.
"""

import json
import re
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from jobrunner_client.cli.session import OutputMode

OutputOption = Annotated[OutputMode | None, typer.Option("--output", "-o", help="table (default) or json",
                                                         show_default=False)]
JobIdArgument = Annotated[str, typer.Argument(help="the job's id", metavar="JOB_ID")]

_RELATIVE = re.compile(r"^([+-])(\d+)\s*(s|m|h|d)$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def instant(value: str, now: datetime) -> str:
    """An RFC 3339 instant as given, or ``now`` / ``+30s`` / ``+5m`` / ``-2h`` / ``+1d`` made absolute."""
    if value == "now":
        return now.strftime("%Y-%m-%dT%H:%M:%SZ")
    match = _RELATIVE.match(value.strip())
    if match:
        sign = -1 if match.group(1) == "-" else 1
        moved = now + sign * timedelta(**{_UNITS[match.group(3)]: int(match.group(2))})
        return moved.strftime("%Y-%m-%dT%H:%M:%SZ")
    return value


def json_argument(value: str, name: str) -> Any:
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


def json_body(value: str | None, name: str = "--json") -> dict[str, Any]:
    """A whole request body given as a JSON argument (``json_argument``), which must be an object; {} if none."""
    if not value:
        return {}
    body = json_argument(value, name)
    if not isinstance(body, dict):
        raise typer.BadParameter("must be a JSON object", param_hint=name)
    return body
