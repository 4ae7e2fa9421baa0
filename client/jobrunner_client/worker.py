"""Writing workers: one function per job type; consume -> run -> report, at least once.

```python
from jobrunner_client.worker import Execution, Worker

worker = Worker(bootstrap="127.0.0.1:9092")  # Amazon MSK: Worker(bootstrap=..., security="msk-iam")

@worker.handler("send-report")          # runs executions whose payload has "type": "send-report"
def send_report(execution: Execution) -> None:
    ...                                 # return: SUCCESS; raise: FAILED (retried with the job's backoff)

worker.run()                            # until SIGTERM / SIGINT, then finishes the batch in hand
```

Tracing: ``Worker(span=...)`` takes a context-manager factory with the signature of the server's
``jobrunner.telemetry.span`` (the local stack passes that one, so a worker's span continues the execution's
trace); the default traces nothing and hands the message's ``traceparent`` on as it came.

Cancel messages: a job whose overlap policy is ``cancel_other`` sends, on its topic, a message asking the
workers to cancel its previous execution (``{"cancel": true, "execution_id": ...}``, header
``jobrunner-cancel``). The worker that has that execution sets ``execution.cancelled`` (a
``threading.Event``): a long handler checks it (``execution.raise_if_cancelled()`` raises ``Cancelled``) and
stops; its result is then reported FAILED with ``"cancelled": true``, which the results function never
retries. An execution whose cancel arrived before it started is not run at all. Handlers run in a thread
of their own so that the worker keeps reading its partitions (for cancels) while one runs long.

Guarantees: an offset is committed only after the result of its execution is acknowledged by
Kafka, so a crash re-delivers rather than loses (at least once). Executions already done by this
process are recognised by ``execution_id``: not run again, but their result is reported
again. Messages of one job share a key, hence
a partition, hence a worker, so a redelivery usually lands where the first copy ran; make handlers
idempotent on ``execution_id`` for the rare case where it does not (a rebalance after a crash).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import signal
import threading
import traceback
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from kafka import KafkaConsumer, KafkaProducer

from jobrunner_client.protocol import CANCEL_HEADER, DEFAULT_TRIGGER, MAX_ERROR_CHARS, TRACEPARENT_HEADER

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

log = logging.getLogger(__name__)

Handler = Callable[["Execution"], Any]


@dataclass(frozen=True)
class Execution:
    """One execution handed to a worker (the ``jobs`` message)."""

    execution_id: str
    job_id: str
    user_id: str
    scheduled_at: str
    attempt: int
    trigger: str
    payload: Any
    #: W3C trace context of this execution: the worker's span when its span hook traces (``Worker(span=...)``),
    #: else the message's (a child of the submitting request's), if any.
    traceparent: str | None = None
    #: The message's proof of origin, sent back with the result (the results function refuses a result
    #: without the token of its execution).
    result_token: str | None = None
    #: Set when a cancel message for this execution arrives (overlap policy ``cancel_other``).
    cancelled: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)

    def raise_if_cancelled(self) -> None:
        """Raise ``Cancelled`` when the scheduler asked for this execution to be cancelled: call it between
        steps of a long handler."""
        if self.cancelled.is_set():
            raise Cancelled(self.execution_id)

    @property
    def type(self) -> str | None:
        return self.payload.get("type") if isinstance(self.payload, dict) else None


AttributeValue = str | bool | int | float
SpanKind = Literal["internal", "server", "client", "producer", "consumer"]


class WorkerSpan(Protocol):
    """The span an execution runs in: its trace context (handed to the handler and sent with the result)."""

    @property
    def traceparent(self) -> str | None: ...

    def fail(self, description: str | None) -> None:
        """Mark the span failed (the execution's result is FAILED)."""
        ...


class SpanHook(Protocol):
    """Opens the span of one execution (the signature of ``jobrunner.telemetry.span``): a child of ``parent``
    (a W3C traceparent), current while the block runs; it yields a ``WorkerSpan``."""

    def __call__(
        self, name: str, *, parent: str | None = None, kind: SpanKind = "internal",
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> AbstractContextManager[WorkerSpan]: ...


@dataclass
class _UntracedSpan:
    traceparent: str | None

    def fail(self, description: str | None) -> None:
        pass


@contextlib.contextmanager
def untraced(
    name: str, *, parent: str | None = None, kind: SpanKind = "internal",
    attributes: Mapping[str, AttributeValue] | None = None,
) -> Iterator[_UntracedSpan]:
    """The default ``SpanHook``: no span; it carries the message's traceparent on, unchanged."""
    yield _UntracedSpan(parent)


class Cancelled(Exception):
    """Raised by ``Execution.raise_if_cancelled`` (or by a handler itself) when its execution was cancelled."""


#: How long a handler runs before the worker reads its partitions again while it runs (for cancel messages).
POLL_WHILE_RUNNING_AFTER_S = 1.0


class _Seen:
    """The results of recently finished executions, by execution id (bounded, oldest forgotten first)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._results: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def get(self, execution_id: str) -> dict[str, Any] | None:
        return self._results.get(execution_id)

    def add(self, execution_id: str, result: dict[str, Any]) -> None:
        self._results[execution_id] = result
        if len(self._results) > self._size:
            self._results.popitem(last=False)


def connection_config(bootstrap: str, security: str = "plaintext") -> dict[str, Any]:
    """Client settings for ``bootstrap``: ``security`` is ``plaintext`` (local) or ``msk-iam`` (Amazon MSK: IAM
    over TLS, port 9098, signed with the default AWS credentials and region, e.g. ``AWS_DEFAULT_REGION``)."""
    config: dict[str, Any] = {"bootstrap_servers": bootstrap.split(",")}
    if security == "msk-iam":
        config.update(security_protocol="SASL_SSL", sasl_mechanism="AWS_MSK_IAM")
    elif security != "plaintext":
        raise ValueError(f"security must be plaintext or msk-iam, not {security!r}")
    return config


class Worker:
    def __init__(
        self, *, bootstrap: str = "127.0.0.1:9092", topic: str = "jobs", results_topic: str = "job-results",
        group_id: str = "jobrunner-workers", consumer: Any = None, producer: Any = None, remember: int = 20_000,
        security: str = "plaintext", span: SpanHook = untraced,
    ) -> None:
        self._topic = topic
        self._span = span
        self._results_topic = results_topic
        connection = connection_config(bootstrap, security)
        self._consumer = consumer or KafkaConsumer(
            topic, group_id=group_id, enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=100,
            **connection,
        )
        self._producer = producer or KafkaProducer(acks="all", linger_ms=5, **connection)
        self._handlers: dict[str | None, Handler] = {}
        self._seen = _Seen(remember)
        #: Polled messages not processed yet (a poll while a handler runs reads ahead), in order.
        self._backlog: deque[tuple[Any, dict[str, bytes]]] = deque()
        #: Cancel messages received, by execution id, and the execution whose handler is running.
        self._cancels = _Seen(remember)
        self._running: Execution | None = None
        self.stopping = threading.Event()
        self.processed = 0

    def handler(self, job_type: str | None = None) -> Callable[[Handler], Handler]:
        """Register the function for executions whose payload ``type`` is ``job_type`` (None: any other)."""

        def register(fn: Handler) -> Handler:
            self._handlers[job_type] = fn
            return fn

        return register

    def run(self, install_signal_handlers: bool = True) -> None:
        """Consume until ``stopping`` is set (SIGTERM/SIGINT set it when this runs in the main thread)."""
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stopping.set())
        try:
            while self._backlog or not self.stopping.is_set():  # the batch in hand is finished first
                if not self._backlog:
                    self._read(self._consumer.poll(timeout_ms=500))
                    continue
                self._process(*self._backlog.popleft())
                if not self._backlog:
                    self._producer.flush()
                    self._consumer.commit()  # only once every message polled has its result acknowledged
        finally:
            self._producer.flush()
            self._consumer.close()
            self._producer.close()

    def _read(self, batches: dict[Any, list[Any]]) -> None:
        """Queue the messages polled, in order; a cancel message takes effect at once (on the execution running,
        or on one not started yet), and is queued too, so that its offset is committed in order."""
        for messages in batches.values():
            for message in messages:
                headers = dict(getattr(message, "headers", None) or [])
                if CANCEL_HEADER in headers:
                    self._cancel(message.value)
                self._backlog.append((message.value, headers))

    def _cancel(self, raw: bytes) -> None:
        try:
            data = json.loads(raw)
            execution_id = str(data["execution_id"])
        except (ValueError, KeyError, TypeError):
            log.warning("skipping a cancel message that names no execution")
            return
        self._cancels.add(execution_id, {"reason": str(data.get("reason") or "cancelled")})
        running = self._running
        if running is not None and running.execution_id == execution_id:
            log.info("cancelling execution %s, running", execution_id)
            running.cancelled.set()

    def _process(self, raw: bytes, headers: dict[str, bytes] | None = None) -> None:
        if headers and CANCEL_HEADER in headers:
            return  # applied when it was read
        try:
            data = json.loads(raw)
            optional = ("trigger", "traceparent", "result_token", "cancelled")
            fields = [k for k in Execution.__dataclass_fields__ if k not in optional]
            trace = (headers or {}).get(TRACEPARENT_HEADER)
            token = data.get("result_token") if isinstance(data, dict) else None
            execution = Execution(**{k: data[k] for k in fields}, trigger=data.get("trigger", DEFAULT_TRIGGER),
                                  traceparent=trace.decode() if isinstance(trace, bytes) else None,
                                  result_token=token if isinstance(token, str) else None)
        except (ValueError, KeyError, TypeError):
            log.warning("skipping a message that is not an execution")
            return
        attributes: dict[str, AttributeValue] = {
            "messaging.system": "kafka", "messaging.destination.name": self._topic,
            "jobrunner.execution_id": execution.execution_id, "jobrunner.job_id": execution.job_id,
            "jobrunner.attempt": execution.attempt,
        }
        with self._span("process execution", parent=execution.traceparent, kind="consumer",
                            attributes=attributes) as span:
            # The handler and the result carry this span's traceparent (the message's, without tracing).
            result = self._run(replace(execution, traceparent=span.traceparent))
            if result.get("status") == "FAILED":
                span.fail(result.get("error"))

    def _run(self, execution: Execution) -> dict[str, Any]:
        """Run ``execution`` (unless done here before) and report its result; returns the result."""
        earlier = self._seen.get(execution.execution_id)
        if earlier is not None:
            # A duplicate (the scheduler re-published after a crash): do not run it again, but report
            # again, in case the first report was lost with the crash.
            log.info("execution %s already done here; reporting its result again", execution.execution_id)
            self._report(execution, earlier)
            return earlier
        handler = self._handlers.get(execution.type) or self._handlers.get(None)
        result: dict[str, Any] = {
            "execution_id": execution.execution_id, "job_id": execution.job_id,
            "scheduled_at": execution.scheduled_at, "attempt": execution.attempt,
        }
        if execution.traceparent:
            result["traceparent"] = execution.traceparent
        if execution.result_token:
            result["result_token"] = execution.result_token
        cancel = self._cancels.get(execution.execution_id)
        if cancel is not None:  # cancelled before it started: not run at all
            result.update(status="FAILED", error=f"cancelled before it started: {cancel['reason']}"[:MAX_ERROR_CHARS],
                          cancelled=True)
        elif handler is None:
            result.update(status="FAILED", error=f"no handler for job type {execution.type!r}")
        else:
            try:
                self._call(handler, execution)
                result["status"] = "SUCCESS"
            except Exception as exc:
                error = "".join(traceback.format_exception_only(exc)).strip()
                result.update(status="FAILED", error=error[:MAX_ERROR_CHARS])
                if execution.cancelled.is_set():
                    cancel = self._cancels.get(execution.execution_id) or {"reason": "cancelled"}
                    result.update(error=f"cancelled: {cancel['reason']}"[:MAX_ERROR_CHARS], cancelled=True)
        self._report(execution, result)
        self._seen.add(execution.execution_id, result)
        self.processed += 1
        return result

    def _call(self, handler: Handler, execution: Execution) -> None:
        """Run ``handler`` in a thread of its own (with this thread's context: its span), reading the partitions
        again while it runs longer than ``POLL_WHILE_RUNNING_AFTER_S``, so that a cancel message for it is seen;
        what it raises is raised here."""
        raised: list[BaseException] = []
        context = contextvars.copy_context()

        def target() -> None:
            try:
                context.run(handler, execution)
            except BaseException as exc:
                raised.append(exc)

        thread = threading.Thread(target=target, name=f"execution-{execution.execution_id}", daemon=True)
        self._running = execution
        try:
            thread.start()
            thread.join(POLL_WHILE_RUNNING_AFTER_S)
            while thread.is_alive():
                self._read(self._consumer.poll(timeout_ms=200))
                thread.join(0.05)
        finally:
            self._running = None
        if raised:
            raise raised[0]

    def _report(self, execution: Execution, result: dict[str, Any]) -> None:
        self._producer.send(self._results_topic, key=execution.job_id.encode(), value=json.dumps(result).encode())
