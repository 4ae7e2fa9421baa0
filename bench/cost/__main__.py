"""``python -m bench.cost``: the cost model's tables for a stage (issue #33).

Examples::

    python -m bench.cost                                # the dev stage of cdk.json, bench/cost_inputs.json
    python -m bench.cost --stage prod --measured /tmp/inputs.json
    python -m bench.cost --detail 50000000              # one load's lines with how each is counted
    python -m bench.cost --write-docs                   # regenerate docs/scaling.md's tables
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table as RichTable

from bench.cost.inputs import INPUTS_PATH, load
from bench.cost.model import Load, StageConfig, monthly_lines, stages_of
from bench.cost.prices import PRICES
from bench.cost.tables import Table, doc_tables, lines_table, render_docs

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "scaling.md"

app = typer.Typer(add_completion=False, help=__doc__, rich_markup_mode=None)


def _rich(table: Table) -> RichTable:
    out = RichTable(title=table.title, show_lines=False)
    for index, name in enumerate(table.header):
        out.add_column(name, justify="left" if index == 0 else "right", overflow="fold")
    for index, row in enumerate(table.rows):
        bold = table.bold_from is not None and index >= table.bold_from
        out.add_row(*row, style="bold" if bold else None)
    return out


@app.command()
def main(
    stage: Annotated[str | None, typer.Option(help="the stage in cdk.json (default: its context's stage)")] = None,
    measured: Annotated[Path, typer.Option(help="the measured inputs (JSON)")] = INPUTS_PATH,
    cdk_json: Annotated[Path, typer.Option(help="the CDK app's cdk.json")] = ROOT / "cdk.json",
    detail: Annotated[float | None, typer.Option(help="also print this load's lines (executions a day)")] = None,
    write_docs: Annotated[bool, typer.Option("--write-docs", help="regenerate docs/scaling.md's tables")] = False,
    docs: Annotated[Path, typer.Option(help="the page holding the tables")] = DOCS,
) -> None:
    config = StageConfig.from_cdk_json(cdk_json, stage)
    inputs = load(measured)
    tables = doc_tables(config, inputs, PRICES, stages_of(cdk_json))
    if write_docs:
        text = docs.read_text()
        updated = render_docs(text, tables)
        docs.write_text(updated)
        typer.echo(f"{docs}: {'rewritten' if updated != text else 'already up to date'}")
        return
    console = Console(width=max(Console().width, 160))
    for table in tables[1:]:
        console.print(_rich(table))
    if detail is not None:
        for capacity in ("on-demand", "provisioned"):
            lines = monthly_lines(config, inputs, PRICES, Load(executions_per_day=detail, capacity=capacity))
            console.print(_rich(lines_table(lines, detail)))
    derived = [name for name, figure in inputs if figure.kind == "derived"]
    console.print(f"{len(derived)} of {len(list(inputs))} inputs derived, not measured: {', '.join(derived)}")
    console.print("Prices: bench/cost/prices.py (each with its source and the date checked).")


if __name__ == "__main__":
    app()
