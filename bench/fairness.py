"""Fairness between tenants (issue #13): does a light tenant's execution wait behind a heavy tenant's burst?

Per run, two consecutive real wall-clock minutes, scanned as the lateness section scans (the real clock,
each minute's scans started 10 s ahead in the worker processes, one thread per segment):
- *unloaded*: the light tenant's ``light`` executions alone, all due at the minute's first instant;
- *loaded*: the same number of the light tenant's executions and the heavy tenant's ``heavy``, all due at
  that same instant.
Every row is seeded into its minute's planned lane before the first minute's scans start (seeding is never
measured), and the minutes hold no other row (another section's jobs may fire in a real minute: the first
minutes with no row at all are taken).

Measured from the messages on the section's own topic, read back once every scan has ended: each
execution's lateness, its record's CreateTime (stamped by the producer when the scan sent it) minus its due
instant, per tenant; and the rank of each of the light tenant's executions among all the loaded minute's
executions by CreateTime, which shows where its rows came out of the burst whatever the machine's speed.
The rule (the issue's goal): the light tenant's loaded p99 within 1 s of its unloaded p99.
"""

from __future__ import annotations

import bisect
import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.context import code_commit
from bench.lateness import START_AHEAD
from bench.seed import empty
from bench.stats import median, percentile
from bench.workers import split
from jobrunner.domain.time import MINUTE, minute_bucket, to_epoch_ms

if TYPE_CHECKING:
    from bench.context import Bench

HEAVY = "bench-heavy"
LIGHT = "bench-light"
#: The issue's goal: the light tenant's p99 under load within this much of its p99 alone.
GOAL_MS = 1000.0
#: Time before the first minute's scans start, beyond the seeding's own (estimated at ``SEED_RATE``).
SEED_MARGIN = timedelta(seconds=20)
SEED_RATE = 1000.0  # executions/s, a conservative estimate for the shared servers


@dataclass
class _Message:
    execution_id: str
    tenant: str
    due_ms: int
    create_ms: int
    copies: int = 1


@dataclass
class _Topic:
    """Every record on the section's topic, by execution (the first copy's CreateTime)."""

    messages: dict[str, _Message] = field(default_factory=dict)
    records: int = 0


