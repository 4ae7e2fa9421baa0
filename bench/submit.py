"""Submit: jobs accepted per second through the API handler (``jobrunner.api.app.handle``).

- in-process: REST proxy events handed straight to the handler, from 1 thread and from N threads,
  in a worker process, one event at a time as one Lambda execution environment runs them (minus API
  Gateway): N threads only keep the next request ready. (Until 2026-11-26 the N threads called the
  handler at once, which the Powertools resolver's per-request state on the app object does not allow:
  a ``KeyError: '_route'`` now and then, and rates that no environment can reach.)
- over HTTP: the local API Gateway stand-in (``devstack.gateway.serve``) in a worker process, with N
  client threads in this process on keep-alive connections.
Each accepted job is two rows (its first run, then the job; a logged batch of the two until 2026-11-26),
so the ceiling is the raw rate of such a batch (``create_batches``), of the same order on one node.
"""

from __future__ import annotations

import contextlib
import http.client
import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from bench.clients import drive
from bench.stats import median, percentile
from devstack import tokens

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from bench.context import Bench

TENANT = "bench-submitter"
#: Jobs per ``POST /jobs/batch`` request in the batch modes.
BATCH = 100


def bodies(count: int) -> list[str]:
    """Half one-time jobs an hour ahead, half recurring every hour, like the drain's mix."""
    at = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    out = []
    for i in range(count):
        schedule = {"at": at} if i % 2 == 0 else {"every": "PT1H"}
        out.append(json.dumps({"schedule": schedule, "payload": {"bench": True, "n": i, "pad": "x" * 96}}))
    return out


def batches(count: int) -> list[str]:
    """``count`` jobs of ``bodies``' mix, in ``POST /jobs/batch`` bodies of ``BATCH`` jobs each."""
    jobs = [json.loads(body) for body in bodies(count)]
    return [json.dumps({"jobs": jobs[i:i + BATCH]}) for i in range(0, count, BATCH)]


def _http(port: int, token: str, payloads: list[str], threads: int, path: str = "/jobs") -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    @contextlib.contextmanager
    def connection() -> Iterator[Callable[[int], int]]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

        def send(i: int) -> int:
            conn.request("POST", path, body=payloads[i].encode(), headers=headers)
            response = conn.getresponse()
            response.read()
            return response.status

        try:
            yield send
        finally:
            conn.close()

    return drive(len(payloads), threads, connection)


def _summary(raw: dict[str, Any], jobs_per_request: int = 1) -> dict[str, Any]:
    """Jobs accepted per second: a 201 answer created every job its request held (no idempotency keys)."""
    ok = sum(1 for s in raw["statuses"] if s == 201) * jobs_per_request
    return {"requests": len(raw["statuses"]), "jobs_per_request": jobs_per_request, "accepted": ok,
            "rate": ok / raw["seconds"],
            "statuses": dict(Counter(raw["statuses"])),
            "latency_p50_ms": median(raw["latency_ms"]), "latency_p95_ms": percentile(raw["latency_ms"], 95),
            "other_statuses": sorted({s for s in raw["statuses"] if s != 201})}


def run_submit(bench: Bench) -> None:
    o = bench.options
    threads = o.submit_threads
    single, many = f"in-process, {threads} threads", f"in-process, batches of {BATCH}, {threads} threads"
    http_single, http_many = (f"HTTP, {threads} client threads", f"HTTP, batches of {BATCH}, {threads} client threads")
    modes: dict[str, list[dict[str, Any]]] = {"in-process, 1 thread": [], single: [], many: [], http_single: [],
                                              http_many: []}
    token = tokens.token_for(TENANT)
    port = bench.pool.call(1 % len(bench.pool), "serve_api", tenant=TENANT, token=token,
                           environments=o.submit_environments).result(timeout=120)
    try:
        _http(port, token, bodies(max(2, threads)), threads)  # warm-up: connect, prepare
        _http(port, token, batches(BATCH * threads), threads, "/jobs/batch")
        jobs = max(o.submit_requests, BATCH * threads)
        for _ in range(o.runs):
            for mode, count, path, workers in (
                    (single, o.submit_requests, "/jobs", threads),
                    ("in-process, 1 thread", max(o.submit_requests // 4, 2), "/jobs", 1),
                    (many, jobs, "/jobs/batch", threads)):
                payloads = bodies(count) if path == "/jobs" else batches(count)
                raw = bench.pool.call(0, "submit", bodies=payloads, threads=workers, tenant=TENANT,
                                      path=path).result(timeout=3600)
                modes[mode].append(_summary(raw, 1 if path == "/jobs" else BATCH))
            modes[http_single].append(_summary(_http(port, token, bodies(o.submit_requests), threads)))
            modes[http_many].append(_summary(_http(port, token, batches(jobs), threads, "/jobs/batch"), BATCH))
            print("  submit: " + ", ".join(f"{m} {runs[-1]['rate']:.0f}/s" for m, runs in modes.items()), flush=True)
    finally:
        bench.pool.call(1 % len(bench.pool), "stop_api").result(timeout=60)
    bench.results["submit"] = modes
    bench.results["submit_environments"] = o.submit_environments
