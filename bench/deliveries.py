"""Deliveries (issue #35): how late an HTTPS target receives its executions, and how many it receives per second,
beside the Kafka path's figures for the same load in the same run and beside a raw HTTPS ceiling.

Per run, four consecutive real wall-clock minutes, scanned as the lateness section scans them (the real scan on
the real Cassandra, publishing to the real local Kafka, each minute's scans started 10 s ahead):
- *Kafka path, spread*: ``deliveries_executions`` one-time jobs due at random whole seconds of the minute, on a
  topic that a consumer of the section's own reads as the records come (arrival = when its ``poll`` returned them);
- *Kafka path, burst*: ``deliveries_burst`` one-time jobs, all due at the minute's first instant;
- *delivered, spread* and *delivered, burst*: the same loads, each job with an HTTPS target on the section's
  receiver (``bench.receiver``: a process of its own, a certificate of a local CA trusted through
  ``Settings.target_ca_bundle``, loopback allow-listed through ``Settings.target_address_allow``, as the end-to-end
  tests do). The scans put them on the delivery topic; the real delivery function (``functions/delivery``) consumes
  it in a process of its own, fed as ``make run`` feeds it (``devstack.stack.consume``: batches of at most 100
  records), calls the receiver through the real ``HttpsDeliverer`` and publishes each outcome to the results topic.
  The jobs are spread over as many tenants as the delivery's concurrency allows calls at once
  (``delivery_concurrency`` ÷ ``delivery_tenant_concurrency``), each with the section's webhook secret.

Latency is the arrival (at the receiver, or at the Kafka consumer) minus the due instant (the
``jobrunner-scheduled-time`` header, or the message's ``scheduled_at``); the CreateTime of each record (when the
scan published it) minus the due instant is given beside, which splits the scan's part from the rest. Throughput is
the burst's executions over the time from the due instant to the last arrival. The ceiling, measured after each
run from the delivery function's process when it is idle: signed POSTs of the same size to the same receiver from
as many threads as the delivery's concurrency, a new TCP and TLS connection per request as the deliverer makes
(and, for reference, one kept-alive connection per thread). Every delivery is checked: received once (duplicates
are reported), its signature verified by the Standard Webhooks library at the receiver, and its outcome reported
SUCCESS on the results topic.

``Options.deliveries_clock="skip"`` (the smoke test, which counts and never times): far-future minutes scanned with
a clock that never waits, so the loads arrive in seconds; latencies are then meaningless and not reported.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import shutil
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from bench.context import CpuSampler
from bench.fullstack import end_offsets, read_records
from bench.lateness import START_AHEAD, create_times, scan_minutes, summary
from bench.receiver import Receiver
from bench.worker_pool import WorkerPool, split
from jobrunner.domain.time import MINUTE, minute_bucket, to_epoch_ms

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bench.context import Bench
    from bench.receiver import Arrival
    from jobrunner.config import Settings

#: The four minutes of a run, in order.
LOADS = ("kafka_spread", "kafka_burst", "delivered_spread", "delivered_burst")
#: Seeding rate assumed when choosing the first minute (executions/s, conservative on the shared servers).
SEED_RATE = 1000.0
#: Time for the seeding to start and the scans to be prepared, beyond the seeding itself.
SEED_MARGIN = timedelta(seconds=20)
#: The receiver's path for deliveries, and for the ceiling's requests.
DELIVERY_PATH = "/bench/deliveries"
CEILING_PATH = "/bench/ceiling"
#: The payload of every job (the seed's), which is the body the deliverer sends and the ceiling's body.
PAYLOAD_PAD = "x" * 96


# -- pure helpers: what the receiver's and the consumer's records mean --------------------------------------------


def parse_instant(text: str) -> float:
    """An RFC 3339 instant (``2026-11-28T23:00:05Z``, ``...05.000Z``) as epoch seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def arrivals_by_minute(arrivals: Sequence[Arrival]) -> dict[int, list[Arrival]]:
    """The arrivals grouped by their due minute (epoch ms of the scheduled time's minute); an arrival without a
    scheduled time (not a delivery) under -1."""
    out: dict[int, list[Arrival]] = {}
    for arrival in arrivals:
        scheduled = arrival[1]
        key = (to_epoch_ms(minute_bucket(datetime.fromisoformat(scheduled.replace("Z", "+00:00"))))
               if scheduled else -1)
        out.setdefault(key, []).append(arrival)
    return out


