"""Ceilings, measured in the same run as the figures they bound (see ``bench.raw``).

Every raw operation runs in all worker processes at once, started at one agreed instant; a ceiling
is the operations of all processes over the time until the last one finished.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.context import CpuSampler
from bench.stats import median, percentile
from bench.worker_pool import split

if TYPE_CHECKING:
    from bench.context import Bench

#: What one execution of the drain uses of each raw operation: the job read, the single-row writes
#: (``start``'s history row, and ``complete``'s next row for the recurring half: no batch, no delete of
#: the done row) and the message.
USES_PER_EXECUTION = {"reads": 1, "writes": 1.5, "produce": 1}


def implied_ceiling(run: dict[str, Any]) -> tuple[float, str]:
    """Executions/s if each operation could run at its own raw rate beside the others, and the one that binds."""
    bound = min(USES_PER_EXECUTION, key=lambda k: float(run[k]["rate"]) / USES_PER_EXECUTION[k])
    return float(run[bound]["rate"]) / USES_PER_EXECUTION[bound], bound


def _keys(bench: Bench) -> list[tuple[str, str]]:
    """Job rows to read and update: seeded once (as many as a raw run uses), never scanned."""
    wanted = max(bench.options.ceiling_ops, bench.options.combined_executions)
    if len(bench.keys) < wanted:
        bench.seed(bench.next_bucket(), wanted, bench.options.drain_segments, want_keys=True)
    return bench.keys


def _raw(bench: Bench, kind: str, total: int, streams_total: int = 1) -> dict[str, Any]:
    o = bench.options
    processes = len(bench.pool)
    keys = _keys(bench)
    stream_groups = split(list(range(streams_total)), processes)
    jobs = []
    for index, share in enumerate(split(list(range(total)), processes)):
        if not share:
            continue
        key_slice = keys[index::processes][: max(len(share), 1)]
        jobs.append((index, "raw", {"kind": kind, "keys": key_slice, "count": len(share), "topic": bench.names.topic,
                                    "concurrency": o.raw_concurrency, "streams": max(len(stream_groups[index]), 1)}))
    with CpuSampler(bench.pids()) as sampler:
        start_at, outs = bench.pool.synchronized(jobs, timeout=3600)
    ends = [out.get("ended", out["started"] + out["seconds"]) for out in outs]
    seconds = max(ends) - start_at
    ops = sum(out["ops"] for out in outs)
    return {"ops": ops, "seconds": seconds, "rate": ops / seconds, "cpu": sampler.window(start_at, max(ends)),
            "retried": sum(out.get("retried", 0) for out in outs)}


def shared_ceiling(run: dict[str, Any]) -> float:
    """Executions/s if an execution's operations share one machine: their costs add up
    (1 / sum of uses / rate), the bound when Cassandra, Kafka and the scans share the same cores."""
    return 1 / sum(uses / float(run[kind]["rate"]) for kind, uses in USES_PER_EXECUTION.items())


def run_ceilings_once(bench: Bench) -> dict[str, Any]:
    o = bench.options
    run: dict[str, Any] = {
        "writes": _raw(bench, "writes", o.ceiling_ops),
        "reads": _raw(bench, "reads", o.ceiling_ops),
        "batches": _raw(bench, "batches", o.ceiling_ops // 2),
        "create_batches": _raw(bench, "create_batches", o.ceiling_ops // 2),
        "produce": _raw(bench, "produce", o.ceiling_produce),
        "combined": _raw(bench, "combined", o.combined_executions, streams_total=o.drain_segments),
    }
    run["implied"], run["implied_by"] = implied_ceiling(run)
    floor = bench.pool.call(0, "latency_floor", keys=_keys(bench)[: o.floor_samples],
                            topic=bench.names.topic).result(timeout=3600)
    run["floor"] = {"to_ack_ms": median(floor["to_ack_ms"]), "to_ack_p95_ms": percentile(floor["to_ack_ms"], 95),
                    "total_ms": median(floor["total_ms"]), "samples": len(floor["to_ack_ms"])}
    return run


def print_ceilings(index: int, run: dict[str, Any]) -> None:
    print(f"  ceilings run {index + 1}: " + ", ".join(
        f"{k} {run[k]['rate']:.0f}/s" for k in ("writes", "reads", "batches", "produce", "combined")), flush=True)


def run_ceilings(bench: Bench) -> None:
    """The ceilings on their own; with the drain selected too, the drain section runs them, one before
    each of its runs (``bench.drain.run_drain``)."""
    if "drain" in bench.options.sections:
        print("  (measured with the drain: one ceilings run before each drain run)", flush=True)
        return
    runs = []
    for index in range(bench.options.runs):
        run = run_ceilings_once(bench)
        runs.append(run)
        print_ceilings(index, run)
    bench.results["ceilings"] = runs
