"""Sections 1 to 7 of the report: how fast the scan drains a minute and how late it publishes, how fast the API
accepts jobs, the raw ceilings, the scan's memory, its scaling with segments and the variants of it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from bench.ceilings import implied_ceiling, shared_ceiling
from bench.report.common import ceiling_rates, cpu_text, paired_ratios, table
from bench.stats import fmt, median, pct, ratio, spread
from bench.variants import VARIANTS

if TYPE_CHECKING:
    from bench.context import Bench


def drain_section(bench: Bench) -> list[str]:
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
        ["CPU cores busy until the last ack (first run)", cpu_text(runs[0]["cpu"])],
        ["CPU per execution: scan processes (all their threads)",
         spread([d["process_cpu_s"] / max(d["published"], 1) * 1000 for d in runs], 2, " ms")],
        ["CPU per execution: Cassandra",
         spread([d["cpu"].get("cassandra_cores", math.nan) * d["drain_s"] / max(d["published"], 1) * 1000
                 for d in runs], 2, " ms")],
        ["CPU per execution: Kafka",
         spread([d["cpu"].get("kafka_cores", math.nan) * d["drain_s"] / max(d["published"], 1) * 1000
                 for d in runs], 2, " ms")],
    ]
    lines += table(["", ""], rows)
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
    lines += table(["per execution", "count"], rows)
    lines += ["**Where the scans' wall time goes** until their last ack (sum over segments of the time spent in",
              "each port call, over the sum of the segments' drain times; median over runs):", ""]
    labels = list(runs[0]["phases"])
    lines += table(["phase", "share"], [[label, pct(median([d["phases"][label] for d in runs]))] for label in labels])
    return lines


def lateness_section(bench: Bench) -> list[str]:
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
    lines += table(["minute (UTC)", "published", "CreateTime - due: p50 / p95 / p99 / max ms",
                     "ack - due: p50 / p95 / p99 / max ms"], rows)
    if floors:
        lines += ["Floor (measured with the ceilings): one execution alone (read its job, start batch, produce",
                  f"and flush) takes {spread([f['to_ack_ms'] for f in floors], 1, ' ms')} to its ack (median of "
                  f"{floors[0]['samples']} in a row; p95 {spread([f['to_ack_p95_ms'] for f in floors], 1, ' ms')});",
                  f"with the complete batch {spread([f['total_ms'] for f in floors], 1, ' ms')}.", ""]
    return lines


def submit_section(bench: Bench) -> list[str]:
    sub = bench.results.get("submit")
    if not sub:
        return []
    create = ceiling_rates(bench, "create_batches")
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
                     pct(median(paired_ratios(rates, create))),
                     ", ".join(str(s) for run in runs for s in run["other_statuses"]) or "none"])
    return lines + table(["mode", "requests/run, of jobs each", "jobs accepted/s", "latency p50", "latency p95",
                           "of create-batch ceiling", "non-201"], rows)


def ceilings_section(bench: Bench) -> list[str]:
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
    rows = [[label, spread([run[kind]["rate"] for run in runs], unit="/s"), cpu_text(runs[0][kind]["cpu"]),
             ", ".join(str(run[kind].get("retried", 0)) for run in runs)]
            for kind, label in names.items()]
    implied_by = {implied_ceiling(run)[1] for run in runs}
    rows.append([f"implied: min over resources (bound by {', '.join(sorted(implied_by))})",
                 spread([implied_ceiling(run)[0] for run in runs], unit="/s"), "", ""])
    rows.append(["shared: 1 ÷ (1 ÷ reads/s + 1.5 ÷ writes/s + 1 ÷ produce/s)",
                 spread([shared_ceiling(run) for run in runs], unit="/s"), "", ""])
    return lines + table(["ceiling", "median (min-max, n)", "CPU cores busy (first run)",
                           "statements retried after a client timeout, per run"], rows)


def memory_section(bench: Bench) -> list[str]:
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
    return lines + table(["executions in the partition", "baseline", "peak", "added by the scan",
                           "added per execution"], rows)


def variants_section(bench: Bench) -> list[str]:
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
    return lines + table(["variant", "change", "executions/s", "vs baseline", "CQL requests/execution",
                           "published"], rows)


def scaling_section(bench: Bench) -> list[str]:
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
                     cpu_text(runs[0]["cpu"])])
    return lines + table(["segments", "processes", "executions/s", "speed-up vs 1", "per segment",
                           "CPU cores busy (first run)"], rows)
