"""Runs the chosen sections in order, with the load average around each, and writes the report."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from bench import stack
from bench.context import Bench
from bench.machine import describe, load1
from bench.report import write_chart, write_json, write_markdown
from bench.workers import WorkerPool
from devstack import servers
from devstack.stack import use_local_aws_credentials

if TYPE_CHECKING:
    from collections.abc import Callable

    from bench.context import Options


def _sections() -> dict[str, Callable[[Bench], None]]:
    from bench.ceilings import run_ceilings
    from bench.drain import run_drain, run_scaling, run_variants
    from bench.lateness import run_lateness
    from bench.memory import run_memory
    from bench.profile import run_profile
    from bench.submit import run_submit

    return {"ceilings": run_ceilings, "drain": run_drain, "variants": run_variants, "scaling": run_scaling,
            "lateness": run_lateness,
            "submit": run_submit, "memory": run_memory, "profile": run_profile}


def _message_bytes(bench: Bench) -> int | None:
    from bench.raw import Example, message_bytes

    if not bench.keys:
        return None
    return message_bytes(Example(bench.keys[0], 0, bench.names.topic, recurring=True))


def run(options: Options, command: str = "python -m bench", write: bool = True) -> Bench:
    """Create the isolated names, run each section, write the report; always drop what was created."""
    started = time.monotonic()
    use_local_aws_credentials()
    endpoints = servers.ensure_all()
    names = stack.new_names()
    settings = stack.bench_settings(endpoints, names, options.drain_segments)
    machine = describe(endpoints.cassandra_host, endpoints.cassandra_port)
    print(f"bench {names.run_id}: keyspace {names.keyspace}, {options.processes} worker processes, "
          f"load average {load1():.2f}", flush=True)
    stack.create(settings, names)
    try:
        with WorkerPool(settings, options.processes) as pool:
            bench = Bench(options=options, settings=settings, names=names, endpoints=endpoints, pool=pool,
                          machine=machine)
            bench.results["started"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
            sections = _sections()
            for name in options.sections:
                section = bench.section(name)
                print(f"{name} (load average {section.load_start:.2f})", flush=True)
                began = time.monotonic()
                try:
                    sections[name](bench)
                except Exception as exc:  # keep the other sections' figures; the report says what failed
                    if options.strict:
                        raise
                    bench.results.setdefault("failed", {})[name] = f"{type(exc).__name__}: {exc}"[:2000]
                    print(f"  {name} FAILED: {type(exc).__name__}: {str(exc)[:500]}", flush=True)
                section.seconds = time.monotonic() - began
                section.load_end = load1()
            bench.results["message_bytes"] = _message_bytes(bench)
    finally:
        if not options.keep:
            problems = stack.destroy(settings, names)
            if problems:
                print("clean-up problems: " + "; ".join(problems), flush=True)
    took = time.monotonic() - started
    bench.results["took_s"] = took
    if write:
        write_json(bench, options.work_dir / f"bench-{names.run_id}.json")
        write_markdown(bench, took, command)
        write_chart(bench)
        print(f"wrote {options.out_md} and {options.out_png} in {took / 60:.1f} min", flush=True)
    return bench


def result_counts(bench: Bench) -> dict[str, Any]:
    """The counts a smoke test can assert on (never speeds)."""
    r = bench.results
    return {
        "drain_published": [d["published"] for d in r.get("drain", [])],
        "drain_seeded": [d["seeded"] for d in r.get("drain", [])],
        "scaling_published": {s: [x["published"] for x in runs] for s, runs in r.get("scaling", {}).items()},
        "submit_accepted": {m: [x["accepted"] for x in runs] for m, runs in r.get("submit", {}).items()},
        "submit_statuses": {m: [x["statuses"] for x in runs] for m, runs in r.get("submit", {}).items()},
        "memory_published": {s: [x["published"] for x in runs] for s, runs in r.get("memory", {}).items()},
        "variants_published": {v: [x["published"] for x in runs] for v, runs in r.get("variants", {}).items()},
        "ceiling_ops": [{k: run[k]["ops"] for k in ("writes", "reads", "batches", "produce", "combined")}
                        for run in r.get("ceilings", [])],
    }
