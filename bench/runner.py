"""Runs the chosen sections in order, with the load average around each, and writes the report."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from bench import stack
from bench.ceilings import run_ceilings
from bench.context import Bench, Options, Section
from bench.deliveries import run_deliveries
from bench.drain import run_drain, run_scaling, run_variants
from bench.fairness import run_fairness
from bench.fullstack import run_fullstack
from bench.idle import run_idle
from bench.lateness import run_lateness
from bench.machine import describe, load1
from bench.memory import run_memory
from bench.profile import run_profile
from bench.raw import Example, message_bytes
from bench.report import write_chart, write_json, write_markdown
from bench.shortperiod import run_shortperiod
from bench.stack import BenchNames
from bench.submit import run_submit
from bench.worker_pool import WorkerPool
from bench.writes import run_writes
from devstack import servers
from devstack.stack import use_local_aws_credentials

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path



def _sections() -> dict[str, Callable[[Bench], None]]:
    return {"ceilings": run_ceilings, "drain": run_drain, "variants": run_variants, "scaling": run_scaling,
            "lateness": run_lateness,
            "submit": run_submit, "memory": run_memory, "writes": run_writes, "shortperiod": run_shortperiod,
            "idle": run_idle, "fullstack": run_fullstack, "fairness": run_fairness, "deliveries": run_deliveries,
            "profile": run_profile}


def _message_bytes(bench: Bench) -> int | None:
    if not bench.keys:
        return None
    return message_bytes(Example(bench.keys[0], 0, bench.names.topic, recurring=True))


def _terminate(signum: int, _frame: object) -> None:
    raise SystemExit(f"bench: stopped by signal {signum}")  # so that the clean-up in ``finally`` runs


def run(options: Options, command: str = "python -m bench", write: bool = True) -> Bench:
    """Create the isolated names, run each section, write the report; always drop what was created.
    The results so far are saved after every section (``.local/bench/bench-<id>.json``), so that a run
    that is stopped half-way can still be rendered (``--from-json``)."""
    started = time.monotonic()
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    use_local_aws_credentials()
    endpoints = servers.ensure_all()
    names = stack.new_names()
    settings = stack.bench_settings(endpoints, names, options.drain_segments)
    machine = describe(endpoints.cassandra_host, endpoints.cassandra_port)
    print(f"bench {names.run_id}: keyspace {names.keyspace}, {options.processes} worker processes, "
          f"load average {load1():.2f}", flush=True)
    stack.create(settings, names)
    bench = Bench(options=options, settings=settings, names=names, endpoints=endpoints,
                  pool=WorkerPool(settings, options.processes), machine=machine)
    bench.results["started"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    try:
        sections = _sections()
        for name in options.sections:
            section = bench.section(name)
            print(f"{name} (load average {section.load_start:.2f})", flush=True)
            began = time.monotonic()
            _run_section(bench, name, sections[name])
            section.seconds = time.monotonic() - began
            section.load_end = load1()
            bench.results["took_s"] = time.monotonic() - started
            write_json(bench, options.work_dir / f"bench-{names.run_id}.json")
        bench.results["message_bytes"] = _message_bytes(bench)
    finally:
        bench.pool.close()
        if not options.keep:
            problems = stack.destroy(settings, names)
            if problems:
                print("clean-up problems: " + "; ".join(problems), flush=True)
    took = time.monotonic() - started
    bench.results["took_s"] = took
    bench.results["command"] = command
    if write:
        write_json(bench, options.work_dir / f"bench-{names.run_id}.json")
        if bench.results.get("failed") and options.out_md == Options().out_md:
            # a broken run never replaces the published report: it goes next to the raw results
            options.out_md = options.work_dir / f"benchmarks-{names.run_id}.md"
            options.out_png = options.work_dir / f"benchmarks-{names.run_id}.png"
        write_markdown(bench, took, command)
        write_chart(bench)
        print(f"wrote {options.out_md} and {options.out_png} in {took / 60:.1f} min", flush=True)
        _record_cost_inputs(bench.results, options)
    return bench


def _record_cost_inputs(results: dict[str, Any], options: Options, path: Path | None = None) -> None:
    """The figures the cost model takes from a run (``bench/cost_inputs.json``), written when the run writes the
    published report (not a smoke run, a run to another file, or a broken one)."""
    if results.get("failed") or options.out_md != Options().out_md:
        return
    from bench.cost.inputs import INPUTS_PATH, record

    names = record(results, path or INPUTS_PATH)
    if names:
        print(f"wrote the cost model's measured inputs ({', '.join(names)}) to bench/cost_inputs.json; "
              "`python -m bench.cost --write-docs` updates docs/scaling.md's tables", flush=True)


def _servers_up() -> bool:
    try:
        return all(servers.status().values())
    except Exception:
        return False


def _run_section(bench: Bench, name: str, section: Callable[[Bench], None]) -> None:
    """Run one section; if the shared servers went away under it (another checkout stopping the ones
    it had started), start them again, recreate the benchmark's keyspace and retry the section once."""
    for attempt in (1, 2):
        try:
            section(bench)
            return
        except Exception as exc:
            if bench.options.strict:
                raise
            if attempt == 1 and not _servers_up():
                print(f"  {name}: the servers went away ({type(exc).__name__}); starting them and retrying",
                      flush=True)
                bench.pool.close()
                servers.ensure_all()
                stack.create(bench.settings, bench.names)
                bench.keys = []  # the job rows seeded so far may be gone with the old servers
                bench.pool = WorkerPool(bench.settings, bench.options.processes)
                bench.results.setdefault("restarts", []).append(name)
                continue
            bench.results.setdefault("failed", {})[name] = f"{type(exc).__name__}: {exc}"[:2000]
            print(f"  {name} FAILED: {type(exc).__name__}: {str(exc)[:500]}", flush=True)
            return


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
        "writes_executions": [(w["published_first"], w["published_retries"]) for w in r.get("writes", [])],
        "fullstack": [{k: run[k] for k in ("accepted", "published", "duplicates", "unpublished", "results",
                                           "result_messages", "recorded", "timed_out")}
                      for run in r.get("fullstack", {}).get("runs", [])],
        "fairness": [{kind: {k: run[kind][k] for k in ("seeded", "published", "unpublished", "duplicates", "foreign")}
                      for kind in ("unloaded", "loaded")} for run in r.get("fairness", {}).get("runs", [])],
        "deliveries": [{load: {k: run[load][k] for k in ("expected", "unique", "duplicates", "missing")}
                        for load in ("kafka_spread", "kafka_burst", "delivered_spread", "delivered_burst")}
                       for run in r.get("deliveries", {}).get("runs", [])],
    }


