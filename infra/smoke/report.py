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
        """One line per step, as it ends (steps of a phase end in any order, from their own threads)."""
        line = Text.assemble(f"{result.at_s:6.1f} s  ", mark(result), "  ", (f"{result.name:<34}", "bold"),
                             f" {result.detail}", (f"  ({result.took_s:.1f} s)", "dim"))
        with self._lock:
            self.console.print(line)

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
