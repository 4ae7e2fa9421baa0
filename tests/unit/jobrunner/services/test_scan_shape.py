"""The scan stays small enough to read (issues 17 and 34): no function of it more complex than the bound, no
module of its package longer than ``MAX_LINES``, and no import cycle between its modules (the package is
layered bottom-up; a cycle is where its state starts to be shared by everything again)."""

from __future__ import annotations

import graphlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_pure_core import imported_modules, module_name

LAYERS = Path(__file__).resolve().parents[4] / "layers"
SCAN = LAYERS / "jobrunner" / "services" / "scan"
MAX_COMPLEXITY = 12
MAX_LINES = 400


def test_no_function_of_the_scan_is_more_complex_than_the_bound() -> None:
    found = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "C901", "--isolated", "--output-format", "json",
         "--config", f"lint.mccabe.max-complexity={MAX_COMPLEXITY}", str(SCAN)],
        capture_output=True, text=True, check=False,
    )
    assert [finding["message"] for finding in json.loads(found.stdout)] == []


def import_graph(package: Path, root: Path) -> dict[str, set[str]]:
    """Each module of ``package`` -> the modules of the same package it imports (type-only imports too)."""
    modules = {module_name(path, root): path for path in sorted(package.glob("*.py"))}
    return {name: {m for m in imported_modules(path, root) if m in modules and m != name}
            for name, path in modules.items()}


def cycle_in(graph: dict[str, set[str]]) -> list[str]:
    """The modules of one import cycle of ``graph`` (empty: none)."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        return list(error.args[1])
    return []


def test_the_scans_modules_import_each_other_in_no_cycle() -> None:
    graph = import_graph(SCAN, LAYERS)
    assert len(graph) > 5  # the package is found
    assert cycle_in(graph) == []


@pytest.mark.parametrize("path", sorted(SCAN.glob("*.py")), ids=lambda p: p.name)
def test_no_module_of_the_scan_is_longer_than_the_bound(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= MAX_LINES


def test_the_checker_finds_a_cycle_through_a_type_only_import(tmp_path: Path) -> None:
    package = tmp_path / "jobrunner" / "services" / "scan"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from jobrunner.services.scan.loop import run\n")
    (package / "loop.py").write_text("from jobrunner.services.scan.state import Part\n\ndef run() -> None: ...\n")
    (package / "state.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .loop import run\n\nclass Part: ...\n")
    graph = import_graph(package, tmp_path)
    assert sorted(set(cycle_in(graph))) == ["jobrunner.services.scan.loop", "jobrunner.services.scan.state"]
    (package / "state.py").write_text("class Part: ...\n")
    assert cycle_in(import_graph(package, tmp_path)) == []
