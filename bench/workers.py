"""Worker processes: real parallelism on a small machine (the GIL caps one Python process at one core).

Each worker is a spawned process holding its own driver session, Kafka producers and DynamoDB client,
built as ``wiring.Container`` builds them. The parent sends it commands; a timed command runs in two
steps, ``prepare`` (everything that must not be measured: building statements, connecting, warming)
then ``go`` at an instant agreed by all workers (``time.monotonic`` is system-wide on Linux), so the
figures of several processes add up.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import os
import resource
import threading
import time
import traceback
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable
    from multiprocessing.connection import Connection

    from bench.variants import Variant
    from jobrunner.config import Settings

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- worker side


def one_event_at_a_time(handler: Callable[[dict[str, Any], Any], dict[str, Any]], path: str, bodies: list[str],
                        tenant: str) -> Callable[[int], int]:
    """``send(i)``: POST ``bodies[i]`` to ``path`` through ``handler`` and return the status, the calls of any
    number of threads taken one at a time, as one Lambda execution environment takes its events (the
    Powertools resolver keeps a request's state on the app object; ``devstack.gateway`` does the same)."""
    from devstack.gateway import to_event
    from devstack.lambda_context import LocalContext

    lock = threading.Lock()
    headers = {"content-type": "application/json"}

    def send(i: int) -> int:
        event = to_event("POST", path, headers, bodies[i].encode(), tenant)
        with lock:
            return int(handler(event, LocalContext("jobrunner-api"))["statusCode"])

    return send


class _Slot:
    """One scan's adapters (a segment's): its own store, Kafka producer and counting proxies."""

    def __init__(self, state: _Worker, variant: Variant) -> None:
        from bench.instruments import CallCounter, CountingSession
        from jobrunner.adapters.heartbeats.dynamodb import DynamoDBHeartbeatStore
        from jobrunner.adapters.publishers.kafka import KafkaPublisher
        from jobrunner.adapters.stores.cassandra import DEFAULT_BATCH_ROWS, KEYSPACES_MAX_IN, CassandraJobStore

        settings = state.settings
        self.variant = variant
        self.session = CountingSession(state.session_for(variant))
        concurrency = variant.concurrency or 64
        per_row = 1 if variant.single_requests else None  # the variant's one request per row
        self.store = CassandraJobStore(self.session, concurrency=concurrency, batch_rows=per_row or DEFAULT_BATCH_ROWS,
                                       in_keys=per_row or KEYSPACES_MAX_IN)
        self.publisher = KafkaPublisher(settings.kafka)
        self.dynamodb = CallCounter(state.dynamodb)
        self.heartbeats = DynamoDBHeartbeatStore(settings.heartbeat_table, self.dynamodb)
        self.publisher.producer.partitions_for(settings.topic)  # connect before any clock starts
        self.store.get_many([("warm-up", "warm-up")])


class _Worker:
    def __init__(self, settings: Settings) -> None:
        import boto3
        from botocore.config import Config

        from jobrunner.adapters.stores.session import connect

        self.settings = settings
        self.session = connect(settings.cassandra)
        config = Config(max_pool_connections=64, retries={"mode": "standard", "max_attempts": 5})
        self.dynamodb = boto3.client("dynamodb", region_name=settings.region,
                                     endpoint_url=settings.dynamodb_endpoint, config=config)
        self._sessions: dict[bool, Any] = {False: self.session}
        self._slots: dict[Any, _Slot] = {}
        self._slots_lock = threading.Lock()
        self._pending: dict[str, Callable[[float], Any]] = {}
        self._statements: Any = None
        self._examples: dict[tuple[str, str], Any] = {}
        self._producers: list[Any] = []
        self._api: Any = None
        self._environments: Any = None
        self._api_container: Any = None

    def session_for(self, variant: Variant) -> Any:
        """The driver session; the driver-rows variant gets one of its own (row factories are per profile)."""
        from bench.variants import use_driver_rows
        from jobrunner.adapters.stores.session import connect

        if variant.driver_rows not in self._sessions:
            session = connect(self.settings.cassandra)
            use_driver_rows(session)
            self._sessions[variant.driver_rows] = session
        return self._sessions[variant.driver_rows]

    def slot(self, key: tuple[Any, ...], variant: str = "baseline") -> _Slot:
        from bench.variants import VARIANTS

        with self._slots_lock:
            slot = self._slots.get((*key, variant))
            if slot is None:
                slot = self._slots[(*key, variant)] = _Slot(self, VARIANTS[variant])
            return slot

    def examples(self, keys: list[tuple[str, str]], topic: str) -> list[Any]:
        """``raw.Example`` per job key, built once per worker (building them is not what is measured)."""
        from bench.raw import Example

        out = []
        for index, key in enumerate(keys):
            example = self._examples.get(key)
            if example is None or example.topic != topic:
                example = self._examples[key] = Example(key, index, topic, recurring=index % 2 == 0)
            out.append(example)
        return out

    def statements(self) -> Any:
        from bench.raw import Statements

        if self._statements is None:
            self._statements = Statements(self.session)
        return self._statements

    # -- plain commands -----------------------------------------------------------------------

    def op_ping(self) -> dict[str, Any]:
        return {"pid": os.getpid()}

    def op_code(self) -> dict[str, str]:
        """The ``jobrunner`` package this process runs (a spawned process follows the parent's ``sys.path``)."""
        import jobrunner
        from bench.context import code_commit

        return {"code": code_commit(), "path": str(Path(jobrunner.__file__).resolve().parent)}

    def op_warm(self, slots: list[Any], variant: str = "baseline") -> dict[str, Any]:
        for key in slots:
            self.slot(tuple(key), variant)
        return {"pid": os.getpid()}

    def op_seed(self, spec: Any, want_keys: bool = False) -> dict[str, Any]:
        from bench.seed import seed

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
        from bench import raw

        producer = raw.producer(self.settings.kafka, topic)
        try:
            return raw.latency_floor(self.statements(), producer, topic, self.examples(keys, topic))
        finally:
            producer.close(timeout=10)

    def op_submit(self, bodies: list[str], threads: int, tenant: str, path: str = "/jobs") -> dict[str, Any]:
        """POST ``path`` (/jobs or /jobs/batch) through ``jobrunner.api.app.handle`` in this process, from
        ``threads`` threads, one event at a time (``one_event_at_a_time``)."""
        from bench.submit import drive
        from devstack.gateway import to_event
        from devstack.lambda_context import LocalContext
        from jobrunner.api.app import handle

        self._install_api_container()
        headers = {"content-type": "application/json"}
        handle(to_event("GET", "/health", headers, b"", tenant), LocalContext("jobrunner-api"))

        send = one_event_at_a_time(handle, path, bodies, tenant)
        return drive(len(bodies), threads, lambda: contextlib.nullcontext(send))

    def op_serve_api(self, tenant: str, token: str, environments: int = 0) -> int:
        """The local API Gateway stand-in (devstack.gateway.serve) in front of the same handler, and
        ``environments`` warm processes serving the same port beside it (``devstack.environments``, as
        ``make run`` does; they read the token from the local stack's token file)."""
        from devstack.environments import Environments
        from devstack.gateway import serve
        from jobrunner.api.app import handle

        self._install_api_container()
        self._api = serve(handle, lambda: {token: tenant}, "127.0.0.1", 0, reuse_port=environments > 0)
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

    def _install_api_container(self) -> None:
        """The process-wide container the api handler uses, built once (connected before timing)."""
        from jobrunner import wiring

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
        from bench.variants import PrefetchedJobs
        from jobrunner.domain.time import from_epoch_ms

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
                    s, _scan_one(self.settings, slots[s], s, bucket_ms, segment_count, clock, start_at,
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
        from bench import raw

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
        from bench import raw

        while len(self._producers) < count:
            self._producers.append(raw.producer(self.settings.kafka, topic))
        return self._producers


def _scan_one(settings: Settings, slot: _Slot, segment: int, bucket_ms: int, segment_count: int, clock_kind: str,
              start_at: float, keep_lateness: bool, rules: dict[str, Any] | None,
              prefetched: Any = None) -> dict[str, Any]:
    from bench.instruments import Phases, SkipClock, Timed
    from jobrunner.adapters.clocks.system import SystemClock
    from jobrunner.domain.time import from_epoch_ms
    from jobrunner.ports import Clock, ScanRequest
    from jobrunner.services.scan import ScanRules, ScanService
    from jobrunner.wiring import Container

    bucket = from_epoch_ms(bucket_ms)
    slot.session.reset()
    slot.dynamodb.calls.clear()
    phases = Phases()
    store = Timed(prefetched if prefetched is not None else slot.store, phases, "store")
    publisher = Timed(slot.publisher, phases, "publisher")
    heartbeats = Timed(slot.heartbeats, phases, "heartbeats")
    delay = start_at - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    clock: Clock = SkipClock(bucket, start_at) if clock_kind == "skip" else SystemClock()
    container = Container(settings.replace(segments=segment_count), store=store,  # type: ignore[arg-type]
                          publisher=publisher, heartbeats=heartbeats, clock=clock)  # type: ignore[arg-type]
    scans = container.scans
    if rules:  # a variant of the scan's rules (experiments); otherwise exactly what the Container builds
        scans = ScanService(store, publisher, heartbeats, clock,  # type: ignore[arg-type]
                            ScanRules(segment_count=segment_count, **rules), results=container.results)
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


# --------------------------------------------------------------------------- parent side


class WorkerError(RuntimeError):
    pass


class _Handle:
    def __init__(self, context: Any, settings: Settings, index: int) -> None:
        parent, child = context.Pipe()
        self.conn = parent
        # Not a daemon: a worker may start processes of its own (the submit section's API environments);
        # ``WorkerPool.close`` ends it.
        self.process = context.Process(target=serve, args=(child, settings), name=f"bench-worker-{index}",
                                       daemon=False)
        self.process.start()
        child.close()
        self._ids = itertools.count()
        self._futures: dict[int, Future[Any]] = {}
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                request_id, ok, value = self.conn.recv()
            except (EOFError, OSError):
                with self._lock:
                    for future in self._futures.values():
                        future.set_exception(WorkerError("worker process ended"))
                    self._futures.clear()
                return
            with self._lock:
                future = self._futures.pop(request_id)
            if ok:
                future.set_result(value)
            else:
                future.set_exception(WorkerError(value))

    def call(self, op: str, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            request_id = next(self._ids)
            self._futures[request_id] = future
            self.conn.send((request_id, op, kwargs))
        return future


class WorkerPool:
    """``count`` spawned worker processes (spawn, not fork: the parent holds driver threads)."""

    def __init__(self, settings: Settings, count: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.workers = [_Handle(context, settings, i) for i in range(count)]
        self.pids = [w.call("ping").result(timeout=120)["pid"] for w in self.workers]

    def __len__(self) -> int:
        return len(self.workers)

    def call(self, index: int, op: str, **kwargs: Any) -> Future[Any]:
        return self.workers[index].call(op, **kwargs)

    def all(self, op: str, per_worker: list[dict[str, Any]], timeout: float | None = None) -> list[Any]:
        futures = [self.workers[i].call(op, **kwargs) for i, kwargs in enumerate(per_worker)]
        return [f.result(timeout=timeout) for f in futures]

    def synchronized(self, jobs: list[tuple[int, str, dict[str, Any]]], lead_s: float = 0.5,
                     timeout: float | None = None) -> tuple[float, list[Any]]:
        """Prepare each (worker, what, kwargs) job, then start them all at one instant; returns it and
        the results in job order."""
        tokens = [self.workers[i].call("prepare", what=what, **kw) for i, what, kw in jobs]
        ready = [t.result(timeout=timeout) for t in tokens]
        start_at = time.monotonic() + lead_s
        futures = [self.workers[i].call("go", token=token, start_at=start_at)
                   for (i, _, _), token in zip(jobs, ready, strict=True)]
        return start_at, [f.result(timeout=timeout) for f in futures]

    def close(self) -> None:
        for worker in self.workers:
            with contextlib.suppress(OSError):
                worker.conn.send(None)
        for worker in self.workers:
            worker.process.join(timeout=20)
            if worker.process.is_alive():  # only our own child, by its handle
                worker.process.kill()
                worker.process.join(timeout=5)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def split(items: list[Any], parts: int) -> list[list[Any]]:
    """Round-robin ``items`` into ``parts`` lists (segments over processes)."""
    return [items[i::parts] for i in range(parts)]

