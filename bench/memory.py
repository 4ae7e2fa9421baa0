"""Memory: the peak resident set of one scan processing one partition, in a fresh process each time.

A partition of N executions is seeded into segment 0 of a one-segment layout; a new worker process
connects and warms up (its baseline), scans the partition with the SkipClock, and reports its peak
(VmHWM, and ru_maxrss, which is the same number from getrusage). Peak minus baseline is what the
scan itself added; it should not grow with N beyond what the scan must keep per execution.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.worker_pool import WorkerPool
from jobrunner.domain.time import to_epoch_ms

if TYPE_CHECKING:
    from bench.context import Bench


def measure_once(bench: Bench, size: int) -> dict[str, Any]:
    bucket = bench.next_bucket()
    bench.seed(bucket, size, segment_count=1)
    with WorkerPool(bench.settings, 1) as fresh:
        fresh.call(0, "warm", slots=[(0, 0)]).result(timeout=300)
        baseline = fresh.call(0, "memory").result(timeout=60)
        _, outs = fresh.synchronized([(0, "scan", {"segments": [0], "bucket_ms": to_epoch_ms(bucket),
                                                   "segment_count": 1})], timeout=3600)
        after = fresh.call(0, "memory").result(timeout=60)
    scan = outs[0]["segments"][0]
    return {
        "size": size, "published": scan["published"],
        "baseline_hwm_mib": baseline["VmHWM"] / 1024, "peak_hwm_mib": after["VmHWM"] / 1024,
        "ru_maxrss_mib": after["ru_maxrss_kib"] / 1024, "rss_after_mib": after["VmRSS"] / 1024,
        "scan_added_mib": (after["VmHWM"] - baseline["VmRSS"]) / 1024,
    }


def run_memory(bench: Bench) -> None:
    sizes: dict[int, list[dict[str, Any]]] = {}
    for size in bench.options.memory_sizes:
        sizes[size] = [measure_once(bench, size) for _ in range(bench.options.runs)]
        print(f"  memory {size}: " + ", ".join(f"{m['peak_hwm_mib']:.0f} MiB" for m in sizes[size]), flush=True)
    bench.results["memory"] = sizes
