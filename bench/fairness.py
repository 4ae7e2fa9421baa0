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

A short run (``Options.fairness_gap_s``, the smoke test's, which counts and never times) puts both in one
minute instead: the unloaded executions due at the first whole second the seeding allows, the loaded ones
that gap later, so that it waits for one minute's scans rather than for a minute to begin and two to end.
With ``Options.fairness_clock="skip"`` as well (the smoke test), that minute is a far-future one, scanned at once
on a clock that never waits: nothing waits for the real clock, and only the counts mean anything.
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

from bench.lateness import START_AHEAD
from bench.machine import code_commit
from bench.seed import empty
from bench.stats import median, percentile
from bench.worker_pool import split
from jobrunner.domain.time import MINUTE, minute_bucket, to_epoch_ms

if TYPE_CHECKING:
    from bench.context import Bench

HEAVY = "bench-heavy"
LIGHT = "bench-light"
#: The issue's goal: the light tenant's p99 under load within this much of its p99 alone.
GOAL_MS = 1000.0
#: The seeding's rate assumed for the lead before the first scans start (beyond ``Options.fairness_margin_s``).
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
                    scans: list[dict[str, Any]], due: datetime | None = None) -> dict[str, Any]:
    """One minute's accounting (or, with ``Options.fairness_gap_s``, one due instant's of the minute), lateness
    per tenant and the light tenant's ranks by CreateTime."""
    by_tenant: dict[str, list[_Message]] = defaultdict(list)
    for message in messages:
        by_tenant[message.tenant].append(message)
    published = {tenant: len(by_tenant.get(tenant, [])) for tenant in seeded}
    ordered = sorted(m.create_ms for m in messages)
    # rank 1 is the minute's first message; ties (the same millisecond) share the best rank
    ranks = [bisect.bisect_left(ordered, m.create_ms) + 1 for m in by_tenant.get(LIGHT, [])]
    return {
        "minute": minute.isoformat(),
        "due": (due or minute).isoformat(),
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


def _one_minute_plan(bench: Bench, runs: int, segments: int, lead: timedelta, gap: timedelta
                     ) -> list[tuple[datetime, datetime, str]]:
    """Per run, (minute, due, kind) for the unloaded executions, due at the first whole second at least ``lead``
    away, and the loaded ones ``gap`` later in the same minute, which holds no row in any lane of ``segments``
    (else the next such minute's first instant); each run in a minute after the previous run's."""
    from jobrunner.adapters.stores.cassandra import CassandraJobStore
    from jobrunner.adapters.stores.session import connect

    session = connect(bench.settings.cassandra)
    try:
        store = CassandraJobStore(session)
        due = (datetime.now(UTC) + lead).replace(microsecond=0) + timedelta(seconds=1)
        plan: list[tuple[datetime, datetime, str]] = []
        for _ in range(runs):
            minute = minute_bucket(due)
            while due + gap >= minute + MINUTE or not empty(store, [minute], segments):
                minute += MINUTE
                due = minute
            plan += [(minute, due, "unloaded"), (minute, due + gap, "loaded")]
            due = minute + MINUTE
        return plan
    finally:
        session.cluster.shutdown()


def run_fairness(bench: Bench) -> None:
    o = bench.options
    segments = o.fairness_segments
    processes = min(len(bench.pool), segments)
    groups = split(list(range(segments)), processes)
    total = o.runs * (2 * o.fairness_light + o.fairness_heavy)
    lead = timedelta(seconds=o.fairness_margin_s + total / SEED_RATE) + START_AHEAD
    plan: list[tuple[datetime, datetime, str]]  # (minute, due, kind): unloaded, loaded, unloaded...
    skip = o.fairness_clock == "skip"
    if skip:  # far-future minutes nothing else uses, each scanned at once on a clock that never waits
        gap = timedelta(seconds=o.fairness_gap_s or 0)
        plan = [entry for minute in (bench.next_bucket() for _ in range(o.runs))
                for entry in ((minute, minute, "unloaded"), (minute, minute + gap, "loaded"))]
    elif o.fairness_gap_s is None:
        plan = [(minute, minute, "unloaded" if i % 2 == 0 else "loaded")
                for i, minute in enumerate(_free_minutes(bench, 2 * o.runs, segments, lead))]
    else:
        plan = _one_minute_plan(bench, o.runs, segments, lead, timedelta(seconds=o.fairness_gap_s))
    minutes = sorted({minute for minute, _, _ in plan})
    topic = bench.names.fairness_topic
    seeding = time.monotonic()
    seeded: list[dict[str, int]] = []
    for minute, due, kind in plan:  # every minute seeded before the first one's scans start
        offset = due - minute
        counts = {LIGHT: bench.seed(minute, o.fairness_light, segments, topic=topic, tenant=LIGHT,
                                    offset=offset)["count"]}
        if kind == "loaded":
            counts[HEAVY] = bench.seed(minute, o.fairness_heavy, segments, topic=topic, tenant=HEAVY,
                                       offset=offset)["count"]
        seeded.append(counts)
    seed_s = time.monotonic() - seeding
    spare = (plan[0][1] - START_AHEAD - datetime.now(UTC)).total_seconds()
    if spare < 1 and not skip:
        raise RuntimeError(f"fairness: seeding took {seed_s:.0f} s and ended {-spare:.0f} s after the first "
                           "minute's scans were due to start; a scan could miss rows seeded behind it")
    workers = bench.pool.all("code", [{} for _ in range(len(bench.pool))])
    bench.pool.all("warm", [{"slots": [(s, i % 2) for s in group for i in range(2)]} for group in groups])
    pending = []
    for index, minute in enumerate(minutes):
        first_due = min(due for m, due, _ in plan if m == minute)
        kinds = "+".join(kind for m, _, kind in plan if m == minute)
        tokens = [bench.pool.call(i, "prepare", what="scan", segments=group, bucket_ms=to_epoch_ms(minute),
                                  segment_count=segments, clock=o.fairness_clock, tag=index % 2)
                  for i, group in enumerate(groups)]
        ready = [t.result(timeout=600) for t in tokens]
        wait = (first_due - START_AHEAD - datetime.now(UTC)).total_seconds()
        if wait > 0 and not skip:
            time.sleep(wait)
        start_at = time.monotonic()
        pending.append([bench.pool.call(i, "go", token=token, start_at=start_at) for i, token in enumerate(ready)])
        print(f"  fairness minute {index + 1}/{len(minutes)} ({kinds}) started ({minute:%H:%M}, first due "
              f"{first_due:%H:%M:%S})", flush=True)
    scans = {minute: [s for f in futures for s in f.result(timeout=900)["segments"]]
             for minute, futures in zip(minutes, pending, strict=True)}
    read = _read_topic(bench)
    # Each message goes to the plan entry of its minute due latest at or before it (the minute's first, if
    # none): with two minutes, simply its minute's.
    entries: dict[int, list[int]] = defaultdict(list)
    for index, (minute, _, _) in enumerate(plan):
        entries[to_epoch_ms(minute)].append(index)
    grouped: list[list[_Message]] = [[] for _ in plan]
    other = 0
    for message in read.messages.values():
        indexes = entries.get(to_epoch_ms(minute_bucket(datetime.fromtimestamp(message.due_ms / 1000, UTC))))
        if not indexes:
            other += 1
            continue
        at_or_before = [i for i in indexes if to_epoch_ms(plan[i][1]) <= message.due_ms]
        grouped[max(at_or_before, key=lambda i: plan[i][1]) if at_or_before else indexes[0]].append(message)
    figures = [_minute_figures(minute, messages, counts, scans[minute], due)
               for (minute, due, _), messages, counts in zip(plan, grouped, seeded, strict=True)]
    runs = []
    for unloaded, loaded in zip(figures[0::2], figures[1::2], strict=True):
        delta = loaded["lateness_ms"][LIGHT]["p99"] - unloaded["lateness_ms"][LIGHT]["p99"]
        runs.append({"unloaded": unloaded, "loaded": loaded, "light_p99_delta_ms": delta, "met": delta <= GOAL_MS})
    bench.results["fairness"] = {
        "heavy": o.fairness_heavy, "light": o.fairness_light, "segments": segments, "processes": processes,
        "gap_s": o.fairness_gap_s, "clock": o.fairness_clock,
        "tenants": {"heavy": HEAVY, "light": LIGHT}, "goal_ms": GOAL_MS, "code": code_commit(), "path": _path(),
        "worker_code": sorted({f"{w['code']} ({w['path']})" for w in workers}), "seed_s": seed_s, "seed_spare_s": spare,
        "records_read": read.records, "messages_read": len(read.messages),
        "other_minutes": other, "runs": runs,
    }
