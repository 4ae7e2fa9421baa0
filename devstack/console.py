"""What ``make run`` prints: words for a person, the metrics in a file.

In AWS the functions print two kinds of JSON lines to CloudWatch Logs: Powertools' structured log records
and its embedded metric format (EMF) records, which CloudWatch turns into metrics. Locally both landed on
the console as raw JSON (a metric line per scan, sixteen a minute at idle). ``route_output`` puts a line
filter on the process's standard output:

- an EMF record (a JSON object with an ``_aws`` key) is appended to the metrics file
  (``.local/logs/metrics.jsonl``: read it, or ``jq`` it, as CloudWatch would), not printed;
- a log record (a JSON object with ``level`` and ``message``) is printed as one plain line:
  ``19:21:04 WARNING scan: lease lost (segment=3)``, its other fields after the message;
- anything else passes through unchanged.

``MinuteSummary`` reads the metrics file the stack's processes share and prints one line per minute in
which something was reported (a scan reports when it ends, so its executions count in that minute):
executions published and their worst lateness, the results by outcome (succeeded, retrying...), the
executions dead-lettered (by the results function for a failure without retries left, by the scans for
a timeout).
"""

from __future__ import annotations

import io
import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from pathlib import Path

#: The log record fields not repeated after the message (the message itself, and Lambda's context).
_QUIET_FIELDS = frozenset({
    "level", "message", "timestamp", "service", "location", "cold_start", "function_name",
    "function_memory_size", "function_arn", "function_request_id", "correlation_id", "xray_trace_id",
})


def plain(record: dict[str, Any]) -> str:
    """A Powertools log record as one line a person reads: time, level, where, message, other fields."""
    stamp = str(record.get("timestamp", ""))
    clock = stamp[11:19] if len(stamp) >= 19 else stamp
    where = str(record.get("function_name") or record.get("service") or "").removeprefix("jobrunner-")
    extra = " ".join(f"{key}={value}" for key, value in record.items() if key not in _QUIET_FIELDS)
    line = f"{clock} {record.get('level', '')} {where}: {record.get('message', '')}".strip()
    return f"{line} ({extra})" if extra else line


class _Router(io.TextIOBase):
    """A text stream that sends whole lines to ``console`` or to ``metrics`` (see the module doc)."""

    def __init__(self, console: TextIO, metrics: Path) -> None:
        self._console = console
        self._metrics = metrics
        #: Each thread's unfinished line: ``print`` writes the text, then the newline, and another thread's
        #: print may come in between (one shared buffer glued two metric records into one line).
        self._pending = threading.local()
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        pending = getattr(self._pending, "text", "") + text
        *lines, self._pending.text = pending.split("\n")
        with self._lock:
            for line in lines:
                self._route(line)
        return len(text)

    def flush(self) -> None:
        self._console.flush()

    # What code that hands standard output on (a subprocess, faulthandler) or asks about it reads.
    def fileno(self) -> int:
        return self._console.fileno()

    def isatty(self) -> bool:
        return self._console.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._console.encoding

    def _route(self, line: str) -> None:
        record = _json_object(line)
        if record is not None and "_aws" in record:
            with self._metrics.open("a", encoding="utf-8") as out:
                out.write(line + "\n")
            return
        if record is not None and "level" in record and "message" in record:
            line = plain(record)
        self._console.write(line + "\n")
        self._console.flush()


def _json_object(line: str) -> dict[str, Any] | None:
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def route_output(metrics: Path) -> None:
    """Filter this process's standard output as the module doc says (the metrics file's folder is created),
    the log handlers already writing to it included (Powertools' logger takes the stream when it is made)."""
    import logging
    import sys
    import warnings

    metrics.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(sys.stdout, _Router):
        return
    # Powertools warns at every invocation that flushes no metric (most API requests): noise on a console.
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    original, router = sys.stdout, _Router(sys.stdout, metrics)
    sys.stdout = router
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for handler in [h for lg in loggers for h in getattr(lg, "handlers", [])]:
        if isinstance(handler, logging.StreamHandler) and handler.stream is original:
            handler.setStream(router)


