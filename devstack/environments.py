"""Warm function environments in processes of their own: the local stack's stand-in for Lambda's concurrency.

In AWS every concurrent scan and every concurrent API request runs in an execution environment of its own,
with a CPU of its own. In one local process they all share one interpreter lock, so the whole stack drains
and answers about as fast as one core allows, whatever the machine has. ``Environments`` starts ``count``
processes, kept warm as Lambda keeps its environments, each with a container of its own on the stack's
settings. Each environment
- serves the API on the stack's port, beside the stack's own server (``SO_REUSEPORT``: the kernel spreads
  the connections between the listening processes), one request at a time, as one Lambda environment does;
- runs the scans the stack sends it (``invoke_scan``), several at a time on threads, as the stack's own
  thread-pool invoker does;
- sends back the scans its writers ask for (a write into a partition whose scan has ended wakes it,
  ``services.wake``), which the stack dispatches like its own.

A partition's scans always go to the same environment (by segment), so its lease is contended by threads
of one process, as when the stack runs alone.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import signal
import threading
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from jobrunner.ports import Invoker, ScanRequest

if TYPE_CHECKING:
    from multiprocessing.context import SpawnProcess
    from multiprocessing.queues import Queue

    from jobrunner.config import Settings

log = logging.getLogger(__name__)

#: What goes down an environment's inbox: a scan to run as (segment, minute in ISO 8601), or None: stop.
_Scan = tuple[int, str]


class _Forward(Invoker):
    """An environment's invoker: the scans it wants started go back to the stack, which dispatches them."""

    def __init__(self, outbox: Queue[_Scan]) -> None:
        self._outbox = outbox

    def invoke_scan(self, request: ScanRequest) -> None:
        self._outbox.put((request.segment, request.bucket.isoformat()))


def _environment(settings: Settings, host: str, port: int, inbox: Queue[_Scan | None], outbox: Queue[_Scan]) -> None:
    """The body of one environment process (spawned: nothing is inherited but its arguments)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in `make run` stops the stack, which stops this
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    from devstack import console, tokens

    metrics_file = os.environ.get(console.METRICS_FILE_ENV)
    if metrics_file:  # `make run`: metrics to its file, log records as plain lines (devstack.console)
        console.route_output(Path(metrics_file))
    else:
        os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "1")
    from devstack.gateway import serve
    from devstack.lambda_context import LocalContext
    from devstack.metrics import per_thread
    from devstack.stopping import StoppableClock, Stopping
    from devstack.tracing import configure_tracing
    from functions.api.handler import handler as api_handler
    from functions.scan.handler import handler as scan_handler
    from jobrunner import telemetry, wiring
    from jobrunner.adapters.invokers.threads import ThreadInvoker
    from jobrunner.observability import metrics

    configure_tracing(settings)
    per_thread(metrics)  # scans and API requests run in threads of this process: each its own metrics
    stop = threading.Event()
    container = wiring.Container(settings, invoker=_Forward(outbox), clock=StoppableClock(stop))
    wiring.install(container)
    server = serve(api_handler, tokens.load, host, port, reuse_port=True) if port else None
    scans = ThreadInvoker(lambda event, _: scan_handler(event, LocalContext("jobrunner-scan")), quiet=(Stopping,))
    try:
        while (item := inbox.get()) is not None:
            segment, minute = item
            scans.invoke_scan(ScanRequest(segment, datetime.fromisoformat(minute)))
    finally:
        stop.set()
        if server is not None:
            server.shutdown()
        scans.shutdown(wait=True)
        container.publisher.close()
        telemetry.shutdown()


class Environments(Invoker):
    """``count`` warm environment processes; an ``Invoker`` that runs each scan in one of them. Scans asked
    for before ``start`` wait in their environment's inbox."""

    def __init__(self, settings: Settings, count: int, *, host: str = "127.0.0.1") -> None:
        if count < 1:
            raise ValueError("count must be at least 1")
        self._settings = settings
        self._host = host
        self._context = multiprocessing.get_context("spawn")
        self._outbox: Queue[_Scan] = self._context.Queue()
        self._inboxes: list[Queue[_Scan | None]] = [self._context.Queue() for _ in range(count)]
        self._processes: list[SpawnProcess] = []
        self._stopping = threading.Event()
        self._relay = threading.Thread(target=self._relay_wakes, name="environments", daemon=True)

    def start(self, api_port: int = 0) -> Environments:
        """Start the processes. ``api_port``: the API's port, which the stack's own server has bound with
        ``SO_REUSEPORT`` (0: the environments serve no API, scans only)."""
        for n, inbox in enumerate(self._inboxes):
            process = self._context.Process(
                target=_environment, args=(self._settings, self._host, api_port, inbox, self._outbox),
                name=f"environment-{n}", daemon=True)
            process.start()
            self._processes.append(process)
        self._relay.start()
        return self

    def invoke_scan(self, request: ScanRequest) -> None:
        self._inboxes[request.segment % len(self._inboxes)].put((request.segment, request.bucket.isoformat()))

    def _relay_wakes(self) -> None:
        while not self._stopping.is_set():
            try:
                segment, minute = self._outbox.get(timeout=0.5)
            except queue.Empty:
                continue
            self.invoke_scan(ScanRequest(segment, datetime.fromisoformat(minute)))

    @property
    def pids(self) -> list[int | None]:
        return [process.pid for process in self._processes]

    def alive(self) -> int:
        return sum(process.is_alive() for process in self._processes)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop every environment: running scans stop at their next wait, as a Lambda cut off would."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        for inbox in self._inboxes:
            inbox.put(None)
        for process in self._processes:
            process.join(timeout_s)
            if process.is_alive():
                process.kill()
                process.join()
        if self._relay.is_alive():
            self._relay.join()
        for inbox in self._inboxes:
            inbox.close()
        self._outbox.close()


def default_count() -> int:
    """Environments for ``make run``: one per core."""
    return os.cpu_count() or 1
