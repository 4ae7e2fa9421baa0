"""The report's opening parts: the machine the run had, and the headline figures of every section with their
ceilings."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from bench.ceilings import implied_ceiling, shared_ceiling
from bench.report.common import ceiling_rates, paired_ratios, table
from bench.report.deliveries import deliveries_rows
from bench.stats import fmt, median, pct, ratio, spread

if TYPE_CHECKING:
    from bench.context import Bench


def machine_section(bench: Bench) -> list[str]:
    m = bench.machine
    lines = ["## Machine", ""]
    lines += table(["", ""], [
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
    lines += table(["section", "load avg at start", "load avg at end", "took"], [
        [s.name, fmt(s.load_start, 2), fmt(s.load_end, 2), f"{s.seconds:.0f} s"] for s in bench.sections
    ])
    return lines


def _drain_rows(bench: Bench) -> list[list[str]]:
    r = bench.results
    if "drain" not in r:
        return []
    combined = ceiling_rates(bench, "combined")
    implied = [implied_ceiling(run)[0] for run in r.get("ceilings", [])]
    shared = [shared_ceiling(run) for run in r.get("ceilings", [])]
    rates = [d["rate"] for d in r["drain"]]
    d0 = r["drain"][0]
    return [[f"drain: {d0['executions']:,} executions, {d0['segments']} segments",
             spread(rates, unit="/s"),
             f"combined {spread(combined, unit='/s')}; shared {spread(shared, unit='/s')}; "
             f"implied {spread(implied, unit='/s')}",
             f"{pct(median(paired_ratios(rates, combined)))} of combined; "
             f"{pct(median(paired_ratios(rates, shared)))} of shared; "
             f"{pct(median(paired_ratios(rates, implied)))} of implied"],
            ["drain: minute start → last Kafka ack", spread([d["drain_s"] for d in r["drain"]], 1, " s"), "", ""]]


def _lateness_rows(bench: Bench) -> list[list[str]]:
    r = bench.results
    if "lateness" not in r:
        return []
    floors = [run["floor"]["to_ack_ms"] for run in r.get("ceilings", [])]
    floor = median(floors) if floors else math.nan
    rows = []
    for key in ("p50", "p95", "p99", "max"):
        values = [run["create_time"][key] for run in r["lateness"]["runs"] if run.get("create_time")]
        rows.append([f"lateness {key} (CreateTime - due)", spread(values, 0, " ms"),
                     f"floor {spread(floors, 1, ' ms')}" if key == "p50" else "",
                     f"{fmt(ratio(median(values), floor), 1)}x floor" if key == "p50" else ""])
    return rows


def _submit_rows(bench: Bench) -> list[list[str]]:
    create = ceiling_rates(bench, "create_batches")
    rows = []
    for mode, runs in bench.results.get("submit", {}).items():
        rates = [run["rate"] for run in runs]
        rows.append([f"submit, {mode}", spread(rates, unit="/s"), f"create batch {spread(create, unit='/s')}",
                     pct(median(paired_ratios(rates, create)))])
    return rows


def _memory_rows(bench: Bench) -> list[list[str]]:
    return [[f"scan peak RSS, {int(size):,}-execution partition",
             spread([m["peak_hwm_mib"] for m in runs], 0, " MiB"),
             f"baseline {spread([m['baseline_hwm_mib'] for m in runs], 0, ' MiB')}", ""]
            for size, runs in bench.results.get("memory", {}).items()]


def _scaling_rows(bench: Bench) -> list[list[str]]:
    combined = ceiling_rates(bench, "combined")
    rows = []
    for segments, runs in bench.results.get("scaling", {}).items():
        rates = [run["rate"] for run in runs]
        rows.append([f"scaling: {segments} segment(s)", spread(rates, unit="/s"), "combined (16 streams)",
                     pct(median(paired_ratios(rates, combined)))])
    return rows


def _fullstack_rows(bench: Bench) -> list[list[str]]:
    fs = bench.results.get("fullstack", {}).get("runs")
    if not fs:
        return []
    drain = [run["drain_rate"] for run in fs]
    produce, raw_writes = ceiling_rates(bench, "produce"), ceiling_rates(bench, "writes")
    return [[f"full stack: {fs[0]['requested']:,} executions due at one second, HTTP to last publish",
             spread(drain, unit="/s"),
             f"produce {spread(produce, unit='/s')}; writes {spread(raw_writes, unit='/s')}" if produce else "",
             f"{pct(median(paired_ratios(drain, produce)))} of produce" if produce else ""],
            ["full stack: to last result (end to end)", spread([run["end_to_end_rate"] for run in fs], unit="/s"),
             "", ""]]


def _fairness_rows(bench: Bench) -> list[list[str]]:
    fair = bench.results.get("fairness", {})
    if not fair.get("runs") or fair.get("clock") == "skip":  # untimed (the smoke test's)
        return []
    light = fair["tenants"]["light"]
    alone = [run["unloaded"]["lateness_ms"][light]["p99"] for run in fair["runs"]]
    return [[f"fairness: tenant B's lateness p99 beside A's {fair['heavy']:,} due at the same second",
             spread([run["loaded"]["lateness_ms"][light]["p99"] for run in fair["runs"]], 0, " ms"),
             f"B alone {spread(alone, 0, ' ms')}",
             f"difference {spread([run['light_p99_delta_ms'] for run in fair['runs']], 0, ' ms')} "
             "(goal: within 1 s)"]]


def _writes_rows(bench: Bench) -> list[list[str]]:
    if "writes" not in bench.results:
        return []
    w = bench.results["writes"]
    return [["writes: rows per execution, counted by Cassandra (scan + results)",
             spread([run["total_per_execution"] for run in w], 2),
             f"model {spread([sum(run['expected'].values()) / max(run['executions'], 1) for run in w], 2)}",
             f"{pct(w[0]['failures_share'])} of first attempts failed and retried"]]


#: The headline's rows, section by section, in the order they appear.
HEADLINE_ROWS = (_drain_rows, _lateness_rows, _submit_rows, _memory_rows, _scaling_rows, _fullstack_rows,
                 _fairness_rows, deliveries_rows, _writes_rows)


def headline_section(bench: Bench) -> list[str]:
    rows = [row for rows_of in HEADLINE_ROWS for row in rows_of(bench)]
    lines = ["## Headline figures", "",
             "Ratios are to the ceiling the work implies, measured in the same run (section 4): *combined* runs",
             "exactly an execution's raw operations (1 read, its single-row writes, 1 produce) in the scan's group",
             "structure without scheduler logic; *implied* is min(reads/s ÷ 1, writes/s ÷ 1.5, produce/s ÷ 1)",
             "from the separate raw ceilings, which each had the whole machine to themselves, as if the three",
             "could run side by side at full speed; *shared* is 1 ÷ (1 ÷ reads/s + 1.5 ÷ writes/s + 1 ÷ produce/s),",
             "the same raw rates with their costs added up, because here Cassandra, Kafka and the scans share",
             "the same two cores (on AWS they do not: see scaling.md).", ""]
    return lines + table(["figure", "median (min-max, n)", "ceiling", "ratio"], rows)