@dataclass
class Minute:
    """What the metrics of one minute add up to."""

    counts: Counter[str] = field(default_factory=Counter)
    worst_lateness_ms: float = 0.0

    def add(self, record: dict[str, Any]) -> None:
        names = [m["Name"] for d in record["_aws"].get("CloudWatchMetrics", []) for m in d.get("Metrics", [])]
        for name in names:
            values = record.get(name)
            values = values if isinstance(values, list) else [values]
            numbers = [float(v) for v in values if isinstance(v, int | float)]
            if name == "MaxLatenessMs":
                self.worst_lateness_ms = max([self.worst_lateness_ms, *numbers])
            elif name in ("ExecutionsPublished", "DeadLetters") or name.startswith("Results_"):
                self.counts[name] += int(sum(numbers))

    def line(self, minute: datetime) -> str | None:
        """One line for the minute, or None when nothing was published, reported or dead-lettered."""
        c = self.counts
        # (a dead-lettered result is in DeadLetters too, with the scans' timeouts: said once, below)
        results = {k.removeprefix("Results_"): v for k, v in c.items()
                   if k.startswith("Results_") and v and k != "Results_dead_lettered"}
        if not (c["ExecutionsPublished"] or results or c["DeadLetters"]):
            return None
        parts = []
        if c["ExecutionsPublished"]:
            parts.append(f"published {c['ExecutionsPublished']:,} (worst lateness {self.worst_lateness_ms:,.0f} ms)")
        if results:
            parts.append("results: " + ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in sorted(results.items())))
        if c["DeadLetters"]:
            parts.append(f"{c['DeadLetters']:,} dead-lettered")
        return f"{minute:%H:%M}  " + "; ".join(parts)


class MinuteSummary:
    """Reads the records appended to ``metrics`` since the last look and prints, for each minute that has
    ended, ``Minute.line`` (``print_line``: the console). ``start`` runs it every few seconds on a thread."""

    def __init__(self, metrics: Path, print_line: Any = print) -> None:
        self._metrics = metrics
        self._print = print_line
        self._offset = metrics.stat().st_size if metrics.exists() else 0  # what an earlier run left is not news
        self._minutes: dict[datetime, Minute] = {}
        self._stop = threading.Event()

    def poll(self, now: datetime) -> None:
        if self._metrics.exists():
            with self._metrics.open("r", encoding="utf-8") as lines:
                lines.seek(self._offset)
                while (line := lines.readline()).endswith("\n"):
                    self._offset += len(line.encode("utf-8"))
                    record = _json_object(line.strip())
                    if record is not None and "_aws" in record:
                        stamp = datetime.fromtimestamp(record["_aws"].get("Timestamp", 0) / 1000, UTC)
                        self._minutes.setdefault(stamp.replace(second=0, microsecond=0), Minute()).add(record)
        current = now.replace(second=0, microsecond=0)
        for minute in sorted(m for m in self._minutes if m < current):
            summary = self._minutes.pop(minute).line(minute)
            if summary is not None:
                self._print(summary)

    def start(self, every_s: float = 5.0) -> MinuteSummary:
        def loop() -> None:
            while not self._stop.wait(every_s):
                self.poll(datetime.now(UTC))

        threading.Thread(target=loop, name="minute-summary", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()


#: Where the stack's processes append their metrics: set by ``make run`` for the environments it starts.
METRICS_FILE_ENV = "DEVSTACK_METRICS_FILE"


def metrics_path() -> Path:
    """``.local/logs/metrics.jsonl`` (under ``DEVSTACK_HOME`` when it is set)."""
    from devstack import servers

    return servers.LOG_DIR / "metrics.jsonl"