def check_arrivals(arrivals: Sequence[Arrival], expected: int) -> dict[str, Any]:
    """What the receiver got for one load of ``expected`` executions: each once, verified, or not; the latency of
    each execution's first copy (arrival - due, ms) and its arrival (epoch seconds)."""
    first: dict[str, tuple[float, float]] = {}
    copies: Counter[str] = Counter()
    unverified = 0
    for webhook_id, scheduled, arrived, verified in arrivals:
        copies[webhook_id] += 1
        unverified += not verified
        if webhook_id not in first or arrived < first[webhook_id][0]:
            first[webhook_id] = (arrived, parse_instant(scheduled))
    latencies = [(arrived - due) * 1000 for arrived, due in first.values()]
    return {"expected": expected, "received": len(arrivals), "unique": len(first),
            "duplicates": sum(n - 1 for n in copies.values()), "unverified": unverified,
            "missing": max(0, expected - len(first)), "latency_ms": latencies,
            "arrivals_s": [arrived for arrived, _ in first.values()]}


def throughput(due_s: float, arrivals_s: Sequence[float]) -> dict[str, float]:
    """A burst due at ``due_s`` that arrived at ``arrivals_s`` (epoch seconds, one per execution): the first and the
    last arrival after the due instant, and executions per second up to the last."""
    if not arrivals_s:
        return {"count": 0, "first_s": float("nan"), "last_s": float("nan"), "rate": float("nan")}
    first, last = min(arrivals_s) - due_s, max(arrivals_s) - due_s
    return {"count": len(arrivals_s), "first_s": first, "last_s": last,
            "rate": len(arrivals_s) / last if last > 0 else float("nan")}


def latency_summary(values: list[float]) -> dict[str, float]:
    """``lateness.summary`` (p50, p95, p99, max, count) of latencies in ms."""
    return summary(values)


# -- the Kafka path's consumer ----------------------------------------------------------------------------------


