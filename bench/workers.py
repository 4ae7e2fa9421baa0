"""Worker processes: real parallelism on a small machine (the GIL caps one Python process at one core).

Each worker is a spawned process holding its own driver session, Kafka producers and DynamoDB client,
built as ``wiring.Container`` builds them. The parent sends it commands; a timed command runs in two
steps, ``prepare`` (everything that must not be measured: building statements, connecting, warming)
then ``go`` at an instant agreed by all workers (``time.monotonic`` is system-wide on Linux), so the
figures of several processes add up. This module is the worker's side; the parent's (spawning the
processes, sending commands, collecting replies) is ``bench.worker_pool``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import sys
import threading
import traceback
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

import jobrunner
from bench import raw
from bench.clients import drive, one_event_at_a_time
from bench.machine import code_commit
from bench.seed import seed
from bench.variants import VARIANTS, PrefetchedJobs, use_driver_rows
from bench.worker_scan import Slot, scan_one
from devstack import gateway
from devstack.environments import Environments
from devstack.lambda_context import LocalContext
from jobrunner import wiring
from jobrunner.adapters.stores.session import connect
from jobrunner.domain.time import from_epoch_ms

if TYPE_CHECKING:
    from collections.abc import Callable
    from multiprocessing.connection import Connection

    from bench.variants import Variant
    from jobrunner.config import Settings

log = logging.getLogger(__name__)


class _Worker:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.session = connect(settings.cassandra)
        config = Config(max_pool_connections=64, retries={"mode": "standard", "max_attempts": 5})
        self.dynamodb = boto3.client("dynamodb", region_name=settings.region,
                                     endpoint_url=settings.dynamodb_endpoint, config=config)
        self._sessions: dict[bool, Any] = {False: self.session}
        self._slots: dict[Any, Slot] = {}
        self._slots_lock = threading.Lock()
        self._pending: dict[str, Callable[[float], Any]] = {}
        self._statements: Any = None
        self._examples: dict[tuple[str, str], Any] = {}
        self._producers: list[Any] = []
        self._api: Any = None
        self._environments: Any = None
        self._api_container: Any = None
        self._deliveries_stop = threading.Event()
        self._deliveries: threading.Thread | None = None

    def session_for(self, variant: Variant) -> Any:
        """The driver session; the driver-rows variant gets one of its own (row factories are per profile)."""
        if variant.driver_rows not in self._sessions:
            session = connect(self.settings.cassandra)
            use_driver_rows(session)
            self._sessions[variant.driver_rows] = session
        return self._sessions[variant.driver_rows]

    def slot(self, key: tuple[Any, ...], variant: str = "baseline") -> Slot:
        with self._slots_lock:
            slot = self._slots.get((*key, variant))
            if slot is None:
                chosen = VARIANTS[variant]
                slot = self._slots[(*key, variant)] = Slot(self.settings, self.session_for(chosen), self.dynamodb,
                                                           chosen)
            return slot

    def examples(self, keys: list[tuple[str, str]], topic: str) -> list[Any]:
        """``raw.Example`` per job key, built once per worker (building them is not what is measured)."""
        out = []
        for index, key in enumerate(keys):
            example = self._examples.get(key)
            if example is None or example.topic != topic:
                example = self._examples[key] = raw.Example(key, index, topic, recurring=index % 2 == 0)
            out.append(example)
        return out

    def statements(self) -> Any:
        if self._statements is None:
            self._statements = raw.Statements(self.session)
        return self._statements

    # -- plain commands -----------------------------------------------------------------------

    def op_ping(self) -> dict[str, Any]:
        return {"pid": os.getpid()}

    def op_code(self) -> dict[str, str]:
        """The ``jobrunner`` package this process runs (a spawned process follows the parent's ``sys.path``)."""
        return {"code": code_commit(), "path": str(Path(jobrunner.__file__).resolve().parent)}

    def op_warm(self, slots: list[Any], variant: str = "baseline") -> dict[str, Any]:
        for key in slots:
            self.slot(tuple(key), variant)
        return {"pid": os.getpid()}

    def op_seed(self, spec: Any, want_keys: bool = False) -> dict[str, Any]:
        return seed(self.session, spec, want_keys)

    def op_memory(self) -> dict[str, int]:
        """Peak and current resident memory of this process, in KiB."""
        status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
        kib: dict[str, int] = {k: int(status[k].split()[0]) for k in ("VmHWM", "VmRSS") if k in status}
        return {"ru_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, **kib}

    def op_cpu(self) -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def op_latency_floor(self, keys: list[tuple[str, str]], topic: str) -> dict[str, list[float]]:
        producer = raw.producer(self.settings.kafka, topic)
        try:
            return raw.latency_floor(self.statements(), producer, topic, self.examples(keys, topic))
        finally:
            producer.close(timeout=10)

    def op_submit(self, bodies: list[str], threads: int, tenant: str, path: str = "/jobs") -> dict[str, Any]:
        """POST ``path`` (/jobs or /jobs/batch) through ``jobrunner.api.app.handle`` in this process, from
        ``threads`` threads, one event at a time (``one_event_at_a_time``)."""
        from jobrunner.api.app import handle  # not at the top: it builds the API app at import, for this only

        self._install_api_container()
        headers = {"content-type": "application/json"}
        handle(gateway.to_event("GET", "/health", headers, b"", tenant), LocalContext("jobrunner-api"))

        send = one_event_at_a_time(handle, path, bodies, tenant)
        return drive(len(bodies), threads, lambda: contextlib.nullcontext(send))

    def op_serve_api(self, tenant: str, token: str, environments: int = 0) -> int:
        """The local API Gateway stand-in (devstack.gateway.serve) in front of the same handler, and
        ``environments`` warm processes serving the same port beside it (``devstack.environments``, as
        ``make run`` does; they read the token from the local stack's token file)."""
        from jobrunner.api.app import handle  # as in op_submit

        self._install_api_container()
        self._api = gateway.serve(handle, lambda: {token: tenant}, "127.0.0.1", 0, reuse_port=environments > 0)
        port = int(self._api.server_address[1])
        if environments:
            self._environments = Environments(self.settings, environments).start(api_port=port)
        return port

    def op_stop_api(self) -> None:
        if self._api is not None:
            self._api.shutdown()
            self._api.server_close()
            self._api = None
        if self._environments is not None:
            self._environments.stop()
            self._environments = None

    def op_start_deliveries(self) -> dict[str, Any]:
        """The delivery function on this process's settings, fed by its MSK trigger as ``make run`` feeds it
        (``devstack.stack.consume``: batches of the delivery topic, committed after each), in a thread, until
        ``op_stop_deliveries``. Its metrics are written per batch as in Lambda (a cost of the function), into
        ``os.devnull``: this process is the function's alone, and its standard output is the bench's."""
        for name, value in (("POWERTOOLS_TRACE_DISABLED", "1"), ("POWERTOOLS_LOG_LEVEL", "WARNING")):
            os.environ.setdefault(name, value)
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the life of the process
        from devstack.stack import consume
        from functions.delivery.handler import handler

        container = wiring.Container(self.settings)
        wiring.install(container)
        container.delivery  # noqa: B018 - builds the service (secrets, deliverer, publisher) before the clock runs
        self._deliveries_stop = threading.Event()
        group = f"jobrunner-delivery-{self.settings.cassandra.keyspace}"
        self._deliveries = threading.Thread(
            target=consume, name="delivery-trigger",
            args=(self.settings.kafka.bootstrap, self.settings.delivery_topic, group, "delivery", handler,
                  self._deliveries_stop))
        self._deliveries.start()
        return {"pid": os.getpid(), "group": group}

    def op_stop_deliveries(self) -> None:
        self._deliveries_stop.set()
        if self._deliveries is not None:
            self._deliveries.join(timeout=60)

    def op_https_ceiling(self, **kwargs: Any) -> dict[str, Any]:
        """``bench.receiver.https_ceiling`` from this process (the delivery function's, between its runs)."""
        from bench.receiver import https_ceiling

        ceiling = https_ceiling(**kwargs)
        return {"requests": ceiling.requests, "seconds": ceiling.seconds, "errors": ceiling.errors,
                "statuses": ceiling.statuses, "rate": ceiling.rate}

    def _install_api_container(self) -> None:
        """The process-wide container the api handler uses, built once (connected before timing)."""
        if self._api_container is None:
            self._api_container = wiring.Container(self.settings)
            self._api_container.jobs  # noqa: B018 - builds the service and connects
        wiring.install(self._api_container)

    # -- timed commands: prepare, then go ---------------------------------------------------------

    def op_prepare(self, what: str, **kwargs: Any) -> str:
        token = uuid.uuid4().hex
        self._pending[token] = getattr(self, f"_prepare_{what}")(**kwargs)
        return token

    def op_go(self, token: str, start_at: float) -> Any:
        run = self._pending.pop(token)
        cpu_before = self.op_cpu()
        result = run(start_at)
        if isinstance(result, dict):
            result["process_cpu_s"] = self.op_cpu() - cpu_before
            result["pid"] = os.getpid()
        return result

    def _prepare_scan(self, segments: list[int], bucket_ms: int, segment_count: int, clock: str = "skip",
                      tag: Any = 0, keep_lateness: bool = False, variant: str = "baseline",
                      ) -> Callable[[float], Any]:
        slots = {segment: self.slot((segment, tag), variant) for segment in segments}
        prefetched: dict[int, Any] = {}
        for segment, slot in slots.items():
            if slot.variant.prefetch:  # what a scan started ~60 s ahead could read before the minute
                prefetched[segment] = PrefetchedJobs(slot.store)
                prefetched[segment].prefetch(from_epoch_ms(bucket_ms), segment)
        rules = next(iter(slots.values())).variant.rules() if slots else None

        def go(start_at: float) -> dict[str, Any]:
            results: dict[int, dict[str, Any]] = {}
            threads = [
                threading.Thread(target=lambda s=segment: results.__setitem__(
                    s, scan_one(self.settings, slots[s], s, bucket_ms, segment_count, clock, start_at,
                                 keep_lateness, rules, prefetched.get(s))))
                for segment in segments
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            return {"segments": [results[s] for s in segments]}

        return go

    def _prepare_raw(self, kind: str, keys: list[tuple[str, str]], count: int, topic: str,
                     concurrency: int = 64, streams: int = 1) -> Callable[[float], Any]:
        s = self.statements()
        exs = self.examples(keys, topic)
        if kind == "writes":
            statements = raw.writes(s, (exs * (count // len(exs) + 1))[:count])
            return lambda start_at: raw.timed_concurrent(self.session, statements, concurrency, start_at)
        if kind == "reads":
            statements = raw.reads(s, (exs * (count // len(exs) + 1))[:count])
            return lambda start_at: raw.timed_concurrent(self.session, statements, concurrency, start_at)
        if kind in ("batches", "create_batches"):
            shape = "create" if kind == "create_batches" else "scan"
            statements = raw.batches(s, (exs * (count // len(exs) + 1))[:count], shape)
            return lambda start_at: raw.timed_concurrent(self.session, statements, concurrency, start_at)
        producers = self._warm_producers(streams, topic)
        if kind == "produce":
            return lambda start_at: raw.produce(producers[0], topic, exs, count, start_at)
        if kind == "combined":
            per_stream = [exs[i::streams] for i in range(streams)]
            return lambda start_at: raw.combined_streams(self.session, s, producers[:streams], topic,
                                                         per_stream, start_at)
        raise ValueError(f"unknown raw kind {kind!r}")

    def _warm_producers(self, count: int, topic: str) -> list[Any]:
        while len(self._producers) < count:
            self._producers.append(raw.producer(self.settings.kafka, topic))
        return self._producers


def serve(conn: Connection, settings: Settings) -> None:
    """A worker's main loop: each command runs on its own thread; replies carry the request id."""
    logging.basicConfig(level=logging.WARNING, format=f"bench worker {os.getpid()}: %(name)s: %(message)s")
    for noisy in ("cassandra", "kafka"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    worker = _Worker(settings)
    send_lock = threading.Lock()

    def run(request_id: int, op: str, kwargs: dict[str, Any]) -> None:
        try:
            reply = (request_id, True, getattr(worker, f"op_{op}")(**kwargs))
        except BaseException:
            reply = (request_id, False, traceback.format_exc())
        with send_lock:
            conn.send(reply)

    while True:
        try:
            message = conn.recv()
        except EOFError:
            break
        if message is None:
            break
        threading.Thread(target=run, args=message, daemon=True).start()
    os._exit(0)  # driver and producer threads would otherwise keep the process alive
