"""The fault suite, small: kills, broker and database restarts, silent and duplicate ticks; nothing lost.

It runs as ``python -m chaos --small --keep-servers`` in a process of its own, on the fault suites' servers
(other ports, their own DEVSTACK_HOME), because it kills and restarts them; the operations suite's small run
reuses them after it. Both run in the background while the tests that need no server run
(``conftest.FaultRuns``); this test judges the report.
"""

from __future__ import annotations

import json

import pytest

from tests.chaos.fault_runs import FaultRuns

#: The judge waits for the run (and, run alone, for the servers' start): longer than pytest's default limit.
pytestmark = [pytest.mark.e2e, pytest.mark.fault_suite, pytest.mark.timeout(3600)]


def test_no_execution_is_lost_under_faults() -> None:
    run = FaultRuns.result("crash")
    assert run.report is not None, run.output
    report = json.loads(run.report.read_text())
    print(json.dumps({k: v for k, v in report.items() if k != "plan"}, indent=2))
    assert report["expected"] >= 400
    assert report["lost"] == 0, report["lost_ids"]
    assert report["published"] == report["expected"]
    kinds = {fault["kind"] for fault in report["faults"]}
    assert kinds >= {"kill -9 scan", "Kafka broker restart", "Cassandra restart", "no tick", "duplicate tick"}
    assert report["rejected_503"] > 0  # the API refused while Cassandra was down, and said so
    assert run.returncode == 0, run.output
