"""What every scenario shares: the options, the isolated names and settings, the worker pool, fresh
minute buckets, the job keys seeded so far (for the read ceilings) and the CPU sampler."""

from __future__ import annotations

import itertools
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.machine import CpuMeter, load1, server_pids
from bench.seed import SeedSpec
from bench.worker_pool import split
from jobrunner.domain.time import minute_bucket, to_epoch_ms

if TYPE_CHECKING:
    from bench.stack import BenchNames
    from bench.worker_pool import WorkerPool
    from devstack.servers import Endpoints
    from jobrunner.config import Settings

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("ceilings", "drain", "variants", "scaling", "lateness", "submit", "memory", "writes", "shortperiod",
            "idle", "fullstack", "fairness", "deliveries", "profile")
VARIANT_NAMES = ("baseline", "driver-rows", "single-requests", "prefetch", "groups-2000", "all")


@dataclass
class Options:
    runs: int = 3
    processes: int = field(default_factory=lambda: os.cpu_count() or 2)
    sections: tuple[str, ...] = SECTIONS
    drain_executions: int = 100_000
    drain_segments: int = 16
    scaling_segments: tuple[int, ...] = (1, 2, 4, 8, 16)
    scaling_executions: int = 20_000
    lateness_executions: int = 10_000
    lateness_segments: int = 16
    submit_requests: int = 2_000
    submit_threads: int = 8
    #: Warm environment processes serving the API beside the bench worker's own server (HTTP modes), as
    #: ``make run`` does (``devstack.environments``); 0: one process, one request at a time.
    submit_environments: int = field(default_factory=lambda: os.cpu_count() or 1)
    memory_sizes: tuple[int, ...] = (1_000, 10_000, 50_000)
    ceiling_ops: int = 40_000
    ceiling_produce: int = 100_000
    combined_executions: int = 20_000
    raw_concurrency: int = 128
    floor_samples: int = 200
    profile_executions: int = 30_000
    variants: tuple[str, ...] = VARIANT_NAMES
    variant_executions: int = 10_000
    #: The writes section: executions due in one minute, and the share of them that fails once (retried).
    writes_executions: int = 2_000
    writes_failures: float = 0.1
    #: The short-period section: jobs in one segment, each firing every ``short_periods`` seconds (a workload
    #: for each: 10 s, whose last fire of each minute crosses into the next minute's late lane, and 60 s,
    #: every fire of which does).
    short_jobs: int = 1_000
    short_periods: tuple[int, ...] = (10, 60)
    #: The idle section: segments with no job, and the minutes of ticks counted (after two of warm-up).
    idle_segments: int = 4
    idle_minutes: int = 5
    #: The full-stack section: one-time jobs submitted over HTTP (by as many client threads), all due at one
    #: second, drained by the whole local stack (API, ticker, scans, results, the example worker).
    fullstack_executions: int = 5_000
    fullstack_threads: int = 8
    #: Warm environment processes beside the stack's own (``devstack.environments``; 0: the whole stack in one
    #: process, as before 2026-11-26). Default: one per core, as ``make run`` starts.
    fullstack_environments: int = field(default_factory=lambda: os.cpu_count() or 1)
    #: None: S falls in a minute that begins at least ``OPEN_AHEAD`` + 10 s after the submissions end (every row
    #: in its minute's planned lane). A number (the smoke test, which counts and never times): S is about this
    #: many seconds after the submissions end, so the rows go to the late lane and the run waits seconds, not
    #: the two minutes or so that the planned lane needs.
    fullstack_lead_s: float | None = None
    #: The fairness section (issue #13): a heavy tenant's executions and a light tenant's, all due at the same
    #: second of one minute, next to a minute of the light tenant's alone; the segments of both minutes.
    fairness_heavy: int = 20_000
    fairness_light: int = 20
    fairness_segments: int = 16
    #: None: the unloaded and the loaded executions in two consecutive minutes, each due at its minute's first
    #: instant. A number (the smoke test, which counts and never times): both in one minute, the loaded ones this
    #: many seconds after the unloaded ones, which are due at the first second the seeding allows (one minute's
    #: scans instead of two, and no wait for a minute to begin).
    fairness_gap_s: float | None = None
    #: Time before the first scans start, beyond the seeding's own (estimated at ``fairness.SEED_RATE``).
    fairness_margin_s: float = 20.0
    #: The deliveries section (issue #35): one-time jobs with an HTTPS target on a local receiver, due at random whole
    #: seconds of a minute (latency), and all due at one instant (throughput); the same loads on the Kafka path.
    deliveries_executions: int = 2_000
    deliveries_burst: int = 5_000
    #: "system": real minutes, the real clock (figures); "skip": far-future minutes, a clock that never waits (the
    #: smoke test, which counts and never times).
    deliveries_clock: str = "system"
    #: The same for the fairness section: "skip" scans far-future minutes on a clock that never waits, so nothing
    #: waits for a real minute; its lateness and ranks are then meaningless and not reported, only its counts.
    fairness_clock: str = "system"
    out_md: Path = ROOT / "docs" / "benchmarks.md"
    out_png: Path = ROOT / "docs" / "benchmarks.png"
    work_dir: Path = ROOT / ".local" / "bench"
    keep: bool = False
    #: Raise at the first failing section (the smoke test) instead of reporting it and going on.
    strict: bool = False

    @classmethod
    def smoke(cls, work_dir: Path) -> Options:
        """Seconds, not minutes: proves the harness works end to end (counts, never speeds)."""
        return cls(
            runs=1, processes=2,
            sections=("ceilings", "drain", "variants", "scaling", "submit", "memory", "writes", "shortperiod",
                      "idle", "fullstack", "fairness", "deliveries"),
            variants=("baseline", "driver-rows", "single-requests", "all"), variant_executions=200,
            drain_executions=200, drain_segments=2, scaling_segments=(1, 2), scaling_executions=100,
            lateness_executions=60, lateness_segments=2, submit_requests=20, submit_threads=2,
            memory_sizes=(100,), ceiling_ops=400, ceiling_produce=400, combined_executions=200,
            raw_concurrency=32, floor_samples=5, profile_executions=200, writes_executions=200, short_jobs=20,
            idle_segments=2, idle_minutes=3, fullstack_executions=40, fullstack_threads=4, fullstack_lead_s=10,
            fairness_heavy=400, fairness_light=5, fairness_segments=2, fairness_gap_s=2, fairness_margin_s=5,
            deliveries_executions=20, deliveries_burst=40, deliveries_clock="skip", fairness_clock="skip",
            out_md=work_dir / "benchmarks.md", out_png=work_dir / "benchmarks.png", work_dir=work_dir,
            strict=True,
        )


