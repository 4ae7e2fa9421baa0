"""The report's chart: nine panels, each drawn from one or two sections' results, or left blank when the run
did not measure them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.ceilings import implied_ceiling, shared_ceiling
from bench.stats import median

if TYPE_CHECKING:
    from collections.abc import Callable

    from bench.context import Bench


def _bars(ax: Any, labels: list[str], series: list[list[float]], title: str, unit: str, colors: list[str]) -> None:
    """One bar per series at its median, with whiskers to its min and max."""
    meds = [median(s) if s else 0 for s in series]
    lows = [m - min(s) if s else 0 for m, s in zip(meds, series, strict=True)]
    highs = [max(s) - m if s else 0 for m, s in zip(meds, series, strict=True)]
    ax.bar(range(len(labels)), meds, yerr=[lows, highs], capsize=4, color=colors)
    ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right", fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(unit)
    for i, m in enumerate(meds):
        ax.annotate(f"{m:,.0f}", (i, m), ha="center", va="bottom", fontsize=8)


def _spans(meds: list[float], series: list[list[float]]) -> list[list[float]]:
    """Error bars from each median down to its series' min and up to its max."""
    return [[m - min(s) for m, s in zip(meds, series, strict=True)],
            [max(s) - m for m, s in zip(meds, series, strict=True)]]


def _drain_vs_ceilings(ax: Any, bench: Bench) -> None:
    r = bench.results
    c = r["ceilings"]
    _bars(ax, ["drain (scan)", "combined ceiling", "shared ceiling", "implied ceiling", "reads/s ÷ 1",
               "writes/s ÷ 1.5", "produce/s ÷ 1"],
          [[d["rate"] for d in r["drain"]], [x["combined"]["rate"] for x in c], [shared_ceiling(x) for x in c],
           [implied_ceiling(x)[0] for x in c], [x["reads"]["rate"] for x in c],
           [x["writes"]["rate"] / 1.5 for x in c], [x["produce"]["rate"] for x in c]],
          "Drain vs ceilings (executions/s)", "executions/s",
          ["#d62728", "#1f77b4", "#1f77b4", "#aec7e8", "#c7c7c7", "#c7c7c7", "#c7c7c7"])


def _scaling(ax: Any, bench: Bench) -> None:
    r = bench.results
    segs = list(r["scaling"])
    series = [[x["rate"] for x in r["scaling"][s]] for s in segs]
    meds = [median(s) for s in series]
    ax.errorbar(segs, meds, yerr=_spans(meds, series), marker="o", capsize=4, label="drain")
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


def _lateness(ax: Any, bench: Bench) -> None:
    runs = bench.results["lateness"]["runs"]
    keys = ["p50", "p95", "p99", "max"]
    ct = [[run["create_time"][k] for run in runs if run.get("create_time")] for k in keys]
    ack = [[run["ack"][k] for run in runs] for k in keys]
    x = list(range(len(keys)))
    for offset, series, label in ((-0.2, ct, "CreateTime - due"), (0.2, ack, "ack - due")):
        meds = [median(s) for s in series]
        ax.bar([i + offset for i in x], meds, width=0.4, label=label, yerr=_spans(meds, series), capsize=3)
    ax.set_xticks(x, keys)
    ax.set_yscale("log")
    ax.set_title("Lateness (ms), 10k/minute at second precision", fontsize=10)
    ax.set_ylabel("ms")
    ax.legend(fontsize=8)


def _submit(ax: Any, bench: Bench) -> None:
    r = bench.results
    labels = list(r["submit"])
    series = [[x["rate"] for x in r["submit"][m]] for m in labels]
    colors = ["#2ca02c"] * len(labels)
    if "ceilings" in r:
        labels.append("create-batch ceiling")
        series.append([x["create_batches"]["rate"] for x in r["ceilings"]])
        colors.append("#1f77b4")
    _bars(ax, labels, series, "Submit (jobs accepted/s)", "jobs/s", colors)


def _memory(ax: Any, bench: Bench) -> None:
    memory = bench.results["memory"]
    sizes = [int(s) for s in memory]
    peak = [median([m["peak_hwm_mib"] for m in memory[s]]) for s in memory]
    base = [median([m["baseline_hwm_mib"] for m in memory[s]]) for s in memory]
    ax.plot(sizes, peak, marker="o", label="peak (VmHWM)")
    ax.plot(sizes, base, marker="s", ls="--", label="baseline (connected, idle)")
    ax.set_xscale("log")
    ax.set_ylim(0, max(peak) * 1.3)
    ax.set_title("Scan peak RSS vs partition size", fontsize=10)
    ax.set_xlabel("executions in the partition")
    ax.set_ylabel("MiB")
    ax.legend(fontsize=8)


def _drain_phases(ax: Any, bench: Bench) -> None:
    drain = bench.results["drain"]
    labels = list(drain[0]["phases"])
    shares = [median([d["phases"][label] for d in drain]) * 100 for label in labels]
    ax.barh(range(len(labels)), shares, color="#9467bd")
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("% of the scans' wall time until the last ack")
    ax.set_title("Drain: where the scan's time goes", fontsize=10)
    for i, s in enumerate(shares):
        ax.annotate(f"{s:.0f} %", (s, i), va="center", fontsize=8)


def _variants(ax: Any, bench: Bench) -> None:
    variants = bench.results["variants"]
    names = list(variants)
    _bars(ax, names, [[x["rate"] for x in variants[n]] for n in names],
          "Variants of the scan: before and what-if (executions/s)", "executions/s",
          ["#7f7f7f" if n == "baseline" else "#ff7f0e" for n in names])


def _ceilings(ax: Any, bench: Bench) -> None:
    kinds = ["writes", "reads", "batches", "create_batches", "produce", "combined"]
    _bars(ax, ["writes", "reads", "batches", "create batches", "produce", "combined exec."],
          [[x[k]["rate"] for x in bench.results["ceilings"]] for k in kinds], "Raw ceilings (operations/s)", "ops/s",
          ["#1f77b4"] * len(kinds))


def _drain_cpu(ax: Any, bench: Bench) -> None:
    cpu = bench.results["drain"][0]["cpu"]
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


#: Each panel's place in the 3 x 3 grid, the results it needs (all of them, or the panel stays blank), and
#: what draws it.
PANELS: tuple[tuple[int, int, tuple[str, ...], Callable[[Any, Bench], None]], ...] = (
    (0, 0, ("drain", "ceilings"), _drain_vs_ceilings),
    (0, 1, ("scaling",), _scaling),
    (0, 2, ("lateness",), _lateness),
    (1, 0, ("submit",), _submit),
    (1, 1, ("memory",), _memory),
    (1, 2, ("drain",), _drain_phases),
    (2, 0, ("variants",), _variants),
    (2, 1, ("ceilings",), _ceilings),
    (2, 2, ("drain",), _drain_cpu),
)


def write_chart(bench: Bench) -> None:
    import matplotlib  # here, not at the top: the backend must be chosen before pyplot is imported

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 3, figsize=(17, 13))
    fig.suptitle(f"Distributed Job Runner benchmarks — {bench.machine['nproc']} cores, {bench.machine['cpu_model']}, "
                 f"Cassandra {bench.machine['cassandra']}, Kafka {bench.machine['kafka']} — "
                 f"{bench.results['started']} (median, bars: min-max)", fontsize=11)
    for row, column, needs, draw in PANELS:
        if all(key in bench.results for key in needs):
            draw(axes[row][column], bench)
        else:
            axes[row][column].set_axis_off()
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    bench.options.out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(bench.options.out_png, dpi=110)
    plt.close(fig)
