"""The benchmark harness works end to end, at toy sizes: counts are asserted, never speeds.

``make bench`` runs the real thing (minutes, 3 runs of every figure); this runs each section once
with a few hundred executions against the same real servers, in a keyspace of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bench.context import Options
from bench.runner import result_counts, run
from bench.submit import BATCH

if TYPE_CHECKING:
    from pathlib import Path

    from devstack.servers import Endpoints

#: The full-stack section waits for the real clock (seconds at smoke sizes): the default 600 s may be short on a
#: busy machine. The fairness and deliveries sections do not (their smoke minutes skip the clock).
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]


def test_every_section_runs_and_accounts_for_every_execution(endpoints: Endpoints, tmp_path: Path) -> None:
    # Given the smoke sizes (200 executions over 2 segments, 1 run of each figure)
    options = Options.smoke(tmp_path)

    # When the harness runs every section and writes its report
    bench = run(options, command="pytest smoke")
    counts = result_counts(bench)

    # Then every seeded execution was published exactly once by the drain and the scaling runs
    assert counts["drain_seeded"] == [options.drain_executions]
    assert counts["drain_published"] == [options.drain_executions]
    for segments in options.scaling_segments:
        assert counts["scaling_published"][segments] == [options.scaling_executions]
    # and every submit got an answer: 201, or 503 when the shared database times out under load
    for mode, [statuses] in counts["submit_statuses"].items():
        expected = options.submit_requests if "1 thread" not in mode else max(options.submit_requests // 4, 2)
        if "batches" in mode:  # requests of BATCH jobs each
            expected = max(options.submit_requests, BATCH * options.submit_threads) // BATCH
        assert sum(statuses.values()) == expected, mode
        assert set(statuses) <= {201, 503} and statuses.get(201, 0) > 0, (mode, statuses)
    # and every memory scan published its whole partition
    assert counts["memory_published"] == {size: [size] for size in options.memory_sizes}
    # and the ceilings ran the operations they were asked for
    assert counts["ceiling_ops"] == [{
        "writes": options.ceiling_ops, "reads": options.ceiling_ops, "batches": options.ceiling_ops // 2,
        "produce": options.ceiling_produce, "combined": options.combined_executions,
    }]
    # and the report and its chart were written, with the machine's description
    report = options.out_md.read_text()
    for heading in ("## Machine", "## Headline figures", "## 1. Drain", "## 4. Ceilings", "## 5. Memory",
                    "## 6. Scaling with segments", "## 8. Writes per execution, counted by Cassandra",
                    "## 9. Short-period jobs"):
        assert heading in report
    assert "| cores (nproc) |" in report and "| Cassandra | 5.0" in report
    assert options.out_png.stat().st_size > 10_000
    # and the scans' counted writes add up: no logged batch on the execution path (the store's batches are
    # unlogged: rows packed into few requests, each row its own write), for every variant
    writes = bench.results["drain"][0]["writes"]
    assert writes["batches_per_execution"] > 0
    assert writes["logged_batches_per_execution"] == 0
    for runs in bench.results["variants"].values():
        assert runs[0]["writes"]["logged_batches_per_execution"] == 0
    # and the writes section scanned every execution and every retry, and Cassandra's own count of the
    # rows written is the model's: exactly, unless a write had to be sent again
    [(first, retries)] = counts["writes_executions"]
    assert first == options.writes_executions
    assert retries == round(options.writes_failures * options.writes_executions)
    counted = bench.results["writes"][0]
    # (every history row is a partition of its own: Cassandra counts each; next fires of one minute and segment
    # share a partition and, in one unlogged batch, count once together: at most the rows sent)
    assert counted["counted"]["task_history_v2"] >= counted["expected"]["task_history_v2"] > 0, counted
    assert 0 < counted["counted"]["task_schedule_v2"] <= counted["driver"]["task_schedule_v2"], counted
    assert counted["expected"]["job_table_v2"] == 0
    assert counted["counted"]["job_table_v2"] == 0  # no execution writes the job: Cassandra's own count
    if counted["scan_errors"] == 0 and not any(counted["applied_again"]):
        assert counted["counted"]["task_history_v2"] == counted["expected"]["task_history_v2"]
        assert counted["expected"] == counted["driver"]
    # and the short-period jobs were published from the scan's memory: every fire of both minutes, and in
    # their first minute no row of theirs read by a late-lane poll, and no tombstone left for a poll to skip
    assert [s["period_s"] for s in bench.results["shortperiod"]] == list(options.short_periods)
    for short in bench.results["shortperiod"]:
        first, steady = short["minutes"]
        assert first["executions"] == steady["executions"] == options.short_jobs * (60 // short["period_s"])
        assert first["rows_read"]["LATE"] == 0
        assert first["traced"]["late"]["tombstones"] == first["traced"]["planned"]["tombstones"] == 0
        assert first["traced"]["planned"]["live"] == first["executions"]
        # and in the steady state each late-lane row was read once, and no poll touched a tombstone but the last look
        # at the whole lane (#31: a row that landed behind the windows read), which touches each done row's once
        assert steady["rows_read"]["LATE"] == options.short_jobs
        assert steady["late_poll_tombstones"] == 0
        assert steady["last_look_tombstones"] <= options.short_jobs
    # and scans of partitions with nothing to do ended within seconds, each partition scanned at least once
    [idle] = bench.results["idle"]
    assert idle["minutes"] == options.idle_minutes - 2 and idle["invocations_per_partition"] >= 1
    assert 0 < idle["longest_scan_s"] < 30
    # and through the whole local stack every job submitted over HTTP had its execution published once,
    # its result reported and recorded SUCCESS, with nothing left running after the stack stopped
    [fullstack] = counts["fullstack"]
    assert fullstack["accepted"] > 0
    assert fullstack["published"] == fullstack["results"] == fullstack["recorded"] == fullstack["accepted"]
    assert fullstack["duplicates"] == fullstack["unpublished"] == 0 and not fullstack["timed_out"]
    assert bench.results["fullstack"]["stack_threads_alive"] == []
    assert "## 11. Full stack" in report
    # and in the fairness minutes every execution of both tenants was published once: the light tenant's alone,
    # then beside the heavy tenant's, all due at the same second, every scan finished, no other row scanned
    [fairness] = counts["fairness"]
    light, heavy = "bench-light", "bench-heavy"
    assert fairness["unloaded"]["seeded"] == fairness["unloaded"]["published"] == {light: options.fairness_light}
    assert fairness["loaded"]["seeded"] == fairness["loaded"]["published"] == {
        light: options.fairness_light, heavy: options.fairness_heavy}
    for minute in fairness.values():
        assert minute["unpublished"] == minute["duplicates"] == minute["foreign"] == 0
    [fair] = bench.results["fairness"]["runs"]
    for kind in ("unloaded", "loaded"):
        scans = fair[kind]["scans"]
        assert scans["finished"] == scans["segments"] == options.fairness_segments and not scans["crashed"]
    assert fair["loaded"]["light_rank"]["of"] == options.fairness_light + options.fairness_heavy
    assert 1 <= fair["loaded"]["light_rank"]["max"] <= options.fairness_light + options.fairness_heavy
    assert "## 12. Fairness between tenants" in report
    # and every execution with an HTTPS target reached the receiver through the delivery function exactly once, its
    # signature verified by the Standard Webhooks library, its outcome reported SUCCESS; and the same loads on the
    # Kafka path were consumed once each; and the raw HTTPS ceiling's requests were all answered and verified
    [deliveries] = counts["deliveries"]
    sizes = {"spread": options.deliveries_executions, "burst": options.deliveries_burst}
    for load, checked in deliveries.items():
        size = sizes[load.split("_")[1]]
        assert checked == {"expected": size, "unique": size, "duplicates": 0, "missing": 0}, load
    [delivered] = bench.results["deliveries"]["runs"]
    assert delivered["delivered_spread"]["unverified"] == delivered["delivered_burst"]["unverified"] == 0
    assert delivered["results"] == {"SUCCESS": sum(sizes.values())} and delivered["foreign_arrivals"] == 0
    for mode in ("new_connection", "keep_alive"):
        ceiling = delivered["ceiling"][mode]
        assert ceiling["errors"] == 0 and ceiling["received"] == ceiling["verified"] == options.deliveries_burst
    assert "## 13. Deliveries to an HTTPS target" in report
