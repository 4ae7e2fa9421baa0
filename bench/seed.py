"""Seeding a minute bucket with due executions, fast: jobs and their rows written with
``execute_concurrent`` through the store's own statements and codec (so the rows are exactly what
the API would have written), not through the API. Seeding time is never part of a figure.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from bench.cql import run_all
from jobrunner.adapters.stores import codec
from jobrunner.adapters.stores.cassandra import INSERT_JOB, INSERT_SCHEDULED
from jobrunner.domain.jobs import Job, Lane, Trigger
from jobrunner.domain.placement import plan_execution
from jobrunner.domain.schedules import At, Every
from jobrunner.domain.spec import JobSpec
from jobrunner.domain.targets import HttpsTarget
from jobrunner.domain.time import from_epoch_ms

if TYPE_CHECKING:
    from jobrunner.domain.jobs import ScheduledExecution

TENANT_PREFIX = "bench-tenant"
PAD = "x" * 96
RECURRING_EVERY = timedelta(hours=1)


@dataclass(frozen=True)
class SeedSpec:
    bucket_ms: int
    count: int
    segment_count: int
    topic: str
    #: "start": every row due at the bucket's first instant (the worst burst); "spread": due at a
    #: random whole second of the minute.
    due: str = "start"
    recurring_share: float = 0.5
    tenants: int = 50
    seed: int = 0
    #: Every job of this tenant (e.g. one heavy tenant); None: spread over ``tenants`` bench tenants.
    tenant: str | None = None
    #: With ``due="start"``: every row due this long after the bucket's first instant instead.
    offset_ms: int = 0
    #: An HTTPS target's URL: every job delivers there (no topic: its executions go to the delivery topic).
    target_url: str | None = None


def make_job(index: int, due_at: datetime, topic: str, recurring: bool, tenant: str, now: datetime,
             target_url: str | None = None) -> Job:
    schedule = Every(every=RECURRING_EVERY, start=due_at) if recurring else At(at=due_at)
    payload = {"bench": True, "n": index, "pad": PAD}
    spec = (JobSpec(schedule=schedule, payload=payload, target=HttpsTarget(url=target_url)) if target_url
            else JobSpec(schedule=schedule, payload=payload, topic=topic))
    return Job(user_id=tenant, job_id=str(uuid.uuid4()), spec=spec, created_at=now, updated_at=now,
               next_run_at=due_at)


def generate(spec: SeedSpec) -> list[tuple[Job, ScheduledExecution]]:
    """Jobs (a mix of one-time and recurring) and their first run, in the PLANNED lane of the bucket."""
    rng = random.Random(spec.seed)
    bucket = from_epoch_ms(spec.bucket_ms)
    planned_at = bucket - timedelta(minutes=10)  # written well before the minute: the PLANNED lane
    out = []
    for index in range(spec.count):
        due_at = (bucket + timedelta(milliseconds=spec.offset_ms) if spec.due == "start"
                  else bucket + timedelta(seconds=rng.randrange(60)))
        tenant = spec.tenant or f"{TENANT_PREFIX}-{rng.randrange(spec.tenants)}"
        job = make_job(index, due_at, spec.topic, rng.random() < spec.recurring_share, tenant, planned_at,
                       spec.target_url)
        row = plan_execution(job, due_at, planned_at, spec.segment_count, trigger=Trigger.SCHEDULE)
        assert row.bucket == bucket and row.lane is Lane.PLANNED, (row.bucket, row.lane)
        out.append((job, row))
    return out


def insert(session: Any, pairs: list[tuple[Job, ScheduledExecution]], concurrency: int = 128) -> float:
    """Write the jobs and rows; returns the seconds it took."""
    insert_job = session.prepare(INSERT_JOB)
    insert_row = session.prepare(INSERT_SCHEDULED)
    statements: list[tuple[Any, Any]] = []
    for job, row in pairs:
        statements.append((insert_job, codec.job_values(job)))
        statements.append((insert_row, codec.scheduled_values(row)))
    started = time.monotonic()
    for start in range(0, len(statements), 20_000):
        run_all(session, statements[start:start + 20_000], concurrency)
    return time.monotonic() - started


def seed(session: Any, spec: SeedSpec, want_keys: bool = False) -> dict[str, Any]:
    pairs = generate(spec)
    seconds = insert(session, pairs)
    per_segment = Counter(row.segment for _, row in pairs)
    recurring = sum(1 for job, _ in pairs if job.spec.schedule.recurring)
    result: dict[str, Any] = {"count": len(pairs), "seconds": seconds, "per_segment": dict(per_segment),
                              "recurring": recurring}
    if want_keys:
        result["keys"] = [(job.user_id, job.job_id) for job, _ in pairs]
    return result


def empty(store: Any, buckets: list[datetime], segments: int) -> bool:
    """No row in any lane of ``segments`` of ``buckets``: other sections' recurring jobs plan their next
    fires into later minutes, so a fresh minute may not be empty."""
    return not any(next(iter(store.lane_rows(bucket, segment, lane)), None) is not None
                   for bucket in buckets for segment in range(segments) for lane in Lane)
