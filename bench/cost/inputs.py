"""What one execution does, as the benchmarks measure it: the cost model's inputs (``bench/cost_inputs.json``).

Each figure is *measured* (a benchmark counts it; ``record`` writes it from a run) or *derived* (no
benchmark counts it today: a figure worked out from the code or the issue, with how). ``make bench``
refreshes the measured ones through ``record``; the derived ones stay as written here.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

INPUTS_PATH = Path(__file__).resolve().parents[1] / "cost_inputs.json"


class Figure(BaseModel):
    """One input: its value, whether a benchmark measured it, and where it came from."""

    model_config = ConfigDict(frozen=True)

    value: float
    kind: Literal["measured", "derived"]
    source: str


class MeasuredInputs(BaseModel):
    """Per execution unless the name says otherwise (per scan, per request, per one-time submit)."""

    model_config = ConfigDict(frozen=True)

    # The mix: the share of executions that are one-time jobs, each submitted once.
    one_time_share: Figure
    # Keyspaces rows written (each up to 1 KB: 1 WRU).
    history_rows_written: Figure
    schedule_rows_written: Figure
    rows_per_one_time_submit: Figure
    # Keyspaces reads (RRU at LOCAL_QUORUM; each value of an IN is a read of its own).
    job_reads_by_scan: Figure
    schedule_page_reads: Figure
    reads_by_results: Figure
    reads_per_busy_scan: Figure
    reads_per_idle_partition: Figure
    reconciler_reads: Figure
    # Rows that expire (TTL deletes), and the bytes kept while they live.
    ttl_deletes: Figure
    history_bytes_stored: Figure
    history_ttl_days: Figure
    change_log_bytes_per_one_time_job: Figure
    change_log_ttl_days: Figure
    job_row_bytes: Figure
    # Days an expired row is still stored (and billed) before Keyspaces deletes it: the history's, and the other
    # rows' that expire by their time to live (the change log's, one-time jobs').
    history_purge_lag_days: Figure
    ttl_purge_lag_days: Figure
    # Lambda.
    scan_cpu_ms: Figure
    busy_scan_seconds: Figure
    idle_scan_seconds_per_partition: Figure
    idle_scan_invocations_per_partition: Figure
    results_gb_seconds: Figure
    results_gb_seconds_per_invocation: Figure
    results_per_partition_per_second: Figure
    # The delivery function (a stage with targets): per invocation, per delivery.
    delivery_call_seconds: Figure
    delivery_overhead_seconds_per_invocation: Figure
    delivery_log_bytes: Figure
    api_gb_seconds_per_request: Figure
    api_gb_seconds_per_batch_request: Figure
    api_batch_size: Figure
    reconciler_gb_seconds: Figure
    reconciler_idle_gb_seconds_per_run: Figure
    tick_gb_seconds_per_run: Figure
    # DynamoDB.
    lease_calls_per_busy_scan: Figure
    items_per_lease_renewal: Figure
    lease_reads_per_busy_scan: Figure
    lease_writes_per_idle_partition: Figure
    rate_limit_writes_per_submit_request: Figure
    # Kafka.
    message_bytes: Figure
    result_message_bytes: Figure
    # Logs, traces, metrics.
    results_log_bytes: Figure
    platform_log_bytes_per_invocation: Figure
    access_log_bytes_per_request: Figure
    xray_sampled_share: Figure
    xray_reservoir_per_second: Figure
    custom_metrics: Figure
    alarms: Figure
    # Bytes through the interface endpoints (Keyspaces, Lambda, X-Ray).
    endpoint_bytes: Figure


def load(path: Path = INPUTS_PATH) -> MeasuredInputs:
    return MeasuredInputs.model_validate(json.loads(path.read_text())["figures"])


def save(inputs: MeasuredInputs, path: Path = INPUTS_PATH, run: str | None = None) -> None:
    document = {
        "about": "The cost model's inputs (bench/cost/inputs.py): measured figures are written by `make bench` "
                 "(bench.cost.inputs.record); derived ones are worked out by hand, with how.",
        "recorded_from": run,
        "figures": inputs.model_dump(),
    }
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def measured_from(results: dict[str, Any], run: str) -> dict[str, Figure]:
    """The figures a benchmark run (``bench.results``) measured, by input name; sections not run give none."""
    figures: dict[str, Figure] = {}

    def put(name: str, values: list[float], where: str) -> None:
        if values:
            figures[name] = Figure(value=round(_median(values), 4), kind="measured", source=f"{where} ({run})")

    drains = results.get("drain", [])
    put("one_time_share", [1 - d["recurring"] / d["seeded"] for d in drains if d.get("seeded")],
        "bench/drain.py drain_once: 1 - recurring / seeded; docs/benchmarks.md section 1")
    put("schedule_rows_written",
        [d["writes"]["per_execution"].get("INSERT task_schedule_v2", 0.0) for d in drains],
        "bench/drain.py _writes: per_execution['INSERT task_schedule_v2']; docs/benchmarks.md section 1")
    put("scan_cpu_ms", [1000 * d["process_cpu_s"] / d["published"] for d in drains if d.get("published")],
        "bench/drain.py drain_once: process_cpu_s / published; docs/benchmarks.md section 1")
    put("reads_per_busy_scan", [d["writes"]["late_polls_per_scan"] for d in drains],
        "bench/drain.py _writes: late_polls_per_scan; docs/benchmarks.md section 1")
    put("lease_calls_per_busy_scan", [d["writes"]["dynamodb_per_scan"].get("update_item", 0.0) for d in drains],
        "bench/drain.py _writes: dynamodb_per_scan['update_item']; docs/benchmarks.md section 1")
    put("lease_reads_per_busy_scan",
        [sum(v for op, v in d["writes"]["dynamodb_per_scan"].items() if op != "update_item") for d in drains],
        "bench/drain.py _writes: dynamodb_per_scan, the calls other than update_item; docs/benchmarks.md section 1")
    writes = results.get("writes", [])
    put("history_rows_written",
        [w["driver"].get("task_history_v2", 0) / w["executions"] for w in writes if w.get("executions")],
        "bench/writes.py writes_once: driver['task_history_v2'] / executions; docs/benchmarks.md section 8")
    put("rows_per_one_time_submit", [sum(w["submit"]["one_time"].values()) for w in writes if "submit" in w],
        "bench/writes.py submit_rows: rows Cassandra counted per one-time job submitted through the real "
        "JobService; docs/benchmarks.md section 8")
    stored = [w["stored_bytes"] for w in writes if "stored_bytes" in w]
    put("history_bytes_stored", [s["history_row"]["median"] for s in stored if s["history_row"]["count"]],
        "bench/writes.py writes_once: stored_bytes['history_row'], the median task_history_v2 row of its executions "
        "read back, sized by bench/rowsize.py (Amazon Keyspaces' rules, "
        "https://docs.aws.amazon.com/keyspaces/latest/devguide/calculating-row-size.html: row metadata, TTL and "
        "client-side timestamps as deployed); docs/benchmarks.md section 8")
    put("job_row_bytes", [s["one_time_job_row"]["median"] for s in stored
                          if s.get("one_time_job_row", {}).get("count")],
        "bench/writes.py submit_rows: stored_bytes['one_time_job_row'], the median one-time job row submitted through "
        "the real JobService read back, sized by bench/rowsize.py (Amazon Keyspaces' rules, "
        "https://docs.aws.amazon.com/keyspaces/latest/devguide/calculating-row-size.html); docs/benchmarks.md "
        "section 8")
    put("result_message_bytes", [w["result_message_bytes"]["median"] for w in writes
                                 if w.get("result_message_bytes", {}).get("count")],
        "bench/writes.py writes_once: result_message_bytes, the median result message answered (key + value + "
        "headers, as jobrunner_client.worker sends it); docs/benchmarks.md section 8")
    idle = results.get("idle", [])
    put("idle_scan_seconds_per_partition", [r["scan_seconds_per_partition"] for r in idle],
        "bench/idle.py idle_once: scan_seconds_per_partition; docs/benchmarks.md section 10")
    put("idle_scan_invocations_per_partition", [r["invocations_per_partition"] for r in idle],
        "bench/idle.py idle_once: invocations_per_partition; docs/benchmarks.md section 10")
    if results.get("message_bytes"):
        put("message_bytes", [float(results["message_bytes"])],
            "bench/runner.py _message_bytes (bench/raw.py message_bytes); docs/benchmarks.md section 1")
    return figures


def record(results: dict[str, Any], path: Path = INPUTS_PATH, run: str | None = None) -> list[str]:
    """Write the figures ``results`` measured into the inputs file, keeping the others; returns their names."""
    run = run or f"make bench, {results.get('started') or datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}"
    figures = measured_from(results, run)
    if not figures:
        return []
    current = load(path)
    save(current.model_copy(update=figures), path, run=run)
    return sorted(figures)
