"""The whole system in one process, against real Cassandra, real Kafka and moto's DynamoDB.

- the api handler behind a local HTTP server (API Gateway's part),
- a ticker aligned to the wall-clock minute sending EventBridge-shaped events to the tick handler,
- a thread-pool invoker running the scan handler as an async Lambda invoke would,
- a reconciler thread running the reconcile handler every ``JOBRUNNER_RECONCILE_INTERVAL_S`` (its own rule in AWS),
- optionally, OpenTelemetry span export (``JOBRUNNER_OTEL_EXPORTER``, see ``jobrunner.telemetry``).
The handlers are the very functions deployed to Lambda (``functions/*/handler.py``).
"""

from __future__ import annotations

import base64
import importlib.util
import logging
import os
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import boto3
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from cql.kept_jobs import row_expiry
from cql.migrate import migrate
from devstack import servers, tokens
from devstack.environments import Environments
from devstack.gateway import serve
from devstack.lambda_context import LocalContext
from devstack.metrics import per_thread
from devstack.stopping import StoppableClock, Stopping
from devstack.tracing import configure_tracing
from jobrunner import telemetry, wiring
from jobrunner.adapters.invokers.threads import ThreadInvoker
from jobrunner.adapters.leases.dynamodb import ensure_table
from jobrunner.adapters.publishers.topics import ensure_topics
from jobrunner.adapters.quotas.dynamodb import ensure_table as ensure_quota_table
from jobrunner.config import Settings
from jobrunner.domain.time import minute_bucket, rfc3339
from jobrunner.observability import metrics

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from jobrunner.ports import Invoker

log = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[1]


def msk_event(batches: dict[Any, list[Any]]) -> dict[str, Any]:
    """Kafka records in the shape of an Amazon MSK event-source event."""
    return {
        "eventSource": "aws:kafka",
        "records": {
            f"{tp.topic}-{tp.partition}": [
                {
                    "topic": r.topic, "partition": r.partition, "offset": r.offset, "timestamp": r.timestamp,
                    "key": base64.b64encode(r.key or b"").decode(), "value": base64.b64encode(r.value).decode(),
                    # MSK's shape: one object per header, its value as a list of byte values
                    "headers": [{name: list(value or b"")} for name, value in (r.headers or [])],
                }
                for r in records
            ]
            for tp, records in batches.items()
        },
    }


