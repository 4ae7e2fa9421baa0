"""The scan's loop and its per-group steps stay small enough to read (cyclomatic complexity, issue 17)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCAN = Path(__file__).resolve().parents[4] / "layers" / "jobrunner" / "services" / "scan"
MAX_COMPLEXITY = 12


def test_no_function_of_the_scan_is_more_complex_than_the_bound() -> None:
    found = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "C901", "--isolated", "--output-format", "json",
         "--config", f"lint.mccabe.max-complexity={MAX_COMPLEXITY}", str(SCAN)],
        capture_output=True, text=True, check=False,
    )
    assert [finding["message"] for finding in json.loads(found.stdout)] == []
