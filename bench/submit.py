"""Submit: jobs accepted per second through the API handler (``jobrunner.api.app.handle``).

- in-process: REST proxy events handed straight to the handler, from 1 thread and from N threads,
  in a worker process (as one Lambda execution environment would run them, minus API Gateway);
- over HTTP: the local API Gateway stand-in (``devstack.gateway.serve``) in a worker process, with N
  client threads in this process on keep-alive connections.
Each accepted job is one logged batch (the job and its first run), so the ceiling is the raw rate
of that batch (``create_batches``).
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import secrets
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from bench.stats import median, percentile

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager

    from bench.context import Bench

TENANT = "bench-submitter"


def bodies(count: int) -> list[str]:
    """Half one-time jobs an hour ahead, half recurring every hour, like the drain's mix."""
    at = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    out = []
    for i in range(count):
        schedule = {"at": at} if i % 2 == 0 else {"every": "PT1H"}
        out.append(json.dumps({"schedule": schedule, "payload": {"bench": True, "n": i, "pad": "x" * 96}}))
    return out


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


def _http(port: int, token: str, payloads: list[str], threads: int) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    @contextlib.contextmanager
    def connection() -> Iterator[Callable[[int], int]]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

        def send(i: int) -> int:
            conn.request("POST", "/jobs", body=payloads[i].encode(), headers=headers)
            response = conn.getresponse()
            response.read()
            return response.status

        try:
            yield send
        finally:
            conn.close()

    return drive(len(payloads), threads, connection)


def _summary(raw: dict[str, Any]) -> dict[str, Any]:
    ok = sum(1 for s in raw["statuses"] if s == 201)
    return {"requests": len(raw["statuses"]), "accepted": ok, "rate": ok / raw["seconds"],
            "statuses": dict(Counter(raw["statuses"])),
            "latency_p50_ms": median(raw["latency_ms"]), "latency_p95_ms": percentile(raw["latency_ms"], 95),
            "other_statuses": sorted({s for s in raw["statuses"] if s != 201})}


def run_submit(bench: Bench) -> None:
    o = bench.options
    modes: dict[str, list[dict[str, Any]]] = {"in-process, 1 thread": [], f"in-process, {o.submit_threads} threads": [],
                                              f"HTTP, {o.submit_threads} client threads": []}
    token = secrets.token_urlsafe(16)
    port = bench.pool.call(1 % len(bench.pool), "serve_api", tenant=TENANT, token=token).result(timeout=120)
    try:
        _http(port, token, bodies(max(2, o.submit_threads)), o.submit_threads)  # warm-up: connect, prepare
        for _ in range(o.runs):
            for mode, threads in ((f"in-process, {o.submit_threads} threads", o.submit_threads),
                                  ("in-process, 1 thread", 1)):
                count = o.submit_requests if threads > 1 else max(o.submit_requests // 4, 2)
                raw = bench.pool.call(0, "submit", bodies=bodies(count), threads=threads,
                                      tenant=TENANT).result(timeout=3600)
                modes[mode].append(_summary(raw))
            raw = _http(port, token, bodies(o.submit_requests), o.submit_threads)
            modes[f"HTTP, {o.submit_threads} client threads"].append(_summary(raw))
            print("  submit: " + ", ".join(f"{m} {runs[-1]['rate']:.0f}/s" for m, runs in modes.items()), flush=True)
    finally:
        bench.pool.call(1 % len(bench.pool), "stop_api").result(timeout=60)
    bench.results["submit"] = modes
