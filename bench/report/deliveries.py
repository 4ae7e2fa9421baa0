"""Section 13 of the report: deliveries to an HTTPS target (issue #35), latency and throughput, beside the Kafka
path's figures for the same loads and a raw HTTPS ceiling, all from the same run (``bench.deliveries``)."""

from __future__ import annotations

import math
import textwrap
from typing import TYPE_CHECKING, Any

from bench.report.common import ceiling_rates, paired_ratios, table
from bench.stats import fmt, median, pct, ratio, spread

if TYPE_CHECKING:
    from bench.context import Bench

PERCENTILES = ("p50", "p95", "p99", "max")


def _timed(d: dict[str, Any]) -> bool:
    return str(d.get("clock", "system")) != "skip"


def _percentiles(runs: list[dict[str, Any]], load: str, figure: str) -> list[str]:
    return [spread([run[load][figure][key] for run in runs], 0, " ms") for key in PERCENTILES]


def _rates(runs: list[dict[str, Any]], load: str) -> list[float]:
    return [run[load]["throughput"]["rate"] for run in runs]


def _ceilings(runs: list[dict[str, Any]], mode: str) -> list[float]:
    return [run["ceiling"][mode]["rate"] for run in runs]


def _cpu(cpu: dict[str, float]) -> str:
    workers = sum(v for k, v in cpu.items() if k.startswith("worker") and k.endswith("_cores"))
    return ", ".join(f"{label} {fmt(value, 2)}" for label, value in (
        ("machine", cpu.get("machine_cores", math.nan)), ("delivery function", cpu.get("delivery_cores", math.nan)),
        ("receiver", cpu.get("receiver_cores", math.nan)), ("scans", workers),
        ("Cassandra", cpu.get("cassandra_cores", math.nan)), ("Kafka", cpu.get("kafka_cores", math.nan))))


def deliveries_rows(bench: Bench) -> list[list[str]]:
    """The headline's rows: the delivered p99 beside the Kafka path's, the delivered rate beside its ceiling."""
    d = bench.results.get("deliveries", {})
    runs = d.get("runs")
    if not runs or not _timed(d):
        return []
    rates, ceilings = _rates(runs, "delivered_burst"), _ceilings(runs, "new_connection")
    return [[f"deliveries: HTTPS target, latency p99 ({d['executions']:,} due over a minute)",
             spread([run["delivered_spread"]["latency_ms"]["p99"] for run in runs], 0, " ms"),
             f"Kafka path {spread([run['kafka_spread']['latency_ms']['p99'] for run in runs], 0, ' ms')}", ""],
            [f"deliveries: HTTPS target, {d['burst']:,} due at one instant, to the last received",
             spread(rates, unit="/s"), f"raw HTTPS {spread(ceilings, unit='/s')} ({d['concurrency']} threads, "
             "a connection per request)", f"{pct(median(paired_ratios(rates, ceilings)))} of raw HTTPS"]]


