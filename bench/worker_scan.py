"""One scan in a worker process: its adapters (a ``Slot`` per segment and variant: its own store, Kafka
producer and counting proxies, built once and warmed) and a timed run of the real ``ScanService`` on them."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from bench.instruments import CallCounter, CountingSession, Phases, SkipClock, Timed
from jobrunner import wiring
from jobrunner.adapters.clocks.system import SystemClock
from jobrunner.adapters.leases.dynamodb import DynamoDBLeaseStore
from jobrunner.adapters.publishers.kafka import KafkaPublisher
from jobrunner.adapters.stores.cassandra import DEFAULT_BATCH_ROWS, KEYSPACES_MAX_IN, CassandraJobStore
from jobrunner.domain.time import from_epoch_ms
from jobrunner.ports import Clock, ScanRequest
from jobrunner.services.jobs import NoCalendars
from jobrunner.services.retire import NoRetirer
from jobrunner.services.scan import ScanRules, ScanService
from jobrunner.services.wake import NoWaker

if TYPE_CHECKING:
    from bench.variants import Variant
    from jobrunner.config import Settings


class Slot:
    """One scan's adapters (a segment's): its own store, Kafka producer and counting proxies."""

    def __init__(self, settings: Settings, session: Any, dynamodb: Any, variant: Variant) -> None:
        self.variant = variant
        self.session = CountingSession(session)
        concurrency = variant.concurrency or 64
        per_row = 1 if variant.single_requests else None  # the variant's one request per row
        self.store = CassandraJobStore(self.session, concurrency=concurrency, batch_rows=per_row or DEFAULT_BATCH_ROWS,
                                       in_keys=per_row or KEYSPACES_MAX_IN)
        self.publisher = KafkaPublisher(settings.kafka)
        self.dynamodb = CallCounter(dynamodb)
        self.leases = DynamoDBLeaseStore(settings.heartbeat_table, self.dynamodb)
        self.publisher.producer.partitions_for(settings.topic)  # connect before any clock starts
        self.store.get_jobs([("warm-up", "warm-up")])


def scan_one(settings: Settings, slot: Slot, segment: int, bucket_ms: int, segment_count: int, clock_kind: str,
             start_at: float, keep_lateness: bool, rules: dict[str, Any] | None,
             prefetched: Any = None) -> dict[str, Any]:
    """Scan one segment's partition of ``bucket_ms`` on ``slot``'s adapters, timed from ``start_at``, with the
    Container's rules or a variant's (``rules``); returns the report, the time in each port and what was sent."""
    bucket = from_epoch_ms(bucket_ms)
    slot.session.reset()
    slot.dynamodb.calls.clear()
    phases = Phases()
    store = Timed(prefetched if prefetched is not None else slot.store, phases, "store")
    publisher = Timed(slot.publisher, phases, "publisher")
    leases = Timed(slot.leases, phases, "heartbeats")
    delay = start_at - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    clock: Clock = SkipClock(bucket, start_at) if clock_kind == "skip" else SystemClock()
    container = wiring.Container(settings.replace(segments=segment_count),
                                 store=store, publisher=publisher, leases=leases,  # type: ignore[arg-type]
                                 clock=clock, session=slot.session)
    scans = container.scans
    if rules:  # a variant of the scan's rules (experiments); otherwise exactly what the Container builds
        scans = ScanService(store, publisher, leases, clock,  # type: ignore[arg-type]
                            ScanRules(segment_count=segment_count, **rules), outcomes=container.outcomes,
                            waker=NoWaker(), calendars=NoCalendars(), retirer=NoRetirer())
    thread_cpu = time.thread_time()
    crashed = None
    try:
        report = scans.scan(ScanRequest(segment=segment, bucket=bucket))
    except Exception as exc:  # e.g. a partition page read timing out on the loaded servers: the scan
        # ends (in AWS its lease would expire and the tick would dispatch the partition again)
        crashed = f"{type(exc).__name__}: {exc}"[:500]
        report = None
    ended = time.monotonic()
    publish = phases.by_name.get("publisher.publish")
    last_ack = publish.last_end if publish and publish.last_end else None
    if report is None:
        return {"segment": segment, "crashed": crashed, "acquired": True, "finished": False, "lost_lease": False,
                "published": publish.items if publish else 0, "dropped": 0, "errors": 1,
                "drain_s": (last_ack - start_at) if last_ack else None, "scan_s": ended - start_at,
                "thread_cpu_s": time.thread_time() - thread_cpu, "phases": phases.as_dict(),
                "phases_at_last_ack": dict(phases.at_mark), "cassandra": slot.session.tally.as_dict(),
                "dynamodb_calls": dict(slot.dynamodb.calls), "lateness_ms": [], "skipped_s": 0.0}
    return {
        "segment": segment, "crashed": None,
        "acquired": report.acquired, "finished": report.finished, "lost_lease": report.lost_lease,
        "published": report.published, "dropped": report.dropped, "errors": report.errors,
        "drain_s": (last_ack - start_at) if last_ack else None,
        "scan_s": ended - start_at,
        "thread_cpu_s": time.thread_time() - thread_cpu,
        "phases": phases.as_dict(),
        "phases_at_last_ack": dict(phases.at_mark),
        "cassandra": slot.session.tally.as_dict(),
        "dynamodb_calls": dict(slot.dynamodb.calls),
        "lateness_ms": report.lateness_ms if keep_lateness else [],
        "skipped_s": clock.skipped_s if isinstance(clock, SkipClock) else 0.0,
    }
