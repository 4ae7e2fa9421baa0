"""Writing ``docs/benchmarks.md`` and ``docs/benchmarks.png`` from the results of one run.

Every repeated figure is written as ``median (min-max, n=runs)``. The hand-written findings
(``bench/findings.md``) are appended verbatim: they interpret one particular run and say which.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.ceilings import implied_ceiling, shared_ceiling
from bench.stats import fmt, median, pct, ratio, spread

if TYPE_CHECKING:
    from bench.context import Bench

FINDINGS = Path(__file__).with_name("findings.md")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return [*out, ""]


def _ceiling(bench: Bench, kind: str) -> list[float]:
    return [run[kind]["rate"] for run in bench.results.get("ceilings", [])]


def _paired_ratios(figures: list[float], ceilings: list[float]) -> list[float]:
    """Run i's figure over run i's ceiling (the ceilings ran in the same run, next to the figure)."""
    if not figures or not ceilings:
        return []
    if len(ceilings) == len(figures):
        return [ratio(f, c) for f, c in zip(figures, ceilings, strict=True)]
    return [ratio(f, median(ceilings)) for f in figures]


def _cpu_text(cpu: dict[str, float]) -> str:
    parts = [f"machine {fmt(cpu.get('machine_cores', math.nan), 2)}"]
    for name in ("cassandra", "kafka", "moto"):
        if f"{name}_cores" in cpu:
            parts.append(f"{name} {fmt(cpu[f'{name}_cores'], 2)}")
    workers = sum(v for k, v in cpu.items() if k.startswith("worker") and k.endswith("_cores"))
    parts.append(f"bench workers {fmt(workers, 2)}")
    return ", ".join(parts)


def _machine(bench: Bench) -> list[str]:
    m = bench.machine
    lines = ["## Machine", ""]
    lines += _table(["", ""], [
        ["cores (nproc)", str(m["nproc"])], ["memory", f"{m['memory_gib']} GiB"], ["CPU", m["cpu_model"]],
        ["kernel", m["kernel"]], ["Python", m["python"]], ["Cassandra", m["cassandra"]], ["Kafka", m["kafka"]],
        ["cassandra-driver / kafka-python", f"{m['cassandra_driver']} / {m['kafka_python']}"],
        ["bench worker processes", str(bench.options.processes)],
        ["servers used (working directory)", ", ".join(f"{k}: `{v}`" for k, v in m.get("servers_from", {}).items())],
    ])
    lines += ["Cassandra runs with a 1 GiB heap, `concurrent_writes: 8`, periodic commit-log sync (10 s); Kafka is one",
              "KRaft broker; both, moto and the benchmark's processes share the two cores (and so does anything else",
              "running on the machine at the time).",
              "**The figures are noisy**: the 1-minute load average around each section is below.", ""]
    lines += _table(["section", "load avg at start", "load avg at end", "took"], [
        [s.name, fmt(s.load_start, 2), fmt(s.load_end, 2), f"{s.seconds:.0f} s"] for s in bench.sections
    ])
    return lines


def _headline(bench: Bench) -> list[str]:
    r = bench.results
    rows: list[list[str]] = []
    combined = _ceiling(bench, "combined")
    implied = [implied_ceiling(run)[0] for run in r.get("ceilings", [])]
    shared = [shared_ceiling(run) for run in r.get("ceilings", [])]
    if "drain" in r:
        rates = [d["rate"] for d in r["drain"]]
        d0 = r["drain"][0]
        rows.append([f"drain: {d0['executions']:,} executions, {d0['segments']} segments",
                     spread(rates, unit="/s"),
                     f"combined {spread(combined, unit='/s')}; shared {spread(shared, unit='/s')}; "
                     f"implied {spread(implied, unit='/s')}",
                     f"{pct(median(_paired_ratios(rates, combined)))} of combined; "
                     f"{pct(median(_paired_ratios(rates, shared)))} of shared; "
                     f"{pct(median(_paired_ratios(rates, implied)))} of implied"])
        rows.append(["drain: minute start → last Kafka ack", spread([d["drain_s"] for d in r["drain"]], 1, " s"),
                     "", ""])
    if "lateness" in r:
        floors = [run["floor"]["to_ack_ms"] for run in r.get("ceilings", [])]
        floor = median(floors) if floors else math.nan
        for key in ("p50", "p95", "p99", "max"):
            values = [run["create_time"][key] for run in r["lateness"]["runs"] if run.get("create_time")]
            rows.append([f"lateness {key} (CreateTime - due)", spread(values, 0, " ms"),
                         f"floor {spread(floors, 1, ' ms')}" if key == "p50" else "",
                         f"{fmt(ratio(median(values), floor), 1)}x floor" if key == "p50" else ""])
    if "submit" in r:
        create = _ceiling(bench, "create_batches")
        for mode, runs in r["submit"].items():
            rates = [run["rate"] for run in runs]
            rows.append([f"submit, {mode}", spread(rates, unit="/s"), f"create batch {spread(create, unit='/s')}",
                         pct(median(_paired_ratios(rates, create)))])
    if "memory" in r:
        for size, runs in r["memory"].items():
            rows.append([f"scan peak RSS, {int(size):,}-execution partition",
                         spread([m["peak_hwm_mib"] for m in runs], 0, " MiB"),
                         f"baseline {spread([m['baseline_hwm_mib'] for m in runs], 0, ' MiB')}", ""])
    if "scaling" in r:
        for segments, runs in r["scaling"].items():
            rates = [run["rate"] for run in runs]
            rows.append([f"scaling: {segments} segment(s)", spread(rates, unit="/s"), "combined (16 streams)",
                         pct(median(_paired_ratios(rates, combined)))])
    if r.get("fullstack", {}).get("runs"):
        fs = r["fullstack"]["runs"]
        drain = [run["drain_rate"] for run in fs]
        produce, raw_writes = _ceiling(bench, "produce"), _ceiling(bench, "writes")
        rows.append([f"full stack: {fs[0]['requested']:,} executions due at one second, HTTP to last publish",
                     spread(drain, unit="/s"),
                     f"produce {spread(produce, unit='/s')}; writes {spread(raw_writes, unit='/s')}" if produce else "",
                     f"{pct(median(_paired_ratios(drain, produce)))} of produce" if produce else ""])
        rows.append(["full stack: to last result (end to end)", spread([run["end_to_end_rate"] for run in fs],
                                                                        unit="/s"), "", ""])
    if r.get("fairness", {}).get("runs"):
        fair = r["fairness"]
        light = fair["tenants"]["light"]
        alone = [run["unloaded"]["lateness_ms"][light]["p99"] for run in fair["runs"]]
        rows.append([f"fairness: tenant B's lateness p99 beside A's {fair['heavy']:,} due at the same second",
                     spread([run["loaded"]["lateness_ms"][light]["p99"] for run in fair["runs"]], 0, " ms"),
                     f"B alone {spread(alone, 0, ' ms')}",
                     f"difference {spread([run['light_p99_delta_ms'] for run in fair['runs']], 0, ' ms')} "
                     "(goal: within 1 s)"])
    if "writes" in r:
        w = r["writes"]
        rows.append(["writes: rows per execution, counted by Cassandra (scan + results)",
                     spread([run["total_per_execution"] for run in w], 2),
                     f"model {spread([sum(run['expected'].values()) / max(run['executions'], 1) for run in w], 2)}",
                     f"{pct(w[0]['failures_share'])} of first attempts failed and retried"])
    lines = ["## Headline figures", "",
             "Ratios are to the ceiling the work implies, measured in the same run (section 4): *combined* runs",
             "exactly an execution's raw operations (1 read, its single-row writes, 1 produce) in the scan's group",
             "structure without scheduler logic; *implied* is min(reads/s ÷ 1, writes/s ÷ 1.5, produce/s ÷ 1)",
             "from the separate raw ceilings, which each had the whole machine to themselves, as if the three",
             "could run side by side at full speed; *shared* is 1 ÷ (1 ÷ reads/s + 1.5 ÷ writes/s + 1 ÷ produce/s),",
             "the same raw rates with their costs added up, because here Cassandra, Kafka and the scans share",
             "the same two cores (on AWS they do not: see scaling.md).", ""]
    return lines + _table(["figure", "median (min-max, n)", "ceiling", "ratio"], rows)


def _drain(bench: Bench) -> list[str]:
    runs = bench.results.get("drain")
    if not runs:
        return []
    d0 = runs[0]
    lines = ["## 1. Drain", "",
             f"{d0['executions']:,} executions due at the first instant of one minute bucket, across "
             f"{d0['segments']} segments ({d0['recurring']:,} recurring, the rest one-time), scanned by the real",
             f"`ScanService` (one thread per segment, {d0['processes']} worker processes) with the real Cassandra,",
             "Kafka and moto adapters and a clock that starts at the minute and never waits. Seeding is not timed.",
             ""]
    seg_rates = [median(d["segment_rates"]) for d in runs]
    rows = [
        ["time from the minute's start to the last ack", spread([d["drain_s"] for d in runs], 1, " s")],
        ["executions per second, overall", spread([d["rate"] for d in runs], unit="/s")],
        ["executions per second, per segment (median segment)", spread(seg_rates, unit="/s")],
        ["slowest / fastest segment", " ; ".join(
            f"{fmt(min(d['segment_rates']))}-{fmt(max(d['segment_rates']))}/s" for d in runs)],
        ["published / seeded", " ; ".join(f"{d['published']:,}/{d['seeded']:,}" for d in runs)],
        ["errors / dropped", " ; ".join(f"{d['errors']}/{d['dropped']}" for d in runs)],
        ["scans that finished (marked done)", " ; ".join(f"{d['finished']}/{d['segments']}" for d in runs)],
        ["scans that died (an exception escaped the scan)", " ; ".join(
            f"{len(d.get('crashed', []))}" + (f" ({d['crashed'][0][:120]})" if d.get("crashed") else "")
            for d in runs)],
        ["CPU cores busy until the last ack (first run)", _cpu_text(runs[0]["cpu"])],
        ["CPU per execution: scan processes (all their threads)",
         spread([d["process_cpu_s"] / max(d["published"], 1) * 1000 for d in runs], 2, " ms")],
        ["CPU per execution: Cassandra",
         spread([d["cpu"].get("cassandra_cores", math.nan) * d["drain_s"] / max(d["published"], 1) * 1000
                 for d in runs], 2, " ms")],
        ["CPU per execution: Kafka",
         spread([d["cpu"].get("kafka_cores", math.nan) * d["drain_s"] / max(d["published"], 1) * 1000
                 for d in runs], 2, " ms")],
    ]
    lines += _table(["", ""], rows)
    w = runs[0]["writes"]
    msg = bench.results.get("message_bytes")
    lines += ["**What the scan sent per execution** (counted on the driver; statements inside batches one by one;",
              "the first run, the others are identical):", ""]
    rows = [[kind, fmt(n, 2)] for kind, n in w["per_execution"].items()]
    rows += [["CQL requests (a batch is one)", fmt(w["requests_per_execution"], 2)],
             ["batches (one request each)", fmt(w["batches_per_execution"], 2)],
             ["of which LOGGED", fmt(w.get("logged_batches_per_execution", float("nan")), 2)],
             ["statements inside batches", fmt(w["batch_statements_per_execution"], 2)],
             ["bytes of bound values in batches", fmt(w["batch_bytes_per_execution"], 0)],
             ["Kafka messages / bytes (key + value + headers)", f"1 / {msg}" if msg else "1"],
             ["DynamoDB calls per scan (not per execution)",
              ", ".join(f"{op} {fmt(n, 1)}" for op, n in w["dynamodb_per_scan"].items())],
             ["late-lane polls + partition pages per scan", fmt(w["late_polls_per_scan"], 1)]]
    lines += _table(["per execution", "count"], rows)
    lines += ["**Where the scans' wall time goes** until their last ack (sum over segments of the time spent in",
              "each port call, over the sum of the segments' drain times; median over runs):", ""]
    labels = list(runs[0]["phases"])
    lines += _table(["phase", "share"], [[label, pct(median([d["phases"][label] for d in runs]))] for label in labels])
    return lines


def _lateness(bench: Bench) -> list[str]:
    lat = bench.results.get("lateness")
    if not lat:
        return []
    floors = [run["floor"] for run in bench.results.get("ceilings", [])]
    lines = ["## 2. Lateness", "",
             f"{lat['executions_per_minute']:,} executions per minute, due at random whole seconds, "
             f"{lat['segments']} segments, real wall clock,",
             "consecutive minutes (each minute's scans start 10 s ahead, as the tick dispatches them).",
             "CreateTime is stamped by the producer when it sends; the ack time is when `publish` returned.", ""]
    rows = []
    for run in lat["runs"]:
        ct, ack = run.get("create_time") or {}, run["ack"]
        rows.append([run["minute"][11:16], f"{run['published']:,}",
                     " / ".join(fmt(ct.get(k, math.nan), 0) for k in ("p50", "p95", "p99", "max")),
                     " / ".join(fmt(ack[k], 0) for k in ("p50", "p95", "p99", "max"))])
    lines += _table(["minute (UTC)", "published", "CreateTime - due: p50 / p95 / p99 / max ms",
                     "ack - due: p50 / p95 / p99 / max ms"], rows)
    if floors:
        lines += ["Floor (measured with the ceilings): one execution alone (read its job, start batch, produce",
                  f"and flush) takes {spread([f['to_ack_ms'] for f in floors], 1, ' ms')} to its ack (median of "
                  f"{floors[0]['samples']} in a row; p95 {spread([f['to_ack_p95_ms'] for f in floors], 1, ' ms')});",
                  f"with the complete batch {spread([f['total_ms'] for f in floors], 1, ' ms')}.", ""]
    return lines


def _submit(bench: Bench) -> list[str]:
    sub = bench.results.get("submit")
    if not sub:
        return []
    create = _ceiling(bench, "create_batches")
    environments = bench.results.get("submit_environments", 0)
    lines = ["## 3. Submit", "",
             "`POST /jobs` (half `at` an hour ahead, half `every: PT1H`), one job a request, and `POST /jobs/batch`",
             "(the same jobs, 100 a request), through `jobrunner.api.app.handle`: in-process in a worker process,",
             "and over HTTP through `devstack.gateway.serve` in a worker process"
             + (f" and {environments} warm environment processes serving the same port (`devstack.environments`, "
                "`--submit-environments`, as `make run` does)" if environments else "")
             + ", with client threads in the parent. Rates are jobs accepted per second (a batch's 201 created its",
             "100 jobs). Ceiling: the raw rate of a logged batch of a job row and its first `task_schedule` row,",
             "what a submit wrote until 2026-11-26 (it now writes the two rows one after the other, the first run",
             "first, without a batch log: a rate of the same order on one node).", ""]
    rows = []
    for mode, runs in sub.items():
        rates = [run["rate"] for run in runs]
        rows.append([mode, f"{runs[0]['requests']:,} of {runs[0].get('jobs_per_request', 1)}",
                     spread(rates, unit="/s"),
                     spread([run["latency_p50_ms"] for run in runs], 1, " ms"),
                     spread([run["latency_p95_ms"] for run in runs], 1, " ms"),
                     pct(median(_paired_ratios(rates, create))),
                     ", ".join(str(s) for run in runs for s in run["other_statuses"]) or "none"])
    return lines + _table(["mode", "requests/run, of jobs each", "jobs accepted/s", "latency p50", "latency p95",
                           "of create-batch ceiling", "non-201"], rows)


def _ceilings(bench: Bench) -> list[str]:
    runs = bench.results.get("ceilings")
    if not runs:
        return []
    o = bench.options
    lines = ["## 4. Ceilings", "",
             "Measured in the same run as the drain, one ceilings run right before each drain run (after a",
             "5,000-execution warm-up drain that is not reported), so that run *i*'s ratio compares like with like.",
             "Raw operations with the same driver, prepared statements, LOCAL_QUORUM and value sizes as the",
             f"store, and the publisher's producer settings (acks=all, idempotent, linger 5 ms), in all "
             f"{o.processes} worker processes at once (`execute_concurrent`, concurrency {o.raw_concurrency} per",
             "process; the combined ceiling uses the store's 64 and groups of 500, one thread per segment).", ""]
    names = {
        "writes": "Cassandra writes/s (INSERT of a task_history_v2-sized row)",
        "reads": "Cassandra reads/s (SELECT of a job row by key)",
        "batches": "batches/s (start, unlogged, and complete, logged, alternating)",
        "create_batches": "logged batches/s (submit shape: job + first run)",
        "produce": "Kafka messages/s (same size and settings)",
        "combined": "combined: executions/s (1 read + 2 batches + 1 produce each)",
    }
    rows = [[label, spread([run[kind]["rate"] for run in runs], unit="/s"), _cpu_text(runs[0][kind]["cpu"]),
             ", ".join(str(run[kind].get("retried", 0)) for run in runs)]
            for kind, label in names.items()]
    implied_by = {implied_ceiling(run)[1] for run in runs}
    rows.append([f"implied: min over resources (bound by {', '.join(sorted(implied_by))})",
                 spread([implied_ceiling(run)[0] for run in runs], unit="/s"), "", ""])
    rows.append(["shared: 1 ÷ (1 ÷ reads/s + 1.5 ÷ writes/s + 1 ÷ produce/s)",
                 spread([shared_ceiling(run) for run in runs], unit="/s"), "", ""])
    return lines + _table(["ceiling", "median (min-max, n)", "CPU cores busy (first run)",
                           "statements retried after a client timeout, per run"], rows)


def _memory(bench: Bench) -> list[str]:
    mem = bench.results.get("memory")
    if not mem:
        return []
    lines = ["## 5. Memory", "",
             "One scan of one partition in a fresh process (connected and warmed up first: the baseline).",
             "Peak = VmHWM after the scan (ru_maxrss agrees); added = peak - resident set before the scan.", ""]
    rows = [[f"{int(size):,}", spread([m["baseline_hwm_mib"] for m in runs], 1, " MiB"),
             spread([m["peak_hwm_mib"] for m in runs], 1, " MiB"),
             spread([m["scan_added_mib"] for m in runs], 1, " MiB"),
             fmt(median([m["scan_added_mib"] * 1024 / max(int(size), 1) for m in runs]), 2) + " KiB"]
            for size, runs in mem.items()]
    return lines + _table(["executions in the partition", "baseline", "peak", "added by the scan",
                           "added per execution"], rows)


def _variants(bench: Bench) -> list[str]:
    from bench.variants import VARIANTS

    var = bench.results.get("variants")
    if not var:
        return []
    base = [run["rate"] for run in var.get("baseline", [])]
    first = next(iter(var.values()))[0]
    lines = ["## 7. Variants: the before of each adopted change, the what-if of the others", "",
             f"The drain again ({first['executions']:,} executions, {first['segments']} segments), with one change",
             "each, built in `bench/variants.py` without touching `layers/`; the variants of one repetition",
             "run back to back, so that noise hits them alike. Gain = median of the run-by-run ratios to the",
             "baseline run next to it. `driver-rows` undoes a change the store has adopted (the baseline has",
             "it), so a gain below 1 there is what that change won.", ""]
    rows = []
    for name, runs in var.items():
        rates = [run["rate"] for run in runs]
        gains = [ratio(r, b) for r, b in zip(rates, base, strict=False)] if base else []
        rows.append([f"`{name}`", VARIANTS[name].description if name in VARIANTS else "", spread(rates, unit="/s"),
                     fmt(median(gains), 2) + "x" if gains else "n/a",
                     fmt(median([run["writes"]["requests_per_execution"] for run in runs]), 2),
                     ", ".join(f"{run['published']:,}" for run in runs)])
    return lines + _table(["variant", "change", "executions/s", "vs baseline", "CQL requests/execution",
                           "published"], rows)


def _scaling(bench: Bench) -> list[str]:
    sc = bench.results.get("scaling")
    if not sc:
        return []
    first = median([r["rate"] for r in next(iter(sc.values()))])
    lines = ["## 6. Scaling with segments", "",
             f"{next(iter(sc.values()))[0]['executions']:,} executions due at the minute's start, split over "
             "1-16 segments, on at most",
             f"{bench.options.processes} processes (one thread per segment).", ""]
    rows = []
    for segments, runs in sc.items():
        rates = [r["rate"] for r in runs]
        rows.append([str(segments), str(runs[0]["processes"]), spread(rates, unit="/s"),
                     fmt(ratio(median(rates), first), 2) + "x",
                     spread([median(r["segment_rates"]) for r in runs], unit="/s"),
                     _cpu_text(runs[0]["cpu"])])
    return lines + _table(["segments", "processes", "executions/s", "speed-up vs 1", "per segment",
                           "CPU cores busy (first run)"], rows)


def _writes(bench: Bench) -> list[str]:
    runs = bench.results.get("writes")
    if not runs:
        return []
    w = runs[0]
    execs = [max(r["executions"], 1) for r in runs]

    def per(values: list[float], digits: int = 2) -> str:
        return spread([v / n for v, n in zip(values, execs, strict=True)], digits)

    lines = ["## 8. Writes per execution, counted by Cassandra", "",
             f"**Workload** (per run): {w['fires']:,} executions due at the start of one minute, one-time and "
             f"recurring ({w['recurring']:,} recurring in the first run),",
             f"{w['segments']} segments, scanned by the real `ScanService`; each message read back from Kafka and "
             "answered as `jobrunner_client.worker` does,",
             f"through the real `ResultsService` on the Cassandra store: {pct(w['failures_share'])} FAILED "
             f"({w['failed_first']:,}; each job allows one retry), the rest SUCCESS; then the",
             f"next minute, holding the {w['published_retries']:,} retries, scanned and its retries answered "
             f"SUCCESS: {w['executions']:,} executions per run.",
             "**Method**: Cassandra's own per-table write counter, the `count` column of the virtual table",
             "`system_views.local_write_latency` (no JMX needed; one per partition update applied to a table),",
             "read before and after each step; the difference per table of the benchmark's keyspace. A row of a",
             "partition of its own is one update; since 2026-11-26 the store packs rows into unlogged batches, and",
             "the rows of one partition in one batch (the next fires of one minute and segment, in",
             "`task_schedule_v2`) are one update together, so Cassandra's count can be below the rows written.",
             "Seeding is not counted. *Model*: docs/scaling.md's count of rows for this mix; *driver sent*: the",
             "rows the benchmark's counting session saw written (inside batches one by one): what Amazon",
             "Keyspaces bills, a write unit per row of up to 1 KB.",
             "**Reproduce**: `python -m bench --only writes --runs 1` (`--writes-executions`, `--writes-failures`;",
             "add `--out /tmp/w.md --chart /tmp/w.png`, or it replaces docs/benchmarks.md with this section alone).",
             ""]
    tables = list(w["counted"])

    def part(run: dict[str, Any], side: str, table: str | None) -> int:
        """Rows of ``table`` (None: every table of the keyspace) in the steps of one side, scans or results."""
        steps = ("scan", "retry scan") if side == "scans" else ("results", "retry results")
        return sum(v for step in steps for t, v in run["steps"][step].items()
                   if t == table or (table is None and "." not in t))

    rows = []
    for table in tables:
        counted = [r["counted"].get(table, 0) for r in runs]
        rows.append([f"`{table}`", per(counted), per([part(r, "scans", table) for r in runs]),
                     per([part(r, "results", table) for r in runs]),
                     per([r["expected"].get(table, 0) for r in runs]), per([r["driver"].get(table, 0) for r in runs]),
                     " ; ".join(f"{c:,}" for c in counted)])
    total = [sum(r["counted"].values()) for r in runs]
    rows.append(["**total**", "**" + per(total) + "**", per([part(r, "scans", None) for r in runs]),
                 per([part(r, "results", None) for r in runs]), per([sum(r["expected"].values()) for r in runs]),
                 per([sum(r["driver"].values()) for r in runs]), " ; ".join(f"{t:,}" for t in total)])
    for table in ("system.batches", "system.paxos"):
        rows.append([f"`{table}` (server-wide)", per([r["server"].get(table, 0) for r in runs]),
                     per([part(r, "scans", table) for r in runs]), per([part(r, "results", table) for r in runs]),
                     "", "", " ; ".join(f"{r['server'].get(table, 0):,}" for r in runs)])
    lines += _table(["table", "partition updates per execution (Cassandra)", "of which scans", "of which results",
                     "model (rows)", "rows sent (driver)", "updates counted, per run"], rows)
    steps = {"scan": "published_first", "results": "published_first", "retry scan": "published_retries",
             "retry results": "published_retries"}
    columns = [*tables, "system.batches"]
    lines += ["Rows counted per step (first run), and per execution of the step (keyspace tables only):", ""]
    lines += _table(["step", *columns, "rows per execution of the step"], [
        [step, *(f"{w['steps'][step].get(c, 0):,}" for c in columns),
         fmt(sum(v for t, v in w["steps"][step].items() if "." not in t) / max(w[key], 1), 2)]
        for step, key in steps.items()])
    recurring = w["recurring"] / max(w["fires"], 1)
    exact = all(r["counted"].get(t, 0) == r["expected"].get(t, 0)
                for r in runs for t in {*r["counted"], *r["expected"]})
    agreement = "they equal the model's, row for row" if exact else "**not the model's**: see the errors retried below"
    lines += [f"How the figures add up ({agreement}): the first minute's scan writes",
              "`start` (the history row) and `complete` (the next row for the recurring "
              f"{pct(recurring)}; the done row is not deleted, it expires): 1 + {fmt(recurring, 2)} rows per "
              "execution.",
              "A SUCCESS result writes 1 (the history row), a FAILED one 2 (its retry row first). No execution",
              "writes the job (`job_table_v2`): a job's run fields are derived from its history. A retry",
              "execution (a row of the late lane, deleted once done) writes 2 in its scan (no next run) and 1 in",
              "its result. So an",
              f"execution that succeeds first time writes 2 + the recurring share = {fmt(2 + recurring, 2)}",
              "(docs/scaling.md: 2.5 = 2.0 task_history_v2, 0.5 task_schedule_v2; 6.5 before the redesign, with",
              "3.0 on job_table), and with a share *f* of first attempts failing once, the mean per execution is",
              "(2 + recurring share + 4 *f*) / (1 + *f*).",
              "",
              f"Logged batches sent: {w['logged_batches']:,} (none is left on the execution path; before, the scans'",
              f"`complete` and the results' `finish` were); `system.batches` took "
              f"{w['server'].get('system.batches', 0):,} writes. `system.batches`",
              "and `system.paxos` (lightweight transactions: none on this path) belong to the whole server: on",
              "shared servers they include other clients' writes. Write errors retried: " + " ; ".join(
                  f"scans {r['scan_errors']}, results {sum(sum(a.values()) for a in r['applied_again'])}"
                  for r in runs) + ".", ""]
    return lines


def _shortperiod(bench: Bench) -> list[str]:
    runs = bench.results.get("shortperiod")
    if not runs:
        return []
    periods = " and ".join(f"{p} s" for p in sorted({r["period_s"] for r in runs}))
    lines = ["## 9. Short-period jobs: rows read per execution, and tombstones", "",
             f"**Workload** (per run): {runs[0]['jobs']:,} jobs every *period* ({periods}) in one segment, their "
             "first fires spread over the first period of a fresh minute; that minute (*first*) and the next",
             "(*steady*: its first fires were planned into its late lane by the first minute's scan) scanned by",
             "the real `ScanService` on the real stores and Kafka, on a clock that skips the scan's sleeps (so",
             "it still polls its late lane once a simulated second). **Counted**: every row the scan's reads of ",
             "`task_schedule_v2` returned, per lane (client side), the job rows read, the tombstones the late",
             "lane's polls touched (each poll's read again, traced by Cassandra), and, once the minute is done,",
             "the live rows and tombstones a read of each whole lane touched (Cassandra's query trace: what a",
             "scan taking the partition over would read once). Code: "
             + ", ".join(sorted({f"`{r['code']}`" for r in runs})) + ".",
             "**Reproduce**: `python -m bench --only shortperiod --runs 1` (`--short-jobs`, `--short-periods`).", ""]
    lines += _table(["run", "code", "period", "minute", "executions", "rows read per execution (schedule + jobs)",
                     "late-lane rows read", "planned-lane rows read", "late-lane polls", "job rows read",
                     "tombstones the late-lane polls touched",
                     "whole late lane after the minute: live / tombstones",
                     "whole planned lane: live / tombstones"], [
        [str(i + 1), f"`{r['code']}`", f"{r['period_s']} s", name, f"{m['executions']:,}",
         fmt(m["reads_per_execution"], 2), f"{m['rows_read']['LATE']:,}",
         f"{m['rows_read']['PLANNED']:,}", f"{m['reads']['LATE']:,}", f"{m['jobs_read']:,}",
         f"{m['late_poll_tombstones']:,}" if "late_poll_tombstones" in m else "not counted",
         f"{m['traced']['late']['live']:,} / {m['traced']['late']['tombstones']:,}",
         f"{m['traced']['planned']['live']:,} / {m['traced']['planned']['tombstones']:,}"]
        for i, r in enumerate(runs) for name, m in zip(("first", "steady"), r["minutes"], strict=True)])
    return lines


def _idle(bench: Bench) -> list[str]:
    runs = bench.results.get("idle")
    if not runs:
        return []
    lines = ["## 10. Idle: scans of partitions with nothing to do", "",
             f"**Workload** (per run): {runs[0]['segments']} segments without any job, ticked at second 1 of "
             "each minute as EventBridge's rule does; every scan a tick (or a writer) asks for runs to its end",
             "on the real stores, on a clock of its own that starts at the tick and skips its sleeps, so its",
             "duration is what it would hold a Lambda invocation for. **Counted**, per (minute, segment) of the",
             "minutes after the first two (whose catch-up is left out): scan invocations, and the seconds they",
             "ran. Code: " + ", ".join(sorted({f"`{r['code']}`" for r in runs})) + ".",
             "**Reproduce**: `python -m bench --only idle --runs 1` (`--idle-segments`, `--idle-minutes`).", ""]
    lines += _table(["run", "code", "minutes counted", "scan invocations per (minute, segment)",
                     "scan seconds per (minute, segment)", "longest scan (s)"], [
        [str(i + 1), f"`{r['code']}`", str(r["minutes"]), fmt(r["invocations_per_partition"], 2),
         fmt(r["scan_seconds_per_partition"], 1), fmt(r["longest_scan_s"], 1)] for i, r in enumerate(runs)])
    return lines


def _fullstack(bench: Bench) -> list[str]:
    fs = bench.results.get("fullstack")
    if not fs or not fs.get("runs"):
        return []
    runs = fs["runs"]
    writes, produce = _ceiling(bench, "writes"), _ceiling(bench, "produce")
    drain = [r["drain_rate"] for r in runs]
    lines = ["## 11. Full stack: submitted over HTTP, drained by the whole local system", "",
             f"**Workload** (per run): {fs['executions']:,} one-time jobs (`echo`) submitted with `POST /jobs` over "
             f"HTTP by {fs['threads']} client threads, all due at one second S, "
             + ("5 s into a minute that begins at least\n100 s after the submissions end (so every row is in its "
                "minute's planned lane before the tick that\ndispatches the minute)." if fs.get("lead_s") is None else
                f"about {fmt(fs['lead_s'], 0)} s after the submissions end (`--fullstack-lead`: every row in its "
                "minute's late lane, woken scans).")
             + " **System**: `devstack.stack.LocalStack` in the bench process, as `make run`",
             "runs it: the API, the minute ticker, the results loop and the example worker (its printing "
             "discarded) in the bench process, "
             + (f"and {fs['environments']} warm environment processes (`devstack.environments`, "
                "`--fullstack-environments`) that run the scans and serve the API beside it, as Lambda runs "
                f"concurrent invocations ({fs['segments']} segments)," if fs.get("environments") else
                f"and the scans on its thread pool ({fs['segments']} segments), all in that one process,"),
             "on a keyspace, topics and a heartbeat table of the run's own.",
             "**Measured** from S: the CreateTime of each execution's message on the jobs",
             "topic (drain rate = executions ÷ (last publish - S); lateness = CreateTime - S, so its first value",
             "is how long the scans took to publish anything at all), of each result",
             "on the results topic (end to end = results ÷ (last result - S)), and when every execution was",
             "recorded (the results function's committed offsets, then SUCCESS confirmed in the store). The",
             "topics are read back afterwards, so measuring costs the run nothing. Ceilings: the raw single-row",
             "writes/s and produce/s of section 4, same run (an execution here costs at least one produce, one",
             "read of its job, and history writes by both the scan and the results function).",
             "**Reproduce**: `python -m bench --only ceilings,fullstack --runs 1` (`--fullstack-executions`,",
             "`--fullstack-threads`).", ""]
    ceiling = (f"; ceilings: raw writes {spread(writes, unit='/s')}, raw produce {spread(produce, unit='/s')} "
               f"(drain at {pct(median(_paired_ratios(drain, produce)))} of produce)" if writes and produce else
               "; ceilings not measured in this run (add `ceilings` to `--only`)")
    lines += [f"Drain {spread(drain, unit='/s')}, end to end {spread([r['end_to_end_rate'] for r in runs], unit='/s')}"
              f" (issue #14's target: 2,000/s){ceiling}. Submitted over HTTP at "
              f"{spread([r['submit_rate'] for r in runs], unit='/s')}.", ""]
    lines += _table(["run", "S (UTC)", "accepted / submitted", "published (duplicates)", "results (copies)",
                     "recorded SUCCESS", "last publish", "drain rate", "last result", "end-to-end rate",
                     "all recorded", "lateness first / p50 / p99 / last", "submit rate",
                     "CPU cores busy, S to last result"], [
        [str(i + 1), r["due"][11:19], f"{r['accepted']:,} / {r['requested']:,}",
         f"{r['published']:,} ({r['duplicates']})", f"{r['results']:,} ({r['result_messages'] - r['results']})",
         f"{r['recorded']:,}" + (" (timed out)" if r["timed_out"] else ""), f"{fmt(r['last_publish_s'], 2)} s",
         f"{fmt(r['drain_rate'])}/s", f"{fmt(r['last_result_s'], 2)} s", f"{fmt(r['end_to_end_rate'])}/s",
         f"{fmt(r['recorded_s'], 1)} s",
         " / ".join(fmt(r["lateness_ms"][k], 0) for k in ("min", "p50", "p99", "max")) + " ms",
         f"{fmt(r['submit_rate'])}/s",
         ", ".join(f"{label} {fmt(value, 2)}" for label, value in (
             ("machine", r["cpu"].get("machine_cores", math.nan)),
             ("bench process (the stack)", r["cpu"].get("stack_cores", math.nan)),
             *((("environments", sum(v for k, v in r["cpu"].items() if k.startswith("environment"))),)
               if any(k.startswith("environment") for k in r["cpu"]) else ()),
             ("Cassandra", r["cpu"].get("cassandra_cores", math.nan)),
             ("Kafka", r["cpu"].get("kafka_cores", math.nan))))]
        for i, r in enumerate(runs)])
    odd = [f"run {i + 1}: " + ", ".join(f"{k} {r[k]}" for k in ("unpublished", "jobs_with_several_executions",
                                                                 "foreign_messages", "skipped_minutes") if r[k])
           for i, r in enumerate(runs)
           if any(r[k] for k in ("unpublished", "jobs_with_several_executions", "foreign_messages", "skipped_minutes"))]
    late = [str(i + 1) for i, r in enumerate(runs) if not r["planned_lane"] and fs.get("lead_s") is None]
    if odd or late:
        lines += ["**Anomalies**: " + "; ".join(odd + ([f"runs {', '.join(late)}: submissions ended less than 90 s "
                                                          "before the minute (late lane)"] if late else [])) + ".", ""]
    if fs.get("threads_left"):
        lines += [f"Threads still alive after the stack stopped: {', '.join(fs['threads_left'])}.", ""]
    return lines


def _fairness(bench: Bench) -> list[str]:
    fair = bench.results.get("fairness")
    if not fair or not fair.get("runs"):
        return []
    runs = fair["runs"]
    light, heavy = fair["tenants"]["light"], fair["tenants"]["heavy"]

    def late(minute: dict[str, Any], tenant: str, keys: tuple[str, ...]) -> str:
        figures = minute["lateness_ms"][tenant]
        return " / ".join(fmt(figures[k], 0) for k in keys) + " ms"

    one_minute = ("" if fair.get("gap_s") is None else
                  f"**Short run** (`--fairness-gap`): the unloaded and loaded executions in one minute, the loaded "
                  f"ones {fmt(fair['gap_s'], 0)} s after the unloaded ones, which are due at a second of that minute, "
                  "not at its first instant.")
    lines = ["## 12. Fairness between tenants: a light tenant beside a heavy tenant's burst", "",
             f"**Workload** (per run): two consecutive real wall-clock minutes, {fair['segments']} segments, scanned",
             "as section 2's minutes are (the real clock, each minute's scans started 10 s ahead in",
             f"{fair['processes']} worker processes, one thread per segment). *Unloaded*: tenant B (`{light}`) alone, "
             f"{fair['light']:,} executions due at the minute's first instant. *Loaded*: B's {fair['light']:,} and "
             f"tenant A's (`{heavy}`) {fair['heavy']:,}, all due at that same instant. Every row is seeded into its",
             "minute's planned lane before the scans start, and the minutes hold no other row. **Measured**: each",
             "execution's CreateTime (its message, read back from the section's own topic once the scans ended)",
             "minus its due instant; and B's rank among all the loaded minute's executions by CreateTime (1: the",
             "first published; ties share the best rank), which shows where B's rows came out of A's burst whatever",
             "the machine's speed." + (f" With {fair['light']} executions, B's p99 is its slowest (nearest rank)."
                                       if fair["light"] < 100 else ""),
             f"**The rule** (issue #13's goal): B's loaded p99 within {fmt(fair['goal_ms'] / 1000, 0)} s of its "
             "unloaded p99.",
             f"Code measured: `{fair['code']}` (`{fair['path']}`; worker processes: "
             + ", ".join(f"`{c}`" for c in fair["worker_code"]) + ").",
             *([one_minute] if one_minute else []),
             "**Reproduce**: `python -m bench --only fairness --runs 1` (`--fairness-heavy`, `--fairness-light`,",
             "`--fairness-segments`).", ""]
    lines += _table(["run", "minutes (UTC)", "B unloaded: p50 / p99 / max", "B loaded: p50 / p99 / max",
                     "B p99: loaded - unloaded", "goal met", "A: first / p50 / p99 / last",
                     "B's rank in the loaded minute: median / max", "published / seeded (duplicates)"], [
        [str(i + 1), f"{r['unloaded']['minute'][11:16]}, {r['loaded']['minute'][11:16]}",
         late(r["unloaded"], light, ("p50", "p99", "max")), late(r["loaded"], light, ("p50", "p99", "max")),
         f"{fmt(r['light_p99_delta_ms'], 0)} ms", "yes" if r["met"] else "**no**",
         late(r["loaded"], heavy, ("first", "p50", "p99", "max")),
         f"{fmt(r['loaded']['light_rank']['median'], 0)} / {fmt(r['loaded']['light_rank']['max'], 0)} of "
         f"{r['loaded']['light_rank']['of']:,}",
         " ; ".join(f"{sum(r[k]['published'].values()):,} / {sum(r[k]['seeded'].values()):,} "
                    f"({r[k]['duplicates']})" for k in ("unloaded", "loaded"))]
        for i, r in enumerate(runs)])
    deltas = [r["light_p99_delta_ms"] for r in runs]
    met = sum(1 for r in runs if r["met"])
    lines += [f"B's p99 loaded {spread([r['loaded']['lateness_ms'][light]['p99'] for r in runs], 0, ' ms')}, "
              f"unloaded {spread([r['unloaded']['lateness_ms'][light]['p99'] for r in runs], 0, ' ms')}: "
              f"difference {spread(deltas, 0, ' ms')}, the goal met in {met} of {len(runs)} run(s). A's burst "
              f"drained in {spread([r['loaded']['lateness_ms'][heavy]['max'] for r in runs], 0, ' ms')} (its last "
              f"message; its first came {spread([r['loaded']['lateness_ms'][heavy]['first'] for r in runs], 0, ' ms')}"
              " after the due second: a scan reads the jobs of a whole group of rows (`ScanRules.group_size`)"
              " and records them RUNNING before it sends any of them); B's median rank "
              f"{spread([r['loaded']['light_rank']['median'] for r in runs], 0)} of "
              f"{runs[0]['loaded']['light_rank']['of']:,} (a fair order puts all of B's rows near the front). "
              f"Seeding took {fmt(fair['seed_s'], 0)} s (not measured).", ""]
    odd = []
    for i, r in enumerate(runs):
        for kind in ("unloaded", "loaded"):
            m = r[kind]
            problems = [f"{k} {m[k]}" for k in ("unpublished", "duplicates", "foreign") if m[k]]
            scans = m["scans"]
            if scans["finished"] != scans["segments"]:
                problems.append(f"{scans['finished']}/{scans['segments']} scans finished")
            problems += [f"{k} {scans[k]}" for k in ("errors", "lost_lease") if scans[k]]
            problems += [f"crashed: {c[:120]}" for c in scans["crashed"]]
            if problems:
                odd.append(f"run {i + 1} {kind}: " + ", ".join(problems))
    if fair.get("other_minutes"):
        odd.append(f"{fair['other_minutes']} message(s) due in no minute of the section")
    if odd:
        lines += ["**Anomalies**: " + "; ".join(odd) + ".", ""]
    return lines


#: py-spy cannot see inside the driver's compiled (Cython) modules: their time shows as self time of the
#: last Python frame, here the benchmark's counting proxy. Named for what they are in the report.
_FRAME_NAMES = {
    "CountingSession.execute_async (instruments.py)":
        "Session.execute_async: the driver's compiled request path (bind, encode, send), via the counting proxy",
    "CountingSession.execute (instruments.py)": "Session.execute: the driver's compiled request path",
    "namedtuple (__init__.py)": "collections.namedtuple: the driver's default row factory makes a class per result",
    "<lambda> (<string>)": "namedtuple-generated code (row construction)",
}


def _frame(name: str) -> str:
    return _FRAME_NAMES.get(name, f"`{name}`")


def _profile(bench: Bench) -> list[str]:
    prof = bench.results.get("profile")
    if not prof:
        return []
    if "error" in prof:
        return ["## Profile", "", prof["error"], ""]
    d = prof["drain"]
    lines = ["## Profile of the drain (the scan as it is now; the before profile is in Findings)", "",
             f"py-spy ({prof['samples']:,} on-CPU samples at 97 Hz of the {len(prof['files'])} worker processes) while",
             f"{d['executions']:,} executions drained at {fmt(d['rate'])}/s (sampling costs some speed). Raw collapsed",
             "stacks: `.local/bench/profile-*.txt` (open them in speedscope.app).", ""]
    lines += ["CPU by thread:", ""]
    lines += _table(["thread", "share of samples"], [[k, pct(v)] for k, v in prof["roles"].items()])
    lines += ["Scan threads' CPU by the package of the innermost frame:", ""]
    lines += _table(["package", "share of scan-thread samples"],
                    [[k, pct(v)] for k, v in prof["scan_thread_packages"].items()])
    lines += ["Inclusive share of all samples of the functions that matter:", ""]
    lines += _table(["function", "inclusive"], [[f"`{k}`", pct(v)] for k, v in prof["key_inclusive"].items()])
    lines += ["Top self time (innermost frame):", ""]
    lines += _table(["function", "self"], [[_frame(k), pct(v)] for k, v in list(prof["top_self"].items())[:15]])
    return lines


def chart_link(out_md: Path, out_png: Path) -> str:
    """A Markdown link from the report at ``out_md`` to its chart at ``out_png`` (``--out`` and ``--chart``)."""
    target = Path(os.path.relpath(out_png.resolve(), out_md.resolve().parent)).as_posix()
    return f"[{out_png.name}]({target})"


def write_markdown(bench: Bench, took_s: float, command: str) -> None:
    lines = ["# Benchmarks", "",
             f"Generated by `make bench` (`{command}`) on {bench.results['started']} in {took_s / 60:.1f} minutes,",
             "against the real local Cassandra, Kafka and moto (`devstack.servers`), in a keyspace, heartbeat",
             f"table and topics of its own (`{bench.names.keyspace}`, dropped at the end). Speed is never asserted",
             "by a test; `tests/bench/test_bench_smoke.py` only proves that the harness works.",
             f"Chart: {chart_link(bench.options.out_md, bench.options.out_png)}. On paper, for AWS: "
             "[scaling.md](scaling.md).", ""]
    restarts = bench.results.get("restarts")
    if restarts:
        lines += [f"The shared servers went away during {', '.join(restarts)}; they were started again and the",
                  "section was run again from the start.", ""]
    failed = bench.results.get("failed")
    if failed:
        lines += ["**Sections that failed in this run** (their figures are missing below):", ""]
        lines += [f"- `{name}`: {error.splitlines()[-1] if error else ''}" for name, error in failed.items()] + [""]
    for part in (_machine, _headline, _drain, _lateness, _submit, _ceilings, _memory, _scaling, _variants,
                 _writes, _shortperiod, _idle, _fullstack, _fairness, _profile):
        lines += part(bench)
    if FINDINGS.exists() and bench.options.out_md.name == "benchmarks.md" and "docs" in bench.options.out_md.parts:
        lines += [FINDINGS.read_text().rstrip(), ""]
    bench.options.out_md.parent.mkdir(parents=True, exist_ok=True)
    bench.options.out_md.write_text("\n".join(lines))


def write_json(bench: Bench, path: Path) -> None:
    def default(value: Any) -> Any:
        return str(value)

    data = {"machine": bench.machine, "sections": [s.__dict__ for s in bench.sections], "run_id": bench.names.run_id,
            **bench.results}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=default))


def write_chart(bench: Bench) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = bench.results
    fig, axes = plt.subplots(3, 3, figsize=(17, 13))
    fig.suptitle(f"Distributed Job Runner benchmarks — {bench.machine['nproc']} cores, {bench.machine['cpu_model']}, "
                 f"Cassandra {bench.machine['cassandra']}, Kafka {bench.machine['kafka']} — "
                 f"{bench.results['started']} (median, bars: min-max)", fontsize=11)

    def bars(ax: Any, labels: list[str], series: list[list[float]], title: str, unit: str, colors: list[str]) -> None:
        meds = [median(s) if s else 0 for s in series]
        lows = [m - min(s) if s else 0 for m, s in zip(meds, series, strict=True)]
        highs = [max(s) - m if s else 0 for m, s in zip(meds, series, strict=True)]
        ax.bar(range(len(labels)), meds, yerr=[lows, highs], capsize=4, color=colors)
        ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(unit)
        for i, m in enumerate(meds):
            ax.annotate(f"{m:,.0f}", (i, m), ha="center", va="bottom", fontsize=8)

    ax = axes[0][0]
    if "drain" in r and "ceilings" in r:
        c = r["ceilings"]
        bars(ax, ["drain (scan)", "combined ceiling", "shared ceiling", "implied ceiling", "reads/s ÷ 1",
                  "writes/s ÷ 1.5", "produce/s ÷ 1"],
             [[d["rate"] for d in r["drain"]], [x["combined"]["rate"] for x in c], [shared_ceiling(x) for x in c],
              [implied_ceiling(x)[0] for x in c], [x["reads"]["rate"] for x in c],
              [x["writes"]["rate"] / 1.5 for x in c], [x["produce"]["rate"] for x in c]],
             "Drain vs ceilings (executions/s)", "executions/s",
             ["#d62728", "#1f77b4", "#1f77b4", "#aec7e8", "#c7c7c7", "#c7c7c7", "#c7c7c7"])
    else:
        ax.set_axis_off()

    ax = axes[0][1]
    if "scaling" in r:
        segs = list(r["scaling"])
        series = [[x["rate"] for x in r["scaling"][s]] for s in segs]
        meds = [median(s) for s in series]
        ax.errorbar(segs, meds, yerr=[[m - min(s) for m, s in zip(meds, series, strict=True)],
                                      [max(s) - m for m, s in zip(meds, series, strict=True)]],
                    marker="o", capsize=4, label="drain")
        ax.plot(segs, [meds[0] * s for s in segs], "--", color="grey", label="linear from 1 segment")
        if "ceilings" in r:
            ax.axhline(median([x["combined"]["rate"] for x in r["ceilings"]]), color="#1f77b4", ls=":",
                       label="combined ceiling")
        ax.set_xscale("log", base=2)
        ax.set_xticks(segs, [str(s) for s in segs])
        ax.set_ylim(0, max(max(max(s) for s in series), meds[0]) * 1.6)
        ax.set_title("Scaling: drain rate vs segments", fontsize=10)
        ax.set_xlabel("segments")
        ax.set_ylabel("executions/s")
        ax.legend(fontsize=8)
    else:
        ax.set_axis_off()

    ax = axes[0][2]
    if "lateness" in r:
        keys = ["p50", "p95", "p99", "max"]
        ct = [[run["create_time"][k] for run in r["lateness"]["runs"] if run.get("create_time")] for k in keys]
        ack = [[run["ack"][k] for run in r["lateness"]["runs"]] for k in keys]
        x = list(range(len(keys)))
        for offset, series, label in ((-0.2, ct, "CreateTime - due"), (0.2, ack, "ack - due")):
            meds = [median(s) for s in series]
            ax.bar([i + offset for i in x], meds, width=0.4, label=label,
                   yerr=[[m - min(s) for m, s in zip(meds, series, strict=True)],
                         [max(s) - m for m, s in zip(meds, series, strict=True)]], capsize=3)
        ax.set_xticks(x, keys)
        ax.set_yscale("log")
        ax.set_title("Lateness (ms), 10k/minute at second precision", fontsize=10)
        ax.set_ylabel("ms")
        ax.legend(fontsize=8)
    else:
        ax.set_axis_off()

    ax = axes[1][0]
    if "submit" in r:
        labels = list(r["submit"])
        series = [[x["rate"] for x in r["submit"][m]] for m in labels]
        colors = ["#2ca02c"] * len(labels)
        if "ceilings" in r:
            labels.append("create-batch ceiling")
            series.append([x["create_batches"]["rate"] for x in r["ceilings"]])
            colors.append("#1f77b4")
        bars(ax, labels, series, "Submit (jobs accepted/s)", "jobs/s", colors)
    else:
        ax.set_axis_off()

    ax = axes[1][1]
    if "memory" in r:
        sizes = [int(s) for s in r["memory"]]
        peak = [median([m["peak_hwm_mib"] for m in r["memory"][s]]) for s in r["memory"]]
        base = [median([m["baseline_hwm_mib"] for m in r["memory"][s]]) for s in r["memory"]]
        ax.plot(sizes, peak, marker="o", label="peak (VmHWM)")
        ax.plot(sizes, base, marker="s", ls="--", label="baseline (connected, idle)")
        ax.set_xscale("log")
        ax.set_ylim(0, max(peak) * 1.3)
        ax.set_title("Scan peak RSS vs partition size", fontsize=10)
        ax.set_xlabel("executions in the partition")
        ax.set_ylabel("MiB")
        ax.legend(fontsize=8)
    else:
        ax.set_axis_off()

    ax = axes[1][2]
    if "drain" in r:
        labels = list(r["drain"][0]["phases"])
        shares = [median([d["phases"][label] for d in r["drain"]]) * 100 for label in labels]
        ax.barh(range(len(labels)), shares, color="#9467bd")
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("% of the scans' wall time until the last ack")
        ax.set_title("Drain: where the scan's time goes", fontsize=10)
        for i, s in enumerate(shares):
            ax.annotate(f"{s:.0f} %", (s, i), va="center", fontsize=8)
    else:
        ax.set_axis_off()

    ax = axes[2][0]
    if "variants" in r:
        names = list(r["variants"])
        bars(ax, names, [[x["rate"] for x in r["variants"][n]] for n in names],
             "Variants of the scan: before and what-if (executions/s)", "executions/s",
             ["#7f7f7f" if n == "baseline" else "#ff7f0e" for n in names])
    else:
        ax.set_axis_off()

    ax = axes[2][1]
    if "ceilings" in r:
        kinds = ["writes", "reads", "batches", "create_batches", "produce", "combined"]
        bars(ax, ["writes", "reads", "batches", "create batches", "produce", "combined exec."],
             [[x[k]["rate"] for x in r["ceilings"]] for k in kinds], "Raw ceilings (operations/s)", "ops/s",
             ["#1f77b4"] * len(kinds))
    else:
        ax.set_axis_off()

    ax = axes[2][2]
    if "drain" in r:
        cpu = r["drain"][0]["cpu"]
        parts = {"Cassandra": cpu.get("cassandra_cores", 0.0), "Kafka": cpu.get("kafka_cores", 0.0),
                 "moto": cpu.get("moto_cores", 0.0),
                 "bench workers (scans)": sum(v for k, v in cpu.items() if k.startswith("worker"))}
        parts["everything else"] = max(cpu.get("machine_cores", 0.0) - sum(parts.values()), 0.0)
        left = 0.0
        for (label, value), color in zip(parts.items(), ["#1f77b4", "#2ca02c", "#bcbd22", "#d62728", "#c7c7c7"],
                                         strict=True):
            ax.barh([0], [value], left=left, label=f"{label} {value:.2f}", color=color)
            left += value
        ax.set_xlim(0, bench.machine["nproc"] or 2)
        ax.set_yticks([])
        ax.set_xlabel("CPU cores busy during the first drain (until the last ack)")
        ax.set_title("Who used the CPU during the drain", fontsize=10)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2)
    else:
        ax.set_axis_off()

    fig.tight_layout(rect=(0, 0, 1, 0.96))
    bench.options.out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(bench.options.out_png, dpi=110)
    plt.close(fig)