def _read_topic(bench: Bench) -> _Topic:
    """Read the section's topic from its beginning to its end offsets (every scan has ended by then)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bench.settings.kafka.bootstrap.split(","), group_id=None,
                             enable_auto_commit=False, consumer_timeout_ms=1000)
    out = _Topic()
    try:
        topic = bench.names.fairness_topic
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        deadline = time.monotonic() + 300
        while any(consumer.position(p) < ends[p] for p in partitions):
            if time.monotonic() > deadline:
                raise RuntimeError(f"fairness: could not read the topic to its end offsets {ends}")
            for batch in consumer.poll(timeout_ms=1000).values():
                for record in batch:
                    out.records += 1
                    value = json.loads(record.value)
                    due = datetime.fromisoformat(value["scheduled_at"].replace("Z", "+00:00"))
                    seen = out.messages.get(value["execution_id"])
                    if seen is not None:
                        seen.copies += 1
                        seen.create_ms = min(seen.create_ms, record.timestamp)
                        continue
                    out.messages[value["execution_id"]] = _Message(value["execution_id"], value["user_id"],
                                                                   to_epoch_ms(due), record.timestamp)
        return out
    finally:
        consumer.close()


def _lateness(values: list[float]) -> dict[str, float]:
    return {"first": min(values) if values else float("nan"), "p50": percentile(values, 50),
            "p99": percentile(values, 99), "max": max(values) if values else float("nan"), "count": len(values)}


def _minute_figures(minute: datetime, messages: list[_Message], seeded: dict[str, int],
                    scans: list[dict[str, Any]]) -> dict[str, Any]:
    """One minute's accounting, lateness per tenant and the light tenant's ranks by CreateTime."""
    by_tenant: dict[str, list[_Message]] = defaultdict(list)
    for message in messages:
        by_tenant[message.tenant].append(message)
    published = {tenant: len(by_tenant.get(tenant, [])) for tenant in seeded}
    ordered = sorted(m.create_ms for m in messages)
    # rank 1 is the minute's first message; ties (the same millisecond) share the best rank
    ranks = [bisect.bisect_left(ordered, m.create_ms) + 1 for m in by_tenant.get(LIGHT, [])]
    return {
        "minute": minute.isoformat(),
        "seeded": seeded,
        "published": published,
        "unpublished": sum(seeded.values()) - sum(published.values()),
        "duplicates": sum(m.copies - 1 for m in messages),
        "foreign": sum(len(v) for t, v in by_tenant.items() if t not in seeded),
        "lateness_ms": {tenant: _lateness([m.create_ms - m.due_ms for m in by_tenant.get(tenant, [])])
                        for tenant in seeded},
        "light_rank": {"median": median(ranks), "max": max(ranks) if ranks else float("nan"),
                       "of": len(messages)},
        "scans": {"segments": len(scans), "finished": sum(1 for s in scans if s["finished"]),
                  "published": sum(s["published"] for s in scans), "errors": sum(s["errors"] for s in scans),
                  "crashed": [s["crashed"] for s in scans if s.get("crashed")],
                  "lost_lease": sum(1 for s in scans if s["lost_lease"])},
    }


def _path() -> str:
    import jobrunner

    return str(Path(jobrunner.__file__).resolve().parent)


def _free_minutes(bench: Bench, count: int, segments: int, lead: timedelta) -> list[datetime]:
    """``count`` consecutive minutes, the first at least ``lead`` away, that hold no row in any lane of any
    of ``segments`` (the submit section's jobs, for one, fire in real minutes an hour after it ran)."""
    from jobrunner.adapters.stores.cassandra import CassandraJobStore
    from jobrunner.adapters.stores.session import connect

    session = connect(bench.settings.cassandra)
    try:
        store = CassandraJobStore(session)
        first = minute_bucket(datetime.now(UTC) + lead) + MINUTE
        while not empty(store, [first + i * MINUTE for i in range(count)], segments):
            first += MINUTE
        return [first + i * MINUTE for i in range(count)]
    finally:
        session.cluster.shutdown()


def run_fairness(bench: Bench) -> None:
    o = bench.options
    segments = o.fairness_segments
    processes = min(len(bench.pool), segments)
    groups = split(list(range(segments)), processes)
    total = o.runs * (2 * o.fairness_light + o.fairness_heavy)
    lead = SEED_MARGIN + START_AHEAD + timedelta(seconds=total / SEED_RATE)
    minutes = _free_minutes(bench, 2 * o.runs, segments, lead)
    plan = [(minute, "unloaded" if i % 2 == 0 else "loaded") for i, minute in enumerate(minutes)]
    topic = bench.names.fairness_topic
    seeding = time.monotonic()
    seeded: list[dict[str, int]] = []
    for minute, kind in plan:  # every minute seeded before the first one's scans start
        counts = {LIGHT: bench.seed(minute, o.fairness_light, segments, topic=topic, tenant=LIGHT)["count"]}
        if kind == "loaded":
            counts[HEAVY] = bench.seed(minute, o.fairness_heavy, segments, topic=topic, tenant=HEAVY)["count"]
        seeded.append(counts)
    seed_s = time.monotonic() - seeding
    spare = (minutes[0] - START_AHEAD - datetime.now(UTC)).total_seconds()
    if spare < 1:
        raise RuntimeError(f"fairness: seeding took {seed_s:.0f} s and ended {-spare:.0f} s after the first "
                           "minute's scans were due to start; a scan could miss rows seeded behind it")
    workers = bench.pool.all("code", [{} for _ in range(len(bench.pool))])
    bench.pool.all("warm", [{"slots": [(s, i % 2) for s in group for i in range(2)]} for group in groups])
    pending = []
    for index, (minute, kind) in enumerate(plan):
        tokens = [bench.pool.call(i, "prepare", what="scan", segments=group, bucket_ms=to_epoch_ms(minute),
                                  segment_count=segments, clock="system", tag=index % 2)
                  for i, group in enumerate(groups)]
        ready = [t.result(timeout=600) for t in tokens]
        wait = (minute - START_AHEAD - datetime.now(UTC)).total_seconds()
        if wait > 0:
            time.sleep(wait)
        start_at = time.monotonic()
        pending.append([bench.pool.call(i, "go", token=token, start_at=start_at) for i, token in enumerate(ready)])
        print(f"  fairness minute {index + 1}/{len(plan)} ({kind}) started ({minute:%H:%M})", flush=True)
    scans = [[s for f in futures for s in f.result(timeout=900)["segments"]] for futures in pending]
    read = _read_topic(bench)
    by_minute: dict[int, list[_Message]] = defaultdict(list)
    for message in read.messages.values():
        by_minute[to_epoch_ms(minute_bucket(datetime.fromtimestamp(message.due_ms / 1000, UTC)))].append(message)
    figures = [_minute_figures(minute, by_minute.pop(to_epoch_ms(minute), []), counts, minute_scans)
               for (minute, _), counts, minute_scans in zip(plan, seeded, scans, strict=True)]
    runs = []
    for unloaded, loaded in zip(figures[0::2], figures[1::2], strict=True):
        delta = loaded["lateness_ms"][LIGHT]["p99"] - unloaded["lateness_ms"][LIGHT]["p99"]
        runs.append({"unloaded": unloaded, "loaded": loaded, "light_p99_delta_ms": delta, "met": delta <= GOAL_MS})
    bench.results["fairness"] = {
        "heavy": o.fairness_heavy, "light": o.fairness_light, "segments": segments, "processes": processes,
        "tenants": {"heavy": HEAVY, "light": LIGHT}, "goal_ms": GOAL_MS, "code": code_commit(), "path": _path(),
        "worker_code": sorted({f"{w['code']} ({w['path']})" for w in workers}), "seed_s": seed_s, "seed_spare_s": spare,
        "records_read": read.records, "messages_read": len(read.messages),
        "other_minutes": sum(len(v) for v in by_minute.values()), "runs": runs,
    }
