"""The benchmark report's links (bench/report/markdown.py), without servers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.report import chart_link

if TYPE_CHECKING:
    from pathlib import Path


def test_the_report_links_the_chart_it_was_given_not_a_fixed_name(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    assert chart_link(docs / "benchmarks-2026-11-26.md", docs / "benchmarks-2026-11-26.png") == (
        "[benchmarks-2026-11-26.png](benchmarks-2026-11-26.png)")
    assert chart_link(docs / "benchmarks.md", tmp_path / "charts" / "b.png") == "[b.png](../charts/b.png)"