class _KafkaArrivals:
    """A consumer of the Kafka path's topic, from its end: each record's execution id, due instant, CreateTime and
    the instant its ``poll`` returned it (what a worker would see)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self._consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None,
                                       enable_auto_commit=False)
        partitions = [TopicPartition(topic, p) for p in sorted(self._consumer.partitions_for_topic(topic) or [])]
        self._consumer.assign(partitions)
        self._consumer.seek_to_end(*partitions)
        for tp in partitions:
            self._consumer.position(tp)
        self.records: list[tuple[str, float, float, float]] = []  # execution id, due s, CreateTime s, arrival s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kafka-path-consumer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for batch in self._consumer.poll(timeout_ms=200).values():
                    arrived = time.time()
                    for record in batch:
                        value = json.loads(record.value)
                        self.records.append((value["execution_id"], parse_instant(value["scheduled_at"]),
                                             record.timestamp / 1000, arrived))
        finally:
            self._consumer.close()

    def wait_for(self, count: int, deadline: float) -> None:
        while len(self.records) < count and time.time() < deadline:
            time.sleep(0.25)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


# -- the section ------------------------------------------------------------------------------------------------


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


def tenants_for(settings: Settings) -> list[str]:
    """As many tenants as the delivery's batch runs calls at once: each tenant is capped at its own share."""
    count = max(1, settings.delivery_concurrency // settings.delivery_tenant_concurrency)
    return [f"bench-tenant-{n}" for n in range(count)]


def section_settings(bench: Bench, secret: str, ca_bundle: str) -> Settings:
    """The run's settings with the targets' local trust: loopback allow-listed, the local CA trusted, and the
    section's secret for each of its tenants, kept under a prefix of the run's own (where the secrets are kept in
    moto's Secrets Manager, a tenant's secret outlives the run: the next run's seed would not replace it, and its
    deliveries would be signed with the last run's); and no per-tenant delivery rate (``delivery_tenant_rate`` 0),
    so that the burst measures what the delivery function can do, not the pacing a stage sets (reported beside
    it: ``paced_bound``)."""
    return bench.settings.replace(target_address_allow=("127.0.0.0/8",), target_ca_bundle=ca_bundle,
                                  webhook_secrets={t: [secret] for t in tenants_for(bench.settings)},
                                  webhook_secret_prefix=f"{bench.settings.webhook_secret_prefix}{bench.names.run_id}/",
                                  delivery_tenant_rate=0)


def paced_bound(settings: Settings) -> int:
    """The most deliveries a second the section's tenants would get from one delivery function instance under the
    stage's default per-tenant rate (``delivery_tenant_rate``, 0: none)."""
    return len(tenants_for(settings)) * settings.delivery_tenant_rate


def _scan_skipping(bench: Bench, minutes: list[datetime], segments: int) -> None:
    """The smoke test's scans: each minute with a clock that starts at it and never waits (``drain_once``'s)."""
    processes = min(len(bench.pool), segments)
    groups = split(list(range(segments)), processes)
    for minute in minutes:
        jobs = [(i, "scan", {"segments": group, "bucket_ms": to_epoch_ms(minute), "segment_count": segments})
                for i, group in enumerate(groups)]
        bench.pool.synchronized(jobs, timeout=600)


def _minutes(bench: Bench, seeded: int) -> list[datetime]:
    if bench.options.deliveries_clock == "skip":
        return [bench.next_bucket() for _ in LOADS]
    lead = SEED_MARGIN + timedelta(seconds=seeded / SEED_RATE) + START_AHEAD
    first = minute_bucket(datetime.now(UTC) + lead) + MINUTE
    return [first + i * MINUTE for i in range(len(LOADS))]


def _seed(bench: Bench, minutes: list[datetime], url: str, segments: int) -> dict[str, int]:
    o = bench.options
    names = bench.names
    tenants = len(tenants_for(bench.settings))
    sizes = {"kafka_spread": o.deliveries_executions, "kafka_burst": o.deliveries_burst,
             "delivered_spread": o.deliveries_executions, "delivered_burst": o.deliveries_burst}
    for load, minute in zip(LOADS, minutes, strict=True):
        due = "spread" if load.endswith("spread") and o.deliveries_clock != "skip" else "start"
        if load.startswith("kafka"):
            bench.seed(minute, sizes[load], segments, topic=names.kafka_path_topic, due=due, recurring_share=0.0)
        else:
            bench.seed(minute, sizes[load], segments, due=due, recurring_share=0.0, tenants=tenants, target_url=url)
    return sizes


def _results(bench: Bench, start: dict[int, int], ours: set[str]) -> dict[str, int]:
    """The outcomes the delivery function reported for ``ours`` (execution ids), by status, first copy each."""
    seen: dict[str, str] = {}
    for _, value in read_records(bench.settings.kafka.bootstrap, bench.names.results_topic, start):
        execution = value.get("execution_id")
        if execution in ours:
            seen.setdefault(execution, value.get("status", "?"))
    return dict(Counter(seen.values()))


def _once(bench: Bench, receiver: Receiver, delivery: WorkerPool, secret: str, ca_bundle: str,
          pids: dict[str, int], published_so_far: int) -> dict[str, Any]:
    o = bench.options
    segments = o.lateness_segments
    url = receiver.url(DELIVERY_PATH)
    total = 2 * (o.deliveries_executions + o.deliveries_burst)
    minutes = _minutes(bench, total)
    results_start = end_offsets(bench.settings.kafka.bootstrap, bench.names.results_topic)
    sizes = _seed(bench, minutes, url, segments)
    consumer = _KafkaArrivals(bench.settings.kafka.bootstrap, bench.names.kafka_path_topic)
    delivered = sizes["delivered_spread"] + sizes["delivered_burst"]
    kafka = sizes["kafka_spread"] + sizes["kafka_burst"]
    by_load = dict(zip(LOADS, minutes, strict=True))
    try:
        with CpuSampler(pids) as sampler:
            if o.deliveries_clock == "skip":
                _scan_skipping(bench, minutes, segments)
            else:
                scan_minutes(bench, minutes, segments, label="deliveries")
            deadline = time.time() + max(120.0, o.deliveries_burst / 20)
            while receiver.count() < delivered and time.time() < deadline:
                time.sleep(0.25)
            consumer.wait_for(kafka, deadline)
            arrivals = receiver.take()
            burst_due = by_load["delivered_burst"].timestamp()
            last = max((a[2] for a in arrivals), default=burst_due)
            offset = time.monotonic() - time.time()
            cpu = sampler.window(burst_due + offset, last + offset)
    finally:
        consumer.close()
    grouped = arrivals_by_minute(arrivals)
    out: dict[str, Any] = {"minutes": {load: m.isoformat() for load, m in by_load.items()}, "sizes": sizes,
                           "cpu_burst": cpu}
    burst_arrivals: list[float] = []
    for load in ("delivered_spread", "delivered_burst"):
        checked = check_arrivals(grouped.get(to_epoch_ms(by_load[load]), []), sizes[load])
        latencies, burst_arrivals = checked.pop("latency_ms"), checked.pop("arrivals_s")
        out[load] = {**checked, "latency_ms": latency_summary(latencies)}
    out["foreign_arrivals"] = len(grouped.get(-1, []))
    first_arrivals = {a[0] for a in arrivals}
    out["delivered_burst"]["throughput"] = throughput(by_load["delivered_burst"].timestamp(), burst_arrivals)
    # The scan's part: each delivered execution's record on the delivery topic, its CreateTime - due.
    created = create_times(bench, published_so_far + delivered, topic=bench.names.delivery_topic)
    for load in ("delivered_spread", "delivered_burst"):
        minute_ms = to_epoch_ms(by_load[load])
        out[load]["publish_ms"] = latency_summary([ms for m, ms in created.values() if m == minute_ms])
    # The Kafka path: each record's arrival at the consumer and CreateTime, minus its due instant.
    for load in ("kafka_spread", "kafka_burst"):
        minute_s = by_load[load].timestamp()
        first: dict[str, tuple[float, float, float]] = {}
        copies: Counter[str] = Counter()
        for execution, due, created_s, arrived in consumer.records:
            if minute_s <= due < minute_s + 60:
                copies[execution] += 1
                first.setdefault(execution, (due, created_s, arrived))
        out[load] = {"expected": sizes[load], "unique": len(first), "duplicates": sum(n - 1 for n in copies.values()),
                     "missing": max(0, sizes[load] - len(first)),
                     "latency_ms": latency_summary([(a - d) * 1000 for d, _, a in first.values()]),
                     "publish_ms": latency_summary([(c - d) * 1000 for d, c, _ in first.values()])}
        if load == "kafka_burst":
            out[load]["throughput"] = throughput(minute_s, [a for _, _, a in first.values()])
    out["results"] = _results(bench, results_start, first_arrivals)
    out["ceiling"] = _ceiling(bench, receiver, delivery, secret, ca_bundle)
    return out


def _ceiling(bench: Bench, receiver: Receiver, delivery: WorkerPool, secret: str, ca_bundle: str
             ) -> dict[str, Any]:
    """The raw HTTPS rate to the receiver, from the delivery function's process, new connections then kept-alive."""
    threads = bench.settings.delivery_concurrency
    body = json.dumps({"bench": True, "n": 0, "pad": PAYLOAD_PAD}).encode()
    out: dict[str, Any] = {"threads": threads}
    for mode, keep_alive in (("new_connection", False), ("keep_alive", True)):
        result = delivery.call(0, "https_ceiling", url=receiver.url(CEILING_PATH), ca_bundle=ca_bundle, secret=secret,
                               body=body, count=bench.options.deliveries_burst, threads=threads,
                               keep_alive=keep_alive).result(timeout=900)
        taken = receiver.take()
        result["received"] = len(taken)
        result["verified"] = sum(1 for a in taken if a[3])
        out[mode] = result
    return out


def run_deliveries(bench: Bench) -> None:
    from cryptography import x509

    from devstack.certificates import Certificates

    o = bench.options
    secret = new_secret()
    directory = o.work_dir / f"deliveries-tls-{bench.names.run_id}"
    directory.mkdir(parents=True, exist_ok=True)
    certificates = Certificates(directory)
    pem = certificates.server_pem(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    settings = section_settings(bench, secret, str(certificates.bundle))
    runs: list[dict[str, Any]] = []
    with Receiver(pem, secret) as receiver, WorkerPool(settings, 1) as delivery:
        started = delivery.call(0, "start_deliveries").result(timeout=120)
        pids = {**bench.pids(), "delivery": started["pid"], "receiver": receiver.process.pid or 0}
        try:
            published = 0
            for index in range(o.runs):
                run = _once(bench, receiver, delivery, secret, str(certificates.bundle), pids, published)
                published += run["sizes"]["delivered_spread"] + run["sizes"]["delivered_burst"]
                runs.append(run)
                burst, spread = run["delivered_burst"], run["delivered_spread"]
                print(f"  deliveries run {index + 1}/{o.runs}: spread p50 {spread['latency_ms']['p50']:.0f} ms, "
                      f"p99 {spread['latency_ms']['p99']:.0f} ms (Kafka path "
                      f"{run['kafka_spread']['latency_ms']['p99']:.0f} ms); burst "
                      f"{burst['throughput']['rate']:.0f}/s (Kafka path {run['kafka_burst']['throughput']['rate']:.0f}"
                      f"/s; ceiling {run['ceiling']['new_connection']['rate']:.0f}/s new connections, "
                      f"{run['ceiling']['keep_alive']['rate']:.0f}/s kept alive); {burst['unique']:,}/"
                      f"{burst['expected']:,} received, {burst['duplicates']} duplicates, "
                      f"{burst['unverified']} unverified; results {run['results']}", flush=True)
        finally:
            delivery.call(0, "stop_deliveries").result(timeout=120)
            shutil.rmtree(directory, ignore_errors=True)
    rules = bench.settings
    bench.results["deliveries"] = {
        "runs": runs, "executions": o.deliveries_executions, "burst": o.deliveries_burst,
        "segments": o.lateness_segments, "clock": o.deliveries_clock, "tenants": len(tenants_for(rules)),
        "concurrency": rules.delivery_concurrency, "tenant_concurrency": rules.delivery_tenant_concurrency,
        "batch_records": _batch_records(), "tenant_rate": rules.delivery_tenant_rate, "paced_bound": paced_bound(rules),
    }


def _batch_records() -> int:
    from devstack.stack import BATCH_RECORDS

    return BATCH_RECORDS
