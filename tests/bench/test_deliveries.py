"""The deliveries section's own arithmetic (bench/deliveries.py) and its part of the report
(bench/report/deliveries.py), without servers."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench.context import Options
from bench.deliveries import (
    arrivals_by_minute,
    check_arrivals,
    paced_bound,
    section_settings,
    tenants_for,
    throughput,
)
from bench.report.deliveries import deliveries_rows, deliveries_section
from jobrunner.config import Settings
from jobrunner.domain.time import to_epoch_ms

DUE = "2026-11-28T23:00:05Z"
DUE_S = datetime(2026, 11, 28, 23, 0, 5, tzinfo=UTC).timestamp()


def test_each_delivery_counts_once_with_the_latency_of_its_first_copy() -> None:
    # Given three deliveries, one of which arrived twice, and one whose signature did not verify
    arrivals = [("e1", DUE, DUE_S + 0.100, True), ("e2", DUE, DUE_S + 0.250, True),
                ("e1", DUE, DUE_S + 0.900, True), ("e3", DUE, DUE_S + 0.400, False)]

    # When they are checked against the four executions that were due
    checked = check_arrivals(arrivals, expected=4)

    # Then each execution counts once, the second copy as a duplicate, and the missing one is missing
    assert (checked["received"], checked["unique"], checked["duplicates"]) == (4, 3, 1)
    assert (checked["unverified"], checked["missing"]) == (1, 1)
    # and the latency is each execution's first arrival minus its due instant
    assert sorted(round(ms) for ms in checked["latency_ms"]) == [100, 250, 400]
    assert sorted(checked["arrivals_s"]) == [DUE_S + 0.100, DUE_S + 0.250, DUE_S + 0.400]


def test_arrivals_are_grouped_by_their_due_minute_and_strangers_apart() -> None:
    arrivals = [("e1", DUE, DUE_S, True), ("e2", "2026-11-28T23:01:59.000Z", DUE_S, True), ("x", "", DUE_S, True)]

    grouped = arrivals_by_minute(arrivals)

    assert {key: [a[0] for a in group] for key, group in grouped.items()} == {
        to_epoch_ms(datetime(2026, 11, 28, 23, 0, tzinfo=UTC)): ["e1"],
        to_epoch_ms(datetime(2026, 11, 28, 23, 1, tzinfo=UTC)): ["e2"], -1: ["x"]}


def test_throughput_is_the_burst_over_the_time_from_due_to_the_last_arrival() -> None:
    rate = throughput(100.0, [100.5, 101.0, 104.0, 102.0])

    assert rate == {"count": 4, "first_s": 0.5, "last_s": 4.0, "rate": 1.0}
    assert throughput(100.0, [])["count"] == 0


def test_the_jobs_are_spread_over_as_many_tenants_as_a_batch_calls_at_once() -> None:
    assert tenants_for(Settings.of(delivery_concurrency=16, delivery_tenant_concurrency=4)) == [
        "bench-tenant-0", "bench-tenant-1", "bench-tenant-2", "bench-tenant-3"]
    assert len(tenants_for(Settings.of(delivery_concurrency=2, delivery_tenant_concurrency=4))) == 1


def test_the_burst_measures_the_delivery_function_not_the_stages_per_tenant_pacing() -> None:
    # Given a stage pacing each tenant at 20 deliveries a second per instance, over the section's 4 tenants
    stage = Settings.of(delivery_concurrency=16, delivery_tenant_concurrency=4, delivery_tenant_rate=20)
    bench = SimpleNamespace(settings=stage, names=SimpleNamespace(run_id="run1"))
    # When the section sets up its delivery function
    settings = section_settings(bench, "whsec_x", "/ca.pem")  # type: ignore[arg-type]
    # Then it runs without the pacing (which would hold the burst to 4 x 20 a second), and says what it would be
    assert settings.delivery_tenant_rate == 0
    assert settings.delivery_rates.of("bench-tenant-0") is None
    assert paced_bound(stage) == 80


def test_each_run_keeps_its_tenants_secrets_apart_from_the_last_runs() -> None:
    # Given two runs on the same servers (a tenant's secret kept in moto outlives its run)
    stage = Settings.of(webhook_secret_prefix="jobrunner/webhooks/")
    first, second = (section_settings(SimpleNamespace(settings=stage, names=SimpleNamespace(run_id=run)),  # type: ignore[arg-type]
                                      f"whsec_{run}", "/ca.pem") for run in ("run1", "run2"))
    # Then each keeps its tenants' secrets under a prefix of its own, seeded with its own secret
    assert first.webhook_secret_prefix == "jobrunner/webhooks/run1/"
    assert second.webhook_secret_prefix == "jobrunner/webhooks/run2/"
    assert second.webhook_secrets["bench-tenant-0"] == ["whsec_run2"]


def _summary(p50: float) -> dict[str, float]:
    return {"p50": p50, "p95": p50 * 2, "p99": p50 * 3, "max": p50 * 4, "count": 10}


def _run(rate: float, kafka_rate: float, ceiling: float) -> dict[str, Any]:
    delivered = {"expected": 10, "received": 10, "unique": 10, "duplicates": 0, "unverified": 0, "missing": 0,
                 "latency_ms": _summary(200), "publish_ms": _summary(100)}
    kafka = {"expected": 10, "unique": 10, "duplicates": 0, "missing": 0, "latency_ms": _summary(150),
             "publish_ms": _summary(100)}
    ceilings = {mode: {"rate": ceiling * factor, "received": 10, "verified": 10}
                for mode, factor in (("new_connection", 1), ("keep_alive", 2))}
    return {"delivered_spread": delivered, "delivered_burst": {**delivered, "throughput": {"rate": rate, "last_s": 5}},
            "kafka_spread": kafka, "kafka_burst": {**kafka, "throughput": {"rate": kafka_rate, "last_s": 0.5}},
            "results": {"SUCCESS": 20}, "ceiling": ceilings, "cpu_burst": {"machine_cores": 1.9}}


def _bench(runs: list[dict[str, Any]], clock: str = "system", produce: float | None = None) -> Any:
    results: dict[str, Any] = {"deliveries": {
        "runs": runs, "executions": 2_000, "burst": 5_000, "segments": 16, "clock": clock, "tenants": 4,
        "concurrency": 16, "tenant_concurrency": 4, "batch_records": 100}}
    if produce is not None:
        results["ceilings"] = [{"produce": {"rate": produce}}]
    return SimpleNamespace(results=results, options=Options(out_md=Path("/tmp/b.md")))


def test_the_report_gives_the_rates_beside_their_ceiling_and_the_kafka_path() -> None:
    # Given three runs with the HTTPS target at 100, 120 and 110/s against a raw ceiling of 400/s
    bench = _bench([_run(100, 2_000, 400), _run(120, 2_200, 400), _run(110, 2_100, 400)], produce=40_000)

    # When the section is written
    text = "\n".join(deliveries_section(bench))

    # Then each figure is the median of its runs, beside the Kafka path's and the ceilings
    assert "## 13. Deliveries to an HTTPS target, beside the Kafka path" in text
    assert ("| HTTPS target: received per second, due → last received | 110/s (100-120, n=3) | 5.0 s (5.0-5.0, n=3) "
            "| 28 % |") in text
    assert ("| Kafka path: consumed per second, due → last consumed | 2\u202f100/s (2\u202f000-2\u202f200, n=3) "
            "|") in text
    assert "| ceiling: raw HTTPS, a connection per request, 16 threads | 400/s (400-400, n=3) |" in text
    assert "| ceiling: raw HTTPS, kept-alive connections, 16 threads | 800/s (800-800, n=3) |" in text
    assert "| ceiling: raw produce (section 4) | 40\u202f000/s |" in text
    assert "| HTTPS target: received - due | 200 ms (200-200, n=3) | 400 ms" in text
    assert "| Kafka path: consumed - due | 150 ms (150-150, n=3) |" in text
    assert "19.1x as fast" in text
    # and the checks of every run
    assert ("| 1 | 10 / 10 (0, 0) | 10 / 10 (0, 0) | SUCCESS 20 | 10 / 10 (0) ; 10 / 10 (0) | 10 / 10 ; 10 / 10 "
            "|") in text
    assert "| 3 | 10 / 10 (0, 0) |" in text
    # and the headline carries the p99 and the rate with their comparisons
    [latency, rate] = deliveries_rows(bench)
    assert latency[1:3] == ["600 ms (600-600, n=3)", "Kafka path 450 ms (450-450, n=3)"]
    assert rate[1] == "110/s (100-120, n=3)" and rate[3] == "28 % of raw HTTPS"


@pytest.mark.parametrize("runs", [[], None])
def test_no_section_without_runs(runs: list[dict[str, Any]] | None) -> None:
    bench = _bench(runs or [])
    assert deliveries_section(bench) == [] and deliveries_rows(bench) == []


def test_a_run_that_skipped_the_clock_counts_but_gives_no_figure() -> None:
    bench = _bench([_run(1e9, 1e9, 400)], clock="skip")

    text = "\n".join(deliveries_section(bench))

    assert "no latency or rate of it means anything" in text and "**Latency**" not in text
    assert "| 1 | 10 / 10 (0, 0) |" in text
    assert deliveries_rows(bench) == []
