"""Sending requests from client threads: ``drive`` runs them and times each, ``one_event_at_a_time`` hands
them to an API handler in this process as one Lambda execution environment would (the submit section's
in-process and HTTP modes, in a worker process or in the parent)."""

from __future__ import annotations

import itertools
import threading
import time
from typing import TYPE_CHECKING, Any

from devstack.gateway import to_event
from devstack.lambda_context import LocalContext

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager


def drive(count: int, threads: int, session: Callable[[], AbstractContextManager[Callable[[int], int]]]
          ) -> dict[str, Any]:
    """Send requests 0..count-1 from ``threads`` threads, each taking the next index. Every thread opens
    ``session()`` once (a connection, or nothing in-process) and calls what it yields per request,
    which returns the HTTP status; returns the wall time, each request's status and latency."""
    statuses = [0] * count
    latencies = [0.0] * count
    counter = itertools.count()

    def client() -> None:
        with session() as send:
            while (i := next(counter)) < count:
                started = time.perf_counter()
                statuses[i] = send(i)
                latencies[i] = (time.perf_counter() - started) * 1000

    started = time.monotonic()
    pool = [threading.Thread(target=client) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return {"seconds": time.monotonic() - started, "statuses": statuses, "latency_ms": latencies}


def one_event_at_a_time(handler: Callable[[dict[str, Any], Any], dict[str, Any]], path: str, bodies: list[str],
                        tenant: str) -> Callable[[int], int]:
    """``send(i)``: POST ``bodies[i]`` to ``path`` through ``handler`` and return the status, the calls of any
    number of threads taken one at a time, as one Lambda execution environment takes its events (the
    Powertools resolver keeps a request's state on the app object; ``devstack.gateway`` does the same)."""
    lock = threading.Lock()
    headers = {"content-type": "application/json"}

    def send(i: int) -> int:
        event = to_event("POST", path, headers, bodies[i].encode(), tenant)
        with lock:
            return int(handler(event, LocalContext("jobrunner-api"))["statusCode"])

    return send
