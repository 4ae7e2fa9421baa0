"""Medians, spreads and percentiles, and how they are written in the report."""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence


def median(values: Sequence[float]) -> float:
    clean = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.median(clean) if clean else float("nan")


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def fmt(value: float, digits: int | None = None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if digits is None:
        magnitude = abs(value)
        digits = 0 if magnitude >= 100 else 1 if magnitude >= 10 else 2 if magnitude >= 1 else 3
    text = f"{value:,.{digits}f}"
    return text.replace(",", "\u202f")  # thin no-break space as the thousands separator


def spread(values: Sequence[float], digits: int | None = None, unit: str = "") -> str:
    """``median (min-max, n=…)``: the way every repeated figure is reported."""
    clean = [v for v in values if v is not None and not math.isnan(v)]
    if not clean:
        return "n/a"
    text = f"{fmt(median(clean), digits)}{unit}"
    if len(clean) > 1:
        text += f" ({fmt(min(clean), digits)}-{fmt(max(clean), digits)}, n={len(clean)})"
    return text


def ratio(numerator: float, denominator: float) -> float:
    if not denominator or math.isnan(denominator) or numerator is None or math.isnan(numerator):
        return float("nan")
    return numerator / denominator


def pct(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value * 100:.0f} %"
