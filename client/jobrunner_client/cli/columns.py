"""The rows ``jobrunner tail`` prints: fixed-width columns, so that rows printed one at a time line up."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from rich.text import Text

from jobrunner_client.cli import render

if TYPE_CHECKING:
    from jobrunner_client.cli.tail import TailRecord

#: (header, width, right-aligned): fixed widths so that rows printed one by one line up.
COLUMNS = (("TIME", 24, False), ("JOB", 36, False), ("EXECUTION", 9, False), ("ATTEMPT", 7, True),
           ("STATUS", 9, False), ("SCHEDULED", 24, False))


def _cell(text: str, width: int, right: bool) -> str:
    text = text if len(text) <= width else text[: width - 1] + "…"
    return text.rjust(width) if right else text.ljust(width)


def header() -> Text:
    return Text("  ".join(_cell(name, width, right) for name, width, right in COLUMNS) + "  DETAIL",
                style="bold")


def row(record: TailRecord) -> Text:
    value = record.value if isinstance(record.value, dict) else {}
    stamp = datetime.fromtimestamp(record.timestamp_ms / 1000, UTC).isoformat(timespec="milliseconds")
    state = str(value.get("status") or value.get("trigger") or "-")
    execution = str(value.get("execution_id") or "-")
    cells = [render.fmt_time(stamp), str(value.get("job_id") or record.key or "-"),
             execution[:8] + "…" if len(execution) > 9 else execution, str(value.get("attempt", "")), state,
             render.fmt_time(value.get("scheduled_at")) if value.get("scheduled_at") else ""]
    line = Text()
    for (name, width, right), cell in zip(COLUMNS, cells, strict=True):
        line.append(_cell(cell, width, right), style=render.STATUS_STYLES.get(cell, "") if name == "STATUS" else "")
        line.append("  ")
    if value:
        detail = str(value.get("error") or (render.compact(value["payload"]) if "payload" in value else ""))
    else:
        detail = render.compact(record.value)
    line.append(detail, style="red" if value.get("error") else "")
    return line