@dataclass
class Section:
    """Load average around one benchmark section, for the report."""

    name: str
    load_start: float
    load_end: float = float("nan")
    seconds: float = 0.0


class CpuSampler:
    """Samples the CPU counters every 0.25 s so that a window [start, end] chosen afterwards (e.g. up to
    the last Kafka ack) can be read: machine cores busy and each server's and worker's cores."""

    def __init__(self, pids: dict[str, int], interval: float = 0.25) -> None:
        self._meter = CpuMeter(pids)
        self._interval = interval
        self._samples: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._samples.append((time.monotonic(), self._meter._snapshot()))
            self._stop.wait(self._interval)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._samples.append((time.monotonic(), self._meter._snapshot()))

    def window(self, start: float, end: float) -> dict[str, float]:
        before = [s for s in self._samples if s[0] <= start] or self._samples[:1]
        after = [s for s in self._samples if s[0] >= end] or self._samples[-1:]
        (t0, a), (t1, b) = before[-1], after[0]
        wall = t1 - t0
        out = {"wall_s": wall}
        if wall <= 0:
            return out
        out["machine_cores"] = (b["machine_busy"] - a["machine_busy"]) / wall
        for name in self._meter.pids:
            out[f"{name}_cores"] = (b[name] - a[name]) / wall
        return out


@dataclass
class Bench:
    options: Options
    settings: Settings
    names: BenchNames
    endpoints: Endpoints
    pool: WorkerPool
    machine: dict[str, Any]
    keys: list[tuple[str, str]] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)
    _minutes: Any = field(default_factory=lambda: itertools.count(1))
    _base: datetime = field(default_factory=lambda: minute_bucket(datetime.now(UTC)) + timedelta(days=2))

    def next_bucket(self) -> datetime:
        """A fresh minute far in the future: no real tick or test ever looks at it."""
        return self._base + timedelta(minutes=next(self._minutes))

    def pids(self) -> dict[str, int]:
        pids = server_pids()
        for index, pid in enumerate(self.pool.pids):
            pids[f"worker{index}"] = pid
        return pids

    def section(self, name: str) -> Section:
        section = Section(name, load1())
        self.sections.append(section)
        return section

    def seed(self, bucket: datetime, count: int, segment_count: int, topic: str | None = None,
             due: str = "start", want_keys: bool = False, tenant: str | None = None,
             offset: timedelta = timedelta(0), **shape: Any) -> dict[str, Any]:
        """Seed ``count`` executions into ``bucket`` using every worker; returns totals (and keys). With
        ``tenant``, every job is that tenant's (otherwise they are spread over the bench tenants). With
        ``due="start"``, every row is due ``offset`` after the bucket's first instant. ``shape``: other fields
        of ``SeedSpec`` (``recurring_share``, ``tenants``, ``target_url``)."""
        parts = split(list(range(count)), len(self.pool))
        specs = [
            {"spec": SeedSpec(to_epoch_ms(bucket), len(part), segment_count, topic or self.names.topic, due=due,
                              seed=hash((bucket, tenant, index)) & 0xFFFFFFFF, tenant=tenant,
                              offset_ms=offset // timedelta(milliseconds=1), **shape),
             "want_keys": want_keys}
            for index, part in enumerate(parts) if part
        ]
        results = self.pool.all("seed", specs)
        per_segment: dict[int, int] = {}
        for result in results:
            for segment, n in result["per_segment"].items():
                per_segment[segment] = per_segment.get(segment, 0) + n
        keys = [key for result in results for key in result.get("keys", [])]
        if want_keys:
            self.keys = keys
        return {"count": sum(r["count"] for r in results), "per_segment": per_segment, "keys": keys,
                "recurring": sum(r["recurring"] for r in results)}
