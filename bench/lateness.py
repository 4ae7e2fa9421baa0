"""Lateness: executions spread over real wall-clock minutes at second precision, scanned with the real
clock, as the system runs them: each minute's scans start before the minute (as the tick dispatches
minute M+1 during minute M) and publish every execution at its due second.

Lateness is measured twice: from the Kafka record's CreateTime (set by the producer when it sent the
message) and from the scan's own ack time (``ScanReport.lateness_ms``: when ``publish`` returned),
both minus the execution's due instant. The runs are consecutive minutes, as in production, so the
tail of one minute's scans overlaps the start of the next one's.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from bench.stats import percentile
from bench.worker_pool import split
from jobrunner.domain.time import minute_bucket, to_epoch_ms

if TYPE_CHECKING:
    from bench.context import Bench

#: How long before its minute a run's scans start (the tick dispatches the next minute ahead).
START_AHEAD = timedelta(seconds=10)
#: Minimum time between now and the first minute, for seeding every run first.
SEED_LEAD = timedelta(seconds=75)


def summary(values: list[float]) -> dict[str, float]:
    """p50, p95, p99, max and count of ``values`` (milliseconds of lateness, as the report writes them)."""
    return {"p50": percentile(values, 50), "p95": percentile(values, 95), "p99": percentile(values, 99),
            "max": max(values) if values else float("nan"), "count": len(values)}


def create_times(bench: Bench, expected: int, topic: str | None = None, timeout_s: float = 120
                 ) -> dict[str, tuple[int, float]]:
    """execution_id -> (due minute in epoch ms, CreateTime lateness in ms) of every message on ``topic`` (the
    lateness topic by default; a message published twice counts once, with its first copy)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bench.settings.kafka.bootstrap.split(","), group_id=None,
                             enable_auto_commit=False, consumer_timeout_ms=1000)
    try:
        topic = topic or bench.names.lateness_topic
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        out: dict[str, tuple[int, float]] = {}
        deadline = time.monotonic() + timeout_s
        while len(out) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000).values():
                for record in batch:
                    value = json.loads(record.value)
                    due = datetime.fromisoformat(value["scheduled_at"].replace("Z", "+00:00"))
                    out.setdefault(value["execution_id"],
                                   (to_epoch_ms(minute_bucket(due)), record.timestamp - to_epoch_ms(due)))
        return out
    finally:
        consumer.close()


def scan_minutes(bench: Bench, minutes: list[datetime], segments: int, label: str = "lateness"
                 ) -> list[list[dict[str, Any]]]:
    """Scan each of ``minutes`` (seeded beforehand) as the system does: the real clock, each minute's scans started
    ``START_AHEAD`` before it in the worker processes (one thread per segment), the next minute's overlapping the
    tail of the previous one's. Returns each minute's scan reports (``bench.worker_scan.scan_one``), once all
    ended."""
    processes = min(len(bench.pool), segments)
    groups = split(list(range(segments)), processes)
    bench.pool.all("warm", [{"slots": [(s, i % 2) for s in group for i in range(2)]} for group in groups])
    pending = []
    for index, minute in enumerate(minutes):
        tokens = [bench.pool.call(i, "prepare", what="scan", segments=group, bucket_ms=to_epoch_ms(minute),
                                  segment_count=segments, clock="system", tag=index % 2, keep_lateness=True)
                  for i, group in enumerate(groups)]
        ready = [t.result(timeout=600) for t in tokens]
        wait = (minute - START_AHEAD - datetime.now(UTC)).total_seconds()
        if wait > 0:
            time.sleep(wait)
        start_at = time.monotonic()
        pending.append([bench.pool.call(i, "go", token=token, start_at=start_at) for i, token in enumerate(ready)])
        print(f"  {label} minute {index + 1}/{len(minutes)} started ({minute:%H:%M})", flush=True)
    return [[s for f in futures for s in f.result(timeout=900)["segments"]] for futures in pending]


def run_lateness(bench: Bench) -> None:
    o = bench.options
    segments = o.lateness_segments
    first = minute_bucket(datetime.now(UTC) + SEED_LEAD) + timedelta(minutes=1)
    minutes = [first + timedelta(minutes=i) for i in range(o.runs)]
    for minute in minutes:  # seeded before the first minute starts: no seeding load during the runs
        bench.seed(minute, o.lateness_executions, segments, topic=bench.names.lateness_topic, due="spread")
    runs = []
    for minute, per_segment in zip(minutes, scan_minutes(bench, minutes, segments), strict=True):
        acked = [v for s in per_segment for v in s["lateness_ms"]]
        runs.append({"minute": minute.isoformat(), "published": sum(s["published"] for s in per_segment),
                     "ack": summary(acked), "finished": sum(1 for s in per_segment if s["finished"])})
    created = create_times(bench, sum(r["published"] for r in runs))
    for run, minute in zip(runs, minutes, strict=True):
        run["create_time"] = summary([ms for m, ms in created.values() if m == to_epoch_ms(minute)])
    bench.results["lateness"] = {
        "runs": runs, "executions_per_minute": o.lateness_executions, "segments": segments,
        "messages_read": len(created),
    }