def render(paths: list[str], options: Options) -> None:
    """Write the report and chart again from saved ``bench-<id>.json`` files: one run stopped half-way,
    or several runs of different sections (``--only``) merged, later files winning per section."""
    import json
    from pathlib import Path
    from types import SimpleNamespace

    machine: dict[str, Any] = {}
    results: dict[str, Any] = {}
    sections: list[Section] = []
    took = 0.0
    run_ids = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        machine = machine or data["machine"]
        for key in ("scaling", "memory"):  # JSON turned the int keys into strings
            if key in data:
                data[key] = {int(k): v for k, v in data[key].items()}
        took += data.get("took_s", 0.0)
        run_ids.append(data.get("run_id", Path(path).stem.removeprefix("bench-")))
        sections += [Section(**s) for s in data["sections"]]
        failed = data.pop("failed", {})
        results.update({k: v for k, v in data.items() if k not in ("machine", "sections", "failed")})
        for name, error in failed.items():
            results.setdefault("failed", {})[name] = error
        for name in [n for n in results.get("failed", {}) if n in data]:
            del results["failed"][name]  # a later file has this section's figures
    results["took_s"] = took
    if len(paths) > 1:
        results["command"] = "python -m bench --only ... (several runs, merged with --from-json)"
    bench = SimpleNamespace(options=options, machine=machine, results=results, sections=sections,
                            names=BenchNames("+".join(run_ids)))
    write_markdown(bench, took, results.get("command", "python -m bench"))  # type: ignore[arg-type]
    write_chart(bench)  # type: ignore[arg-type]
    print(f"wrote {options.out_md} and {options.out_png} from {', '.join(paths)}")
    _record_cost_inputs(results, options)


def drop(run_id: str) -> None:
    """Remove what a run that was killed before its clean-up left behind (keyspace, topics, table)."""
    use_local_aws_credentials()
    endpoints = servers.ensure_all()
    names = stack.BenchNames(run_id)
    problems = stack.destroy(stack.bench_settings(endpoints, names), names)
    print(f"dropped the leftovers of run {run_id}" + (f"; problems: {problems}" if problems else ""))
