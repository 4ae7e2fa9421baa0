"""Writing ``docs/benchmarks.md`` and ``docs/benchmarks.png`` from the results of one run.

Every repeated figure is written as ``median (min-max, n=runs)``. The hand-written findings
(``bench/findings.md``) are appended verbatim: they interpret one particular run and say which.

The parts: ``headline`` (the machine and the headline figures), ``speed`` (sections 1-7), ``counts``
(sections 8-10), ``system`` (sections 11-12 and the profile), ``deliveries`` (section 13), ``markdown`` (the
page, the JSON, the chart link), ``chart`` (the nine panels) and ``common`` (what they share).
"""

from __future__ import annotations

from bench.report.chart import write_chart
from bench.report.markdown import chart_link, write_json, write_markdown

__all__ = ["chart_link", "write_chart", "write_json", "write_markdown"]
