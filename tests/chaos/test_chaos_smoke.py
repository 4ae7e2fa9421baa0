"""The fault suite, small: kills, broker and database restarts, silent and duplicate ticks; nothing lost.

It runs as ``python -m chaos --small --keep-servers`` in a process of its own, on the fault suites' servers
(other ports, their own DEVSTACK_HOME), because it kills and restarts them; the operations suite's small run
reuses them after it (``conftest.fault_servers`` starts and stops them once).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e


def test_no_execution_is_lost_under_faults(tmp_path: Path, fault_servers: dict[str, str]) -> None:
    report_path = tmp_path / "chaos.json"
    completed = subprocess.run(
        [sys.executable, "-m", "chaos", "--small", "--keep-servers", "--json", str(report_path)],
        cwd=ROOT, env=fault_servers, capture_output=True, text=True, timeout=1500,
    )
    assert report_path.exists(), completed.stdout[-3000:] + completed.stderr[-3000:]
    report = json.loads(report_path.read_text())
    print(json.dumps({k: v for k, v in report.items() if k != "plan"}, indent=2))
    assert report["expected"] >= 400
    assert report["lost"] == 0, report["lost_ids"]
    assert report["published"] == report["expected"]
    kinds = {fault["kind"] for fault in report["faults"]}
    assert kinds >= {"kill -9 scan", "Kafka broker restart", "Cassandra restart", "no tick", "duplicate tick"}
    assert report["rejected_503"] > 0  # the API refused while Cassandra was down, and said so
    assert completed.returncode == 0
