"""The complexity gate: ``make lint`` refuses a function with more than 12 paths, anywhere in the tree."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_gate_is_declared_for_the_whole_tree() -> None:
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert "C90" in lint["select"]
    assert lint["mccabe"]["max-complexity"] <= 12


def test_no_function_has_more_than_twelve_paths() -> None:
    ruff = Path(sys.executable).with_name("ruff")
    checked = subprocess.run([str(ruff), "check", "--select", "C901", "--output-format", "concise", str(ROOT)],
                             cwd=ROOT, capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout
