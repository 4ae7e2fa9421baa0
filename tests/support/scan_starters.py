"""Invokers under the contract test (``tests/contract/test_invoker.py``), each with a way to see the scans it
started: the memory invoker's record, the local stack's thread pool running a scan that is held until the test
lets it end, and the fault suite's processes running the real scan function (read from their output)."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from jobrunner.adapters.invokers.memory import RecordingInvoker
from jobrunner.adapters.invokers.threads import ThreadInvoker
from jobrunner.ports import ScanRequest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from jobrunner.config import Settings
    from jobrunner.ports import Invoker


@dataclass
class Starter:
    """An invoker under test and the scans it started."""

    invoker: Invoker
    #: The scans started so far, as the requests their events name, once at least ``count`` have (or a bound
    #: has passed).
    started: Callable[[int], list[ScanRequest]]


def request_of(event: dict[str, Any]) -> ScanRequest:
    """The request a scan event names, as the scan function reads it (segment, RFC 3339 minute)."""
    return ScanRequest(int(event["segment"]), datetime.fromisoformat(str(event["minute"])))


def waiting(seen: Callable[[], list[ScanRequest]], bound_s: float) -> Callable[[int], list[ScanRequest]]:
    def started(count: int) -> list[ScanRequest]:
        deadline = time.monotonic() + bound_s
        while len(found := seen()) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return found

    return started


def memory_starter() -> Starter:
    invoker = RecordingInvoker()
    return Starter(invoker, lambda count: list(invoker.requests))


def thread_starter() -> Iterator[Starter]:
    """The local stack's invoker, running a scan that records its event and then waits until the test ends."""
    lock, gate, seen = threading.Lock(), threading.Event(), []

    def scan(event: dict[str, Any], _context: Any) -> None:
        with lock:
            seen.append(request_of(event))
        gate.wait(30)

    def found() -> list[ScanRequest]:
        with lock:
            return list(seen)

    invoker = ThreadInvoker(scan)
    try:
        yield Starter(invoker, waiting(found, bound_s=10))
    finally:
        gate.set()
        invoker.shutdown(wait=True)


def process_starter(settings: Settings, log_path: Path) -> Iterator[Starter]:
    """The fault suite's invoker: a process per request runs the real scan function on ``settings`` (whose
    keyspace and heartbeat table exist); each prints its result, which names the partition it scanned."""
    from devstack.process_invoker import ProcessInvoker

    invoker = ProcessInvoker({**os.environ, **settings.to_environment()}, log_path)

    def found() -> list[ScanRequest]:
        if not log_path.exists():
            return []
        results = []
        for line in log_path.read_text().splitlines():
            try:
                result = json.loads(line)
            except ValueError:
                continue
            if isinstance(result, dict) and "acquired" in result and "level" not in result:
                results.append(request_of(result))
        return results

    try:
        yield Starter(invoker, waiting(found, bound_s=120))  # a process takes seconds to start on a busy machine
    finally:
        invoker.stop_all()
