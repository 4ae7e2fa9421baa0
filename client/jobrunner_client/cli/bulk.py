"""``jobrunner import``: many jobs from a JSONL or CSV file, resumable and never duplicated.

- Each record gets ``idempotency_key = import-<hash(file, line number, line text)>`` unless it names its own,
  so submitting a line twice gives the same job (the API answers 200 with it) instead of a second one.
- A state file next to the input (``<input>.import-state.json``) remembers the lines done and their jobs;
  a re-run skips them, and only sends the lines that failed or were never reached. It is saved every
  ``SAVE_EVERY`` lines and when the run stops for any reason; should it be lost, the keys still prevent
  duplicates. A line whose text changed since it was done is a different job and is submitted again.

JSONL: one POST /jobs body per line. CSV: a header row naming columns from ``CSV_COLUMNS``; ``payload``
is JSON text; empty cells are left out. Blank lines and lines starting with ``#`` are skipped. A CSV line's
target is one of ``target_url`` (an https URL, signed POSTs), ``target_lambda`` (a function ARN),
``target_sqs`` (a queue URL, with ``target_group_id`` for a FIFO queue), or ``target`` (the API's JSON, for
an https target's method, headers or timeout); the API checks it like any other field.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

SAVE_EVERY = 50
STATE_SUFFIX = ".import-state.json"
_SCHEDULE = ("at", "every", "start", "end", "cron", "timezone", "iso8601")
_BACKOFF = ("initial_delay_s", "multiplier", "max_delay_s")
_INTEGERS = ("max_retries", "timeout_s", "jitter_s")
_TARGETS = ("target", "target_url", "target_lambda", "target_sqs")
CSV_COLUMNS = (*_SCHEDULE, "payload", "topic", *_TARGETS, "target_group_id", *_INTEGERS, *_BACKOFF,
               "idempotency_key")


class BadLine(ValueError):
    """A record that cannot become a request body (reported for its line; the rest go on)."""


class BadFile(ValueError):
    """The file as a whole cannot be read (a usage error)."""


@dataclass(frozen=True)
class Record:
    line: int  # 1-based, where the record starts in the file
    text: str
    body: dict[str, Any] | None  # None when the record could not be read
    problem: str | None = None


def detect_format(path: Path, given: str | None) -> str:
    if given:
        return given
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    raise BadFile(f"cannot tell the format of {path.name}: use --format jsonl or --format csv")


def records(path: Path, fmt: str) -> Iterator[Record]:
    text = path.read_text(encoding="utf-8-sig")
    yield from (_jsonl(text) if fmt == "jsonl" else _csv(text))


def _skippable(text: str) -> bool:
    stripped = text.strip()
    return not stripped or stripped.startswith("#")


def _jsonl(text: str) -> Iterator[Record]:
    for number, line in enumerate(text.splitlines(), start=1):
        if _skippable(line):
            continue
        try:
            body = json.loads(line)
        except ValueError as exc:
            yield Record(number, line, None, f"not valid JSON: {exc}")
            continue
        if not isinstance(body, dict):
            yield Record(number, line, None, "each line must be a JSON object (a POST /jobs body)")
            continue
        yield Record(number, line, body)


def _csv(text: str) -> Iterator[Record]:
    lines = text.splitlines(keepends=True)
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise BadFile(f"line {start}: {exc}") from exc
        raw = "".join(lines[start - 1: reader.line_num]).rstrip("\r\n")
        if not row or all(not cell.strip() for cell in row) or row[0].lstrip().startswith("#"):
            continue
        if header is None:
            header = [h.strip() for h in row]
            unknown = [h for h in header if h not in CSV_COLUMNS]
            if unknown:
                raise BadFile(f"unknown CSV column {unknown[0]!r}; the columns are: {', '.join(CSV_COLUMNS)}")
            continue
        if len(row) > len(header):
            yield Record(start, raw, None, f"{len(row)} cells but {len(header)} columns")
            continue
        try:
            yield Record(start, raw, _body_of(dict(zip(header, row, strict=False))))
        except BadLine as exc:
            yield Record(start, raw, None, str(exc))


def _body_of(cells: dict[str, str]) -> dict[str, Any]:
    values = {k: v.strip() for k, v in cells.items() if v.strip()}
    body: dict[str, Any] = {"schedule": {k: values[k] for k in _SCHEDULE if k in values}}
    if "payload" in values:
        try:
            body["payload"] = json.loads(values["payload"])
        except ValueError as exc:
            raise BadLine(f"payload is not valid JSON: {exc}") from None
    if "topic" in values:
        body["topic"] = values["topic"]
    target = _target_of(values)
    if target is not None:
        body["target"] = target
    for name in _INTEGERS:
        if name in values:
            try:
                body[name] = int(values[name])
            except ValueError:
                raise BadLine(f"{name} must be a whole number, not {values[name]!r}") from None
    backoff = _backoff_of(values)
    if backoff:
        body["backoff"] = backoff
    if "idempotency_key" in values:
        body["idempotency_key"] = values["idempotency_key"]
    return body


def _backoff_of(values: dict[str, str]) -> dict[str, float]:
    backoff: dict[str, float] = {}
    for name in _BACKOFF:
        if name in values:
            try:
                backoff[name] = float(values[name])
            except ValueError:
                raise BadLine(f"{name} must be a number, not {values[name]!r}") from None
    return backoff


def _target_of(values: dict[str, str]) -> dict[str, Any] | None:
    """The ``target`` a line's cells give, or None; cells that do not go together are the line's problem."""
    named = [name for name in _TARGETS if name in values]
    if len(named) > 1:
        raise BadLine(f"give one target, not {' and '.join(named)}")
    if "target_group_id" in values and named != ["target_sqs"]:
        raise BadLine("target_group_id goes with target_sqs")
    if not named:
        return None
    value = values[named[0]]
    if named[0] == "target":
        try:
            target = json.loads(value)
        except ValueError as exc:
            raise BadLine(f"target is not valid JSON: {exc}") from None
        if not isinstance(target, dict):
            raise BadLine("target must be a JSON object, e.g. {\"https\": {\"url\": \"https://...\"}}")
        return target
    if named[0] == "target_url":
        return {"https": {"url": value}}
    if named[0] == "target_lambda":
        return {"lambda": {"function_arn": value}}
    sqs = {"queue_url": value}
    if "target_group_id" in values:
        sqs["message_group_id"] = values["target_group_id"]
    return {"sqs": sqs}


def idempotency_key(path: Path, line: int, text: str) -> str:
    digest = hashlib.sha256(f"{path.resolve()}\n{line}\n{text}".encode()).hexdigest()
    return f"import-{digest[:40]}"


def state_path(path: Path) -> Path:
    return path.with_name(path.name + STATE_SUFFIX)


@dataclass
class ImportState:
    """The lines done: line number -> {"key": idempotency key, "job_id": ...}."""

    path: Path
    source: str
    done: dict[int, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path, source: Path) -> ImportState:
        if not path.exists():
            return cls(path, str(source.resolve()))
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            done = {int(k): {"key": str(v["key"]), "job_id": str(v["job_id"])} for k, v in raw["done"].items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BadFile(f"the state file {path} is damaged ({exc}); delete it to start over") from None
        return cls(path, str(source.resolve()), done)

    def is_done(self, line: int, key: str) -> bool:
        return self.done.get(line, {}).get("key") == key

    def mark(self, line: int, key: str, job_id: str) -> None:
        self.done[line] = {"key": key, "job_id": job_id}

    def save(self) -> None:
        body = {"source": self.source, "done": {str(k): v for k, v in sorted(self.done.items())}}
        temporary = self.path.with_name(self.path.name + ".tmp")
        temporary.write_text(json.dumps(body, indent=1), encoding="utf-8")
        os.replace(temporary, self.path)  # atomic: a crash leaves the old state or the new one


@dataclass
class Summary:
    file: str
    state_file: str
    total: int = 0
    created: int = 0
    existing: int = 0  # the API already had the job (an earlier run sent this line)
    skipped: int = 0  # done in an earlier run, not sent again
    failed: list[dict[str, Any]] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    stopped: str | None = None  # why the run stopped before the end, if it did

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file, "state_file": self.state_file, "total": self.total, "created": self.created,
            "existing": self.existing, "skipped": self.skipped, "failed": self.failed, "jobs": self.jobs,
            "stopped": self.stopped,
        }
