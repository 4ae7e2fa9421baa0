"""The cluster fault suite's accounting (``chaos.cluster_report``), on made-up runs, without servers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chaos.cluster import _route
from chaos.cluster_faults import wait_drained
from chaos.cluster_report import Call, ClusterReport, FaultRun, figures, percentile

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def call(route: str, sent_s: float, status: int) -> Call:
    return Call(route, at(sent_s), at(sent_s + 0.05), status)


def test_percentile_is_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 99), percentile(values, 50), percentile([3.0], 99), percentile([], 99)) == (
        99.0, 50.0, 3.0, None)
    assert percentile([1.0, 9.0], 99) == 9.0


def test_a_fault_counts_the_requests_refused_from_its_kill_until_the_cluster_healed() -> None:
    # Given a node killed at 100 s, restarted at 145 s, healed at 170 s
    run = FaultRun("Cassandra node", ["cassandra-3"], at(100), restarted=at(145), back=at(160), recovered=at(170))
    calls = [call("POST /jobs", 99, 503),  # before the kill: not this fault's
             call("POST /jobs", 101, 201), call("POST /jobs", 102, 503), call("PATCH /jobs/{id}", 150, 0),
             call("GET /jobs/{id}", 169, 200), call("GET /jobs/{id}", 171, 500)]  # after it healed: not its
    # When its figures are made
    result = figures(run, calls, [], now=at(300))
    # Then the two refusals inside it are counted by route, and the others are not
    assert (result.requests, result.refused, result.refused_routes) == (4, 2, {"POST /jobs": 1, "PATCH /jobs/{id}": 1})
    assert (result.down_s, result.recovery_s) == (45.0, 25.0)


def test_a_fault_s_lateness_is_that_of_the_fires_due_while_its_nodes_were_down() -> None:
    run = FaultRun("Kafka broker", ["kafka-2"], at(100), restarted=at(145), back=at(150), recovered=None)
    samples = [(at(90), 50.0), (at(100), 1.0), (at(120), 12.0), (at(144), 3.0), (at(146), 40.0)]

    result = figures(run, [], samples, now=at(400))

    assert (result.fires, result.lateness_p99_s, result.lateness_max_s) == (3, 12.0, 12.0)
    assert result.recovery_s is None  # never healed within the wait: no recovery time, and its requests up to now


def test_the_suite_fails_on_a_refusal_during_a_fault() -> None:
    report = ClusterReport(plan={}, findings={"lost": [], "retries_lost": [], "void_lost": [], "zombies": [],
                                              "paused_fires": [], "strays": [], "quiet_stale_payloads": [],
                                              "changes_after_cancel": [], "lost_updates": []})
    run = FaultRun("Cassandra node", ["cassandra-3"], at(0), restarted=at(10), back=at(12), recovered=at(20))
    report.fault_figures = [figures(run, [call("POST /jobs", 5, 201)], [], now=at(30))]
    assert not any(report.failures().values())
    report.fault_figures = [figures(run, [call("POST /jobs", 5, 503)], [], now=at(30))]
    assert report.failures()["requests refused during the faults"] == 1


@pytest.mark.parametrize(("method", "path", "route"), [
    ("POST", "/jobs", "POST /jobs"),
    ("GET", "/jobs?limit=20", "GET /jobs"),
    ("PATCH", "/jobs/5becff67-8ef2", "PATCH /jobs/{id}"),
    ("GET", "/jobs/5becff67-8ef2/executions?limit=10", "GET /jobs/{id}/executions"),
])
def test_requests_are_counted_by_route(method: str, path: str, route: str) -> None:
    assert _route(method, path) == route


def test_hints_are_delivered_when_none_is_left_for_longer_than_a_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a node whose peers hold 3 hint files, then none, then one more (flushed from memory), then none
    clock = [0.0]
    monkeypatch.setattr("chaos.cluster_faults.time.monotonic", lambda: clock[0])
    monkeypatch.setattr("chaos.cluster_faults.time.sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    counts = iter([3, 0, 0, 1, None, 0] + [0] * 100)
    # When the suite waits for them to drain, with a settle of 5 s
    delivered = wait_drained(lambda: next(counts), timeout_s=60, settle_s=5)
    # Then they were delivered when the count last fell to 0 (an unknown count breaks nothing)
    assert delivered == 5.0
