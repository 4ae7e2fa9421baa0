"""Drain: a whole minute's executions due at its first instant, published as fast as the scans can.

The scans are the real ``ScanService`` with the real Cassandra, Kafka and DynamoDB (moto) adapters,
one thread per segment, the segments spread over the worker processes. Their clock is a
``SkipClock`` that starts at the bucket's first instant, so nothing waits for the wall clock. The
drain time is from that instant until the last ``publish`` returned (every message acknowledged
by Kafka with acks=all).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from bench.ceilings import print_ceilings, run_ceilings_once
from bench.context import CpuSampler
from bench.worker_pool import split
from jobrunner.domain.time import to_epoch_ms

if TYPE_CHECKING:
    from bench.context import Bench

#: Phases of a scan, in the order it runs them, as (label, Timed name).
PHASES = (
    ("read its partition", "store.lane_rows.next"),
    ("get_jobs (job reads)", "store.get_jobs"),
    ("write_started (history + run fields)", "store.write_started"),
    ("publish (Kafka, acks=all)", "publisher.publish"),
    ("settle_published (next row, delete)", "store.settle_published"),
)


def drain_once(bench: Bench, executions: int, segments: int, processes: int | None = None,
               variant: str = "baseline", on_start: Any = None) -> dict[str, Any]:
    processes = min(processes or bench.options.processes, segments)
    bucket = bench.next_bucket()
    seeded = bench.seed(bucket, executions, segments, want_keys=not bench.keys)
    groups = split(list(range(segments)), processes)
    bench.pool.all("warm", [{"slots": [(s, 0) for s in group], "variant": variant} for group in groups])
    jobs = [(i, "scan", {"segments": group, "bucket_ms": to_epoch_ms(bucket), "segment_count": segments,
                         "variant": variant}) for i, group in enumerate(groups)]
    pids = bench.pids()
    with CpuSampler(pids) as sampler:
        if on_start is not None:
            on_start()
        start_at, outs = bench.pool.synchronized(jobs, timeout=3600)
    per_segment = [s for out in outs for s in out["segments"]]
    published = sum(s["published"] for s in per_segment)
    ends = [s["drain_s"] for s in per_segment if s["drain_s"] is not None]
    drain_s = max(ends) if ends else float("nan")
    result = {
        "variant": variant,
        "executions": executions, "segments": segments, "processes": processes, "seeded": seeded["count"],
        "recurring": seeded["recurring"], "published": published,
        "dropped": sum(s["dropped"] for s in per_segment), "errors": sum(s["errors"] for s in per_segment),
        "finished": sum(1 for s in per_segment if s["finished"]),
        "crashed": [s["crashed"] for s in per_segment if s.get("crashed")],
        "drain_s": drain_s, "rate": published / drain_s if drain_s else float("nan"),
        "segment_rates": [s["published"] / s["drain_s"] for s in per_segment if s["drain_s"]],
        "scan_s": max(s["scan_s"] for s in per_segment),
        "cpu": sampler.window(start_at, start_at + drain_s),
        "process_cpu_s": sum(out["process_cpu_s"] for out in outs),
        "writes": _writes(per_segment, published),
        "phases": _phases(per_segment),
    }
    return result


def _writes(per_segment: list[dict[str, Any]], published: int) -> dict[str, Any]:
    """What the scans sent, per execution (statements inside batches counted one by one)."""
    statements: Counter[str] = Counter()
    dynamodb: Counter[str] = Counter()
    requests = batches = logged = batch_statements = batch_bytes = 0
    for s in per_segment:
        statements.update(s["cassandra"]["statements"])
        dynamodb.update(s["dynamodb_calls"])
        requests += s["cassandra"]["requests"]
        batches += s["cassandra"]["batches"]
        logged += s["cassandra"].get("logged_batches", 0)
        batch_statements += s["cassandra"]["batch_statements"]
        batch_bytes += s["cassandra"]["batch_value_bytes"]
    n = max(published, 1)
    scans = max(len(per_segment), 1)
    return {
        "per_execution": {kind: count / n for kind, count in sorted(statements.items())},
        "requests_per_execution": requests / n,
        "batches_per_execution": batches / n,
        "logged_batches_per_execution": logged / n,
        "batch_statements_per_execution": batch_statements / n,
        "batch_bytes_per_execution": batch_bytes / n,
        "dynamodb_per_scan": {op: count / scans for op, count in sorted(dynamodb.items())},
        "late_polls_per_scan": statements.get("SELECT task_schedule_v2", 0) / scans,
    }


def _phases(per_segment: list[dict[str, Any]]) -> dict[str, float]:
    """Share of the scans' time until their last ack spent in each port call (wall time, summed over
    segments); the rest is the scan's own Python code and waiting for the GIL."""
    total = sum(s["drain_s"] or 0.0 for s in per_segment)
    if not total:
        return {}
    shares: dict[str, float] = {}
    for label, name in PHASES:
        shares[label] = sum(s["phases_at_last_ack"].get(name, 0.0) for s in per_segment) / total
    shares["heartbeats (DynamoDB, moto)"] = sum(
        seconds for s in per_segment for n, seconds in s["phases_at_last_ack"].items() if n.startswith("heartbeats.")
    ) / total
    shares["outside port calls (scan logic, GIL waits)"] = 1 - sum(shares.values())
    return shares


def run_drain(bench: Bench) -> None:
    """The drain runs; when the ceilings are measured too, each drain run follows its own ceilings run,
    so that a figure and its ceiling see the same conditions on the shared machine."""
    o = bench.options
    with_ceilings = "ceilings" in o.sections
    warm_up = min(o.drain_executions, 5_000)  # a restarted Cassandra's JIT; not reported
    drain_once(bench, warm_up, o.drain_segments)
    runs = []
    for index in range(o.runs):
        if with_ceilings:
            ceilings = run_ceilings_once(bench)
            bench.results.setdefault("ceilings", []).append(ceilings)
            print_ceilings(index, ceilings)
        result = drain_once(bench, o.drain_executions, o.drain_segments)
        print(f"  drain run {index + 1}/{o.runs}: {result['published']} in {result['drain_s']:.1f} s"
              f" = {result['rate']:.0f}/s", flush=True)
        runs.append(result)
    bench.results["drain"] = runs


def run_scaling(bench: Bench) -> None:
    o = bench.options
    points: dict[int, list[dict[str, Any]]] = {}
    for segments in o.scaling_segments:
        points[segments] = []
        for _ in range(o.runs):
            result = drain_once(bench, o.scaling_executions, segments)
            points[segments].append(result)
        rates = [r["rate"] for r in points[segments]]
        print(f"  scaling {segments} segment(s): {', '.join(f'{r:.0f}' for r in rates)} /s", flush=True)
    bench.results["scaling"] = points


def run_variants(bench: Bench) -> None:
    """Each what-if variant next to the baseline, round-robin within each repetition (fair to noise)."""
    o = bench.options
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in o.variants}
    for index in range(o.runs):
        for name in o.variants:
            results[name].append(drain_once(bench, o.variant_executions, o.drain_segments, variant=name))
        print(f"  variants run {index + 1}: " + ", ".join(
            f"{name} {runs[-1]['rate']:.0f}/s" for name, runs in results.items()), flush=True)
    bench.results["variants"] = results