def scheduled_event(minute: datetime) -> dict[str, Any]:
    """An EventBridge 'Scheduled Event' for ``minute``, as the minute rule would send it."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "000000000000",
        "time": rfc3339(minute).replace(".000Z", "Z"),
        "region": "local",
        "resources": ["arn:aws:events:local:000000000000:rule/jobrunner-minute"],
        "detail": {},
    }


@dataclass
class LocalStack:
    settings: Settings
    host: str = "127.0.0.1"
    port: int = 8080
    tenant: str = "demo"
    token: str = ""
    #: Also run examples/worker.py, so executions reach SUCCESS or FAILED locally.
    example_worker: bool = True
    #: Tick every minute by itself (the fault suite sends its own ticks instead).
    auto_tick: bool = True
    #: Run the reconciler every ``reconcile_interval_s`` in a thread of its own (None: when ticking by itself).
    reconcile: bool | None = None
    #: Where scans run; default: a thread pool in this process, like async Lambda invokes.
    invoker: Invoker | None = None
    #: Warm environment processes that run the scans and serve the API beside this process (0: none, all
    #: in this process), as Lambda runs concurrent invocations in environments of their own
    #: (``devstack.environments``). Used only when no ``invoker`` is given.
    environments: int = 0
    #: Where the example worker's ``echo`` prints (default: the standard output).
    worker_out: TextIO | None = None
    worker: Any = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _environments: Environments | None = None
    #: The container installed before this stack's, put back when it stops (a stack started beside another).
    _replaced: wiring.Container | None = None
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> LocalStack:
        from functions.api.handler import handler as api_handler
        from functions.scan.handler import handler as scan_handler

        configure_tracing(self.settings)  # first: before the container, whose publisher traces only if it is on
        per_thread(metrics)  # the handlers run in threads of this process: each its own metrics (devstack.metrics)
        # The tenant whose token the stack prints is an operator, so the dashboard shows the segments.
        self.settings = self.settings.replace(operators=(*self.settings.operators, self.tenant))
        self._bootstrap()
        if self.invoker is None and self.environments:
            self._environments = self.invoker = Environments(self.settings, self.environments, host=self.host)
        elif self.invoker is None:
            self.invoker = ThreadInvoker(lambda event, _: scan_handler(event, LocalContext("jobrunner-scan")),
                                         quiet=(Stopping,))
        self.container = wiring.Container(self.settings, invoker=self.invoker, clock=StoppableClock(self._stop))
        self._replaced = wiring.install(self.container)
        self.server = serve(api_handler, tokens.load, self.host, self.port,
                            reuse_port=self._environments is not None)
        self.port = self.server.server_address[1]
        if self._environments is not None:
            self._environments.start(api_port=self.port)
        self.token = tokens.token_for(self.tenant)
        # Before any scan of this stack publishes: a new stack delivers its own executions, not those that other
        # stacks (other keyspaces) left on the shared topic.
        start_at_the_end(self.settings.kafka.bootstrap, self.settings.delivery_topic, self._group("delivery"))
        loops = [("results", self._results_loop), ("delivery", self._delivery_loop)]
        if self.auto_tick:
            self.tick(datetime.now(UTC))  # dispatch the running and the next minute at once
            loops.append(("ticker", self._ticker))
        if self.auto_tick if self.reconcile is None else self.reconcile:
            loops.append(("reconciler", self._reconciler))
        for name, target in loops:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        if self.example_worker:
            self._start_example_worker()
        return self

    def _results_loop(self) -> None:
        """The MSK trigger of the results function: batches of `job-results` records, as Lambda gets them."""
        from functions.results.handler import handler as results_handler

        self._consume(self.settings.results_topic, "results", results_handler)

    def _delivery_loop(self) -> None:
        """The MSK trigger of the delivery function: batches of `job-deliveries` records, as Lambda gets them."""
        from functions.delivery.handler import handler as delivery_handler

        self._consume(self.settings.delivery_topic, "delivery", delivery_handler)

    def _consume(self, topic: str, function: str, handler: Callable[[dict[str, Any], Any], Any]) -> None:
        """Feed ``handler`` (function ``jobrunner-<function>``) the batches of ``topic`` until the stack stops."""
        consume(self.settings.kafka.bootstrap, topic, self._group(function), function, handler, self._stop)

    def _group(self, function: str) -> str:
        """The consumer group of function ``jobrunner-<function>``'s trigger: one per keyspace, so a stack
        restarted on its keyspace goes on from where it stopped."""
        return f"jobrunner-{function}-{self.settings.cassandra.keyspace}"

    def build_example_worker(self) -> Any:
        """examples/worker.py's worker on this stack's topics (its executions' and its results')."""
        spec = importlib.util.spec_from_file_location("example_worker", ROOT / "examples" / "worker.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.build(self.settings.kafka.bootstrap, group_id=f"example-{self.settings.cassandra.keyspace}",
                            out=self.worker_out, topic=self.settings.topic,
                            results_topic=self.settings.results_topic)

    def _start_example_worker(self) -> None:
        self.worker = self.build_example_worker()
        thread = threading.Thread(target=self.worker.run, kwargs={"install_signal_handlers": False},
                                  name="example-worker", daemon=True)
        thread.start()
        self._threads.append(thread)

    def _bootstrap(self) -> None:
        migrate(self.settings.cassandra, expiry=row_expiry(self.settings))
        ensure_topics(self.settings.kafka.bootstrap, [self.settings.topic, self.settings.results_topic,
                                                      self.settings.dead_letter_topic, self.settings.delivery_topic,
                                                      *self.settings.allowed_topics],
                      replication=self.settings.kafka.topic_replication)
        dynamodb = boto3.client("dynamodb", region_name=self.settings.region,
                                endpoint_url=self.settings.dynamodb_endpoint)
        ensure_table(dynamodb, self.settings.heartbeat_table)
        if self.settings.tenant_limits.rate_limited:
            ensure_quota_table(dynamodb, self.settings.quota_table)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def tick(self, minute: datetime) -> dict[str, Any]:
        from functions.tick.handler import handler as tick_handler

        result: dict[str, Any] = tick_handler(scheduled_event(minute_bucket(minute)), LocalContext("jobrunner-tick"))
        return result

    def _ticker(self) -> None:
        """Tick once a minute, one second into it (EventBridge fires anywhere inside its minute)."""
        while not self._stop.is_set():
            now = datetime.now(UTC)
            next_tick = minute_bucket(now) + timedelta(minutes=1, seconds=1)
            if self._stop.wait((next_tick - now).total_seconds()):
                return
            try:
                self.tick(next_tick)
            except Exception:
                log.exception("tick failed; the next one catches up")

    def reconcile_once(self) -> dict[str, Any]:
        """One run of the reconcile function, as its rule would start it (it walks for up to its interval)."""
        from functions.reconcile.handler import handler as reconcile_handler

        interval = self.settings.reconcile_interval_s
        context = LocalContext("jobrunner-reconcile", timeout_s=interval)
        result: dict[str, Any] = reconcile_handler(scheduled_event(datetime.now(UTC)), context)
        return result

    def _reconciler(self) -> None:
        """The reconciler's rule: a run every interval, in a thread of its own (never in a scan's way)."""
        interval = self.settings.reconcile_interval_s
        while not self._stop.wait(interval):
            try:
                self.reconcile_once()
            except Stopping:
                return
            except Exception:
                log.exception("reconcile run failed; the next one goes on from its state")

    def stop(self) -> None:
        self._stop.set()
        if self.worker is not None:
            self.worker.stopping.set()
        self.server.shutdown()
        self.server.server_close()  # connections are refused from now on, not left waiting
        if isinstance(self.invoker, ThreadInvoker):
            self.invoker.shutdown(wait=True)
        if self._environments is not None:
            self._environments.stop()
        self.container.publisher.close()
        current = wiring.install(self._replaced)
        if current is not self.container:  # another stack installed its own since: that one stays
            wiring.install(current)
        telemetry.shutdown()


#: Records per batch handed to a function, at most (an MSK event source mapping's batch size).
BATCH_RECORDS = 100


def consume(bootstrap: str, topic: str, group_id: str, function: str,
            handler: Callable[[dict[str, Any], Any], Any], stop: threading.Event) -> None:
    """An MSK event source mapping of function ``jobrunner-<function>``, locally: feed ``handler`` the batches of
    ``topic`` (at most ``BATCH_RECORDS`` records, in MSK's event shape) until ``stop`` is set, committing each batch
    after it returned; a batch that fails is polled again, from its first record, a second later (an event source
    retries it)."""
    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap.split(","), group_id=group_id,
        enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=BATCH_RECORDS,
    )
    try:
        while not stop.is_set():
            batches = consumer.poll(timeout_ms=500)
            if not batches:
                continue
            try:
                handler(msk_event(batches), LocalContext(f"jobrunner-{function}"))
                consumer.commit()
            except Exception:
                log.exception("%s batch failed; it is retried", function)
                for tp, records in batches.items():
                    consumer.seek(tp, records[0].offset)
                stop.wait(1)
    finally:
        consumer.close()


def start_at_the_end(bootstrap: str, topic: str, group_id: str) -> None:
    """Give ``group_id`` the end of each partition of ``topic`` where it has no position yet, as an event source
    mapping created with the starting position LATEST does; a partition where it has one keeps it. The records
    already on a shared topic (another stack's deliveries) are then not its own to act on."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=group_id, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        new = [tp for tp in partitions if consumer.committed(tp) is None]
        if new:
            consumer.assign(new)
            consumer.seek_to_end(*new)
            consumer.commit({tp: OffsetAndMetadata(consumer.position(tp), "", -1) for tp in new})
    finally:
        consumer.close()


def use_local_aws_credentials() -> None:
    """moto accepts any credentials; set dummy ones so that boto3 never looks for real ones."""
    for key, value in (("AWS_ACCESS_KEY_ID", "local"), ("AWS_SECRET_ACCESS_KEY", "local"),
                       ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(key, value)


#: How long the local delivery reuses a tenant's webhook secrets: a rotation through the API (served by another
#: process) signs the deliveries a second later, where AWS's 60 s would hold a test for a minute.
LOCAL_SECRET_CACHE_S = 1.0


def endpoint_settings(endpoints: servers.Endpoints) -> dict[str, object]:
    """The settings (attributes of ``Settings``) that point the system at ``endpoints``: moto serves DynamoDB,
    the Lambda and SQS targets, and Secrets Manager (the tenants' webhook secrets, which the API's processes and
    the delivery then share)."""
    return {"contact_points": endpoints.cassandra_host, "cassandra_port": endpoints.cassandra_port,
            "kafka_bootstrap": endpoints.kafka_bootstrap, "dynamodb_endpoint": endpoints.dynamodb_endpoint,
            "target_aws_endpoint": endpoints.dynamodb_endpoint, "secrets_endpoint": endpoints.dynamodb_endpoint}


def local_settings(endpoints: servers.Endpoints, environment: Mapping[str, str] | None = None,
                   **overrides: object) -> Settings:
    """The settings of a local stack on ``endpoints``: ``overrides`` (attributes of ``Settings``) over them, and
    ``environment`` (variables, e.g. those of this process a person chose) over both."""
    use_local_aws_credentials()
    given = Settings.of(**{**endpoint_settings(endpoints), "region": "us-east-1",
                           "webhook_secret_cache_s": LOCAL_SECRET_CACHE_S, **overrides})
    return Settings.from_env({**given.to_environment(given_only=True), **(environment or {})})
