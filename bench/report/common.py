"""What the report's parts share: a Markdown table, the ceilings of a run, a figure over its ceiling run by
run, and the CPU each process used."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from bench.stats import fmt, median, ratio

if TYPE_CHECKING:
    from bench.context import Bench


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return [*out, ""]


def ceiling_rates(bench: Bench, kind: str) -> list[float]:
    return [run[kind]["rate"] for run in bench.results.get("ceilings", [])]


def paired_ratios(figures: list[float], ceilings: list[float]) -> list[float]:
    """Run i's figure over run i's ceiling (the ceilings ran in the same run, next to the figure)."""
    if not figures or not ceilings:
        return []
    if len(ceilings) == len(figures):
        return [ratio(f, c) for f, c in zip(figures, ceilings, strict=True)]
    return [ratio(f, median(ceilings)) for f in figures]


def cpu_text(cpu: dict[str, float]) -> str:
    parts = [f"machine {fmt(cpu.get('machine_cores', math.nan), 2)}"]
    for name in ("cassandra", "kafka", "moto"):
        if f"{name}_cores" in cpu:
            parts.append(f"{name} {fmt(cpu[f'{name}_cores'], 2)}")
    workers = sum(v for k, v in cpu.items() if k.startswith("worker") and k.endswith("_cores"))
    parts.append(f"bench workers {fmt(workers, 2)}")
    return ", ".join(parts)