def deliveries_section(bench: Bench) -> list[str]:
    d = bench.results.get("deliveries")
    if not d or not d.get("runs"):
        return []
    runs = d["runs"]
    about = (f"**Workload** (per run, four consecutive real minutes, {d['segments']} segments): {d['executions']:,} "
             "one-time jobs due at random whole seconds of a minute (*spread*: latency), then "
             f"{d['burst']:,} all due at a minute's first instant (*burst*: throughput), first on the Kafka path (a "
             "topic read by a consumer of the section's own as the records come), then with an HTTPS target on the "
             "section's receiver. **System**: the real scans (as section 2 runs them) put the delivered jobs' "
             "executions on the delivery topic; the real delivery function (`functions/delivery`, the real "
             "`HttpsDeliverer`) consumes it in a process of its own, fed as `make run` feeds it (batches of at most "
             f"{d['batch_records']} records), {d['concurrency']} calls at once per batch and "
             f"{d['tenant_concurrency']} per tenant, the jobs spread over {d['tenants']} tenants so that a batch "
             "can use them all; each call is a new TCP and TLS connection. The per-tenant delivery rate is off "
             "here (`JOBRUNNER_DELIVERY_TENANT_RATE=0`): the burst measures the function, not the pacing; with the "
             f"stage's default ({d.get('tenant_rate', '?')} a second a tenant per instance) these tenants' burst "
             f"would be held to {d.get('paced_bound', '?')} a second per instance. The receiver is `http.server` "
             "over TLS "
             "in a process of its own (a certificate of a local CA the delivery trusts, loopback allow-listed). "
             "**Measured**: latency = arrival (at the receiver, at the consumer) - due instant "
             "(`jobrunner-scheduled-time`, the message's `scheduled_at`); *published* = the record's CreateTime - "
             "due, the scan's part; throughput = the burst ÷ (last arrival - due). **Ceiling**: signed POSTs of the "
             f"same body to the same receiver from {d['concurrency']} threads of the delivery function's process, "
             "between runs, with `http.client`: a new connection per request, as the deliverer makes, and one "
             "kept-alive connection per thread for reference; raw produce/s is section 4's when it ran. "
             "**Checked**: every delivery received once (duplicates counted), its Standard Webhooks signature "
             "verified at the receiver by the library, its outcome SUCCESS on the results topic. "
             "**Reproduce**: `python -m bench --only deliveries` (`--deliveries-executions`, `--deliveries-burst`; "
             "add `--out` and `--chart`, or it replaces docs/benchmarks.md with this section alone).")
    lines = ["## 13. Deliveries to an HTTPS target, beside the Kafka path", "", *textwrap.wrap(about, 115), ""]
    if not _timed(d):
        lines += ["*This run skipped the clock (the smoke test's far-future minutes): it counts, and no latency or "
                  "rate of it means anything.*", ""]
    else:
        lines += ["**Latency** (ms, median over runs of each run's percentile):", ""]
        lines += table(["path", "p50", "p95", "p99", "max"], [
            ["HTTPS target: received - due", *_percentiles(runs, "delivered_spread", "latency_ms")],
            ["HTTPS target: published (delivery topic) - due", *_percentiles(runs, "delivered_spread", "publish_ms")],
            ["Kafka path: consumed - due", *_percentiles(runs, "kafka_spread", "latency_ms")],
            ["Kafka path: published - due", *_percentiles(runs, "kafka_spread", "publish_ms")],
        ])
        rates, kafka = _rates(runs, "delivered_burst"), _rates(runs, "kafka_burst")
        fresh, kept = _ceilings(runs, "new_connection"), _ceilings(runs, "keep_alive")
        produce = ceiling_rates(bench, "produce")
        lines += ["**Throughput** (the burst):", ""]
        rows = [
            ["HTTPS target: received per second, due → last received", spread(rates, unit="/s"),
             spread([run["delivered_burst"]["throughput"]["last_s"] for run in runs], 1, " s"),
             pct(median(paired_ratios(rates, fresh)))],
            ["Kafka path: consumed per second, due → last consumed", spread(kafka, unit="/s"),
             spread([run["kafka_burst"]["throughput"]["last_s"] for run in runs], 2, " s"),
             pct(median(paired_ratios(kafka, produce))) + " of raw produce" if produce else ""],
            [f"ceiling: raw HTTPS, a connection per request, {d['concurrency']} threads", spread(fresh, unit="/s"),
             "", ""],
            [f"ceiling: raw HTTPS, kept-alive connections, {d['concurrency']} threads", spread(kept, unit="/s"),
             "", ""],
        ]
        if produce:
            rows.append(["ceiling: raw produce (section 4)", spread(produce, unit="/s"), "", ""])
        lines += table(["", "rate", "last arrival after due", "of ceiling (a connection per request)"], rows)
        slower = median([ratio(k, r) for k, r in zip(kafka, rates, strict=True)])
        lines += [f"The Kafka path drained the same burst {fmt(slower, 1)}x as fast as the HTTPS deliveries.", ""]
    lines += ["**Checks and load** per run (received / expected, duplicates, signatures that did not verify; the "
              "delivery function's results; CPU cores busy from the burst's due instant to its last arrival):", ""]
    lines += table(["run", "spread: received (dup., unverified)", "burst: received (dup., unverified)",
                    "results on the topic", "Kafka path: consumed (dup.)", "ceiling requests answered / verified",
                    "CPU during the burst"], [
        [str(i + 1),
         *(f"{run[load]['unique']:,} / {run[load]['expected']:,} ({run[load]['duplicates']}, "
           f"{run[load]['unverified']})" for load in ("delivered_spread", "delivered_burst")),
         ", ".join(f"{status} {n:,}" for status, n in sorted(run["results"].items())) or "none",
         " ; ".join(f"{run[load]['unique']:,} / {run[load]['expected']:,} ({run[load]['duplicates']})"
                    for load in ("kafka_spread", "kafka_burst")),
         " ; ".join(f"{run['ceiling'][mode]['received']:,} / {run['ceiling'][mode]['verified']:,}"
                    for mode in ("new_connection", "keep_alive")),
         _cpu(run.get("cpu_burst", {}))]
        for i, run in enumerate(runs)])
    return lines
