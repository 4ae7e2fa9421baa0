"""What the fault suites share: the stack on the suite's own servers, and a reader of what it published."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from kafka import KafkaConsumer, TopicPartition

from devstack import servers
from devstack.process_invoker import ProcessInvoker
from devstack.stack import LocalStack, endpoint_settings, local_settings
from jobrunner.adapters.publishers.topics import ensure_topics
from jobrunner.config import Settings

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path


T = TypeVar("T")
R = TypeVar("R", covariant=True)


@dataclass
class Fault:
    """A fault a suite injected: what, when, and how long the system took to recover from it."""

    kind: str
    at: str
    detail: str
    recovery_s: float | None = None


def poll(probe: Callable[[], T], *, within_s: float, every_s: float = 0.5,
         clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], object] = time.sleep) -> T:
    """``probe()`` until it returns something true, every ``every_s``, for at most ``within_s``; its last value.

    How a suite makes a fault meet what it is meant to meet instead of hoping it does (a scan to kill, a
    request to refuse), with a bound. ``sleep`` may be ``threading.Event.wait``: a true answer (the event was
    set) ends the wait early."""
    deadline = clock() + within_s
    while True:
        value = probe()
        left = deadline - clock()
        if value or left <= 0:
            return value
        if sleep(min(every_s, left)):
            return probe()


def fault_table(faults: list[Fault]) -> list[str]:
    """The faults as a Markdown table."""
    return ["| fault | at | detail | time to recover |", "|---|---|---|---|",
            *(f"| {f.kind} | {f.at} | {f.detail} | {'-' if f.recovery_s is None else f'{f.recovery_s:.1f} s'} |"
              for f in faults)]


class Suite(Protocol[R]):
    def start(self) -> None: ...

    def run(self) -> R: ...

    def close(self, keep_servers: bool) -> None: ...


def run_suite(suite: Suite[R], keep_servers: bool) -> R:
    """Start ``suite``, run it and close it (stopping its servers unless asked to keep them)."""
    suite.start()
    try:
        return suite.run()
    finally:
        suite.close(keep_servers)


class Collector(Generic[T]):
    """Reads every message of ``topics`` from their offsets at the start, across broker restarts.

    ``parse(topic, value, published)`` turns each message (its JSON value and its timestamp) into what
    ``seen`` keeps.
    """

    def __init__(self, bootstrap: str, parse: Callable[[str, dict[str, Any], datetime], T],
                 topics: Sequence[str] = ("jobs",)) -> None:
        self._parse = parse
        self._consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), enable_auto_commit=False,
                                       group_id=None, reconnect_backoff_max_ms=1000)
        partitions = [TopicPartition(topic, p) for topic in topics
                      for p in sorted(self._consumer.partitions_for_topic(topic) or [])]
        self._consumer.assign(partitions)
        self._consumer.seek_to_end(*partitions)
        for tp in partitions:
            self._consumer.position(tp)
        self.seen: list[T] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                batches = self._consumer.poll(timeout_ms=500)
            except Exception:
                time.sleep(1)
                continue
            for records in batches.values():
                for r in records:
                    published = datetime.fromtimestamp(r.timestamp / 1000, tz=UTC)
                    self.seen.append(self._parse(r.topic, json.loads(r.value), published))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._consumer.close()


@dataclass
class ChaosStack:
    """The whole system on the suite's servers, with its scans in processes of their own."""

    endpoints: servers.Endpoints
    settings: Settings
    invoker: ProcessInvoker
    stack: LocalStack
    #: Stops the suite's servers (the single-node ones; a cluster suite stops its cluster).
    stop_servers: Callable[[], object] = servers.stop_all

    def close(self, keep_servers: bool) -> None:
        self.invoker.stop_all()
        self.stack.stop()
        if not keep_servers:
            self.stop_servers()


def start_stack(segments: int, name: str, *, auto_tick: bool = False, topics: Sequence[str] = (),
                endpoints: servers.Endpoints | None = None, log_dir: Path | None = None,
                one_scan_per_partition: bool = False, **overrides: object) -> ChaosStack:
    """Start (or reuse) the suite's servers and run the system on a keyspace, heartbeat table and tenant
    of its own (``name`` tells the suites apart in them). ``topics`` are created first (a consumer that
    subscribes to a topic not there yet may wait minutes for its next metadata refresh); ``overrides``
    are more settings (attributes of ``Settings``), given to the scan processes too. ``endpoints``: servers
    started already (a cluster), instead of the single-node ones; ``log_dir``: where the scans log;
    ``one_scan_per_partition``: see ``devstack.process_invoker``."""
    endpoints = endpoints or servers.ensure_all()
    run_id = uuid.uuid4().hex[:8]
    own = {**endpoint_settings(endpoints), "keyspace": f"jr_{name}_{run_id}", "heartbeat_table": f"hb-{name}-{run_id}",
           "segments": segments, **overrides}
    env = Settings.of(**own).to_environment(given_only=True)
    settings = local_settings(
        endpoints, env,
        initial_lookback_minutes=1,  # a fresh heartbeat table: no long-past minutes to scan
    )
    if topics:
        ensure_topics(endpoints.kafka_bootstrap, list(topics), replication=settings.kafka.topic_replication)
    invoker = ProcessInvoker({**os.environ, **env}, (log_dir or servers.LOG_DIR) / f"{name}-scans.log",
                             one_per_partition=one_scan_per_partition)
    stack = LocalStack(settings, port=0, tenant=f"{name}-{run_id}", example_worker=False,
                       auto_tick=auto_tick, invoker=invoker).start()
    return ChaosStack(endpoints, settings, invoker, stack)
