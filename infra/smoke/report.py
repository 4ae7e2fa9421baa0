"""What the smoke test prints: a line per step as it ends (when, how long, what it saw), then a summary."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console

    from infra.smoke.runner import StepResult


def mark(result: StepResult) -> Text:
    if result.ok:
        return Text("PASS", style="bold green")
    return Text("FAIL" if result.ran else "SKIP", style="bold red" if result.ran else "yellow")


class Report:
    def __init__(self, console: Console) -> None:
        self.console = console
        self._lock = threading.Lock()

    def begin(self, where: str, tag: str) -> None:
        self.console.print(Text.assemble(("smoke test of ", "bold"), where, ("  jobs tagged ", "dim"), tag))

    def step(self, result: StepResult) -> None:
        """One row per step, as it ends (steps of a phase end in any order, from their own threads): when it
        ended, what it saw (wrapped in its own column), how long it took."""
        row = Table.grid(padding=(0, 2), expand=True)
        row.add_column(justify="right", min_width=7, no_wrap=True)
        row.add_column(no_wrap=True)
        row.add_column(min_width=32, no_wrap=True)
        row.add_column(ratio=1)
        row.add_column(justify="right", no_wrap=True, style="dim")
        row.add_row(f"{result.at_s:.1f} s", mark(result), Text(result.name, style="bold"), Text(result.detail),
                    f"took {result.took_s:.1f} s")
        with self._lock:
            self.console.print(row)

    def summary(self, results: Sequence[StepResult], total_s: float) -> None:
        table = Table(show_edge=False, pad_edge=False, box=None)
        for column, justify in (("STEP", "left"), ("RESULT", "left"), ("ENDED AT", "right"), ("TOOK", "right")):
            table.add_column(column, justify=justify)  # type: ignore[arg-type]
        for result in results:
            table.add_row(result.name, mark(result), f"{result.at_s:.1f} s", f"{result.took_s:.1f} s")
        self.console.print()
        self.console.print(table)
        failed = [r.name for r in results if not r.ok]
        if failed:
            self.console.print(Text(f"smoke test FAILED: {len(failed)} of {len(results)} steps in {total_s:.1f} s "
                                    f"({', '.join(failed)})", style="bold red"))
        else:
            self.console.print(Text(f"smoke test passed: {len(results)} steps in {total_s:.1f} s", style="bold green"))
