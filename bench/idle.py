"""Idle cost: how long scans run, and how often they are started, for partitions with nothing to do.

``segments`` segments with no job at all, ``minutes`` minutes of ticks, on the real Cassandra store,
Kafka publisher and a heartbeat table of the section's own (moto). Each minute's tick runs at second 1
of its minute, as EventBridge's rule does; every scan it asks for runs to its end on a clock of its own
that starts at the tick and skips its sleeps (so a scan's duration is the time it would hold a Lambda
invocation, measured on that clock, not on the machine). Scans of idle partitions never touch one
another's work, so running them one after the other decides what running them side by side would. Per
(minute, segment) of the steady minutes (the first ticks' catch-up excluded): scan invocations, and the
seconds they ran. The same code measures an older ``jobrunner`` when that checkout comes first on the path.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from bench.instruments import SkipClock
from bench.machine import code_commit
from bench.seed import empty
from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.domain.time import MINUTE, minute_bucket
from jobrunner.ports import Invoker, ScanRequest

if TYPE_CHECKING:

    from bench.context import Bench

TICK_SECOND = timedelta(seconds=1)


class _Requests(Invoker):
    def __init__(self) -> None:
        self.requests: list[ScanRequest] = []

    def invoke_scan(self, request: ScanRequest) -> None:
        self.requests.append(request)


def idle_once(bench: Bench, segments: int, minutes: int) -> dict[str, Any]:
    import time

    import boto3

    from jobrunner.adapters.leases.dynamodb import DynamoDBLeaseStore, ensure_table
    from jobrunner.wiring import Container

    table = f"{bench.settings.heartbeat_table}-idle-{uuid.uuid4().hex[:6]}"
    settings = bench.settings.replace(segments=segments, heartbeat_table=table)
    dynamodb = boto3.client("dynamodb", region_name=settings.region, endpoint_url=settings.dynamodb_endpoint)
    ensure_table(dynamodb, table)
    first = bench.next_bucket()
    for _ in range(minutes + 4):
        bench.next_bucket()  # the minutes this run ticks through: no other section may use them
    base = Container(settings)
    # Move on to minutes that hold no row at all (an hour later each time): every partition scanned is idle.
    while not empty(base.store, [first + m * MINUTE for m in range(-10, minutes + 3)], segments):
        first += timedelta(hours=1)
    leases = DynamoDBLeaseStore(table, dynamodb)
    invocations: dict[tuple[int, str], list[float]] = defaultdict(list)
    try:
        for minute in range(minutes + 3):
            tick_at = first + minute * MINUTE + TICK_SECOND
            requests = _Requests()
            ticker = Container(settings, store=base.store, session=base.session, publisher=base.publisher,
                               leases=leases, invoker=requests, clock=ManualClock(tick_at))
            ticker.ticks.tick(tick_at, tick_at)
            for request in requests.requests:
                clock = SkipClock(tick_at, time.monotonic())
                scanner = Container(settings, store=base.store, session=base.session, publisher=base.publisher,
                                    leases=leases, invoker=_Requests(), clock=clock)
                scanner.scans.scan(request)
                invocations[(request.segment, f"{request.bucket:%H:%M}")].append(
                    (clock.now() - tick_at).total_seconds())
    finally:
        base.publisher.close()
        dynamodb.delete_table(TableName=table)
    steady = [f"{first + m * MINUTE:%H:%M}" for m in range(2, minutes)]
    counted = [invocations[(s, b)] for s in range(segments) for b in steady]
    partitions = max(len(counted), 1)
    return {
        "code": code_commit(), "segments": segments, "minutes": len(steady),
        "invocations_per_partition": sum(len(c) for c in counted) / partitions,
        "scan_seconds_per_partition": sum(sum(c) for c in counted) / partitions,
        "longest_scan_s": max((max(c) for c in counted if c), default=0.0),
        "first": f"{minute_bucket(first):%H:%M}",
    }


def run_idle(bench: Bench) -> None:
    o = bench.options
    runs = []
    for index in range(o.runs):
        r = idle_once(bench, o.idle_segments, o.idle_minutes)
        print(f"  idle run {index + 1}/{o.runs} ({r['code']}): {r['segments']} segments x {r['minutes']} minutes "
              f"with nothing to do: {r['invocations_per_partition']:.2f} scan invocations and "
              f"{r['scan_seconds_per_partition']:.1f} s of scan per (minute, segment); longest scan "
              f"{r['longest_scan_s']:.1f} s", flush=True)
        runs.append(r)
    bench.results["idle"] = runs
