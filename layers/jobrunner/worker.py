"""Writing workers: one function per job type; consume -> run -> report, at least once.

```python
from jobrunner.worker import Execution, Worker

worker = Worker(bootstrap="127.0.0.1:9092")  # Amazon MSK: Worker(bootstrap=..., security="msk-iam")

@worker.handler("send-report")          # runs executions whose payload has "type": "send-report"
def send_report(execution: Execution) -> None:
    ...                                 # return: SUCCESS; raise: FAILED (retried with the job's backoff)

worker.run()                            # until SIGTERM / SIGINT, then finishes the batch in hand
```

Guarantees: an offset is committed only after the result of its execution is acknowledged by
Kafka, so a crash re-delivers rather than loses (at least once). Executions already done by this
process are recognised by ``execution_id``: not run again, but their result is reported
again. Messages of one job share a key, hence
a partition, hence a worker, so a redelivery usually lands where the first copy ran; make handlers
idempotent on ``execution_id`` for the rare case where it does not (a rebalance after a crash).
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from kafka import KafkaConsumer, KafkaProducer

from jobrunner import telemetry

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
    #: W3C trace context of this execution: the worker's span when this process traces
    #: (``jobrunner.telemetry``), else the message's (a child of the submitting request's), if any.
    traceparent: str | None = None
    #: The message's proof of origin, sent back with the result (the results function refuses a result
    #: without the token of its execution).
    result_token: str | None = None

    @property
    def type(self) -> str | None:
        return self.payload.get("type") if isinstance(self.payload, dict) else None


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
        security: str = "plaintext",
    ) -> None:
        self._topic = topic
        self._results_topic = results_topic
        connection = connection_config(bootstrap, security)
        self._consumer = consumer or KafkaConsumer(
            topic, group_id=group_id, enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=100,
            **connection,
        )
        self._producer = producer or KafkaProducer(acks="all", linger_ms=5, **connection)
        self._handlers: dict[str | None, Handler] = {}
        self._seen = _Seen(remember)
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
            while not self.stopping.is_set():
                batches = self._consumer.poll(timeout_ms=500)
                for messages in batches.values():
                    for message in messages:
                        self._process(message.value, dict(getattr(message, "headers", None) or []))
                if batches:
                    self._producer.flush()
                    self._consumer.commit()  # only after every result of the batch is acknowledged
        finally:
            self._producer.flush()
            self._consumer.close()
            self._producer.close()

    def _process(self, raw: bytes, headers: dict[str, bytes] | None = None) -> None:
        try:
            data = json.loads(raw)
            optional = ("trigger", "traceparent", "result_token")
            fields = [k for k in Execution.__dataclass_fields__ if k not in optional]
            trace = (headers or {}).get("traceparent")
            token = data.get("result_token") if isinstance(data, dict) else None
            execution = Execution(**{k: data[k] for k in fields}, trigger=data.get("trigger", "SCHEDULE"),
                                  traceparent=trace.decode() if isinstance(trace, bytes) else None,
                                  result_token=token if isinstance(token, str) else None)
        except (ValueError, KeyError, TypeError):
            log.warning("skipping a message that is not an execution")
            return
        attributes: dict[str, telemetry.AttributeValue] = {
            "messaging.system": "kafka", "messaging.destination.name": self._topic,
            "jobrunner.execution_id": execution.execution_id, "jobrunner.job_id": execution.job_id,
            "jobrunner.attempt": execution.attempt,
        }
        with telemetry.span("process execution", parent=execution.traceparent, kind="consumer",
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
        if handler is None:
            result.update(status="FAILED", error=f"no handler for job type {execution.type!r}")
        else:
            try:
                handler(execution)
                result["status"] = "SUCCESS"
            except Exception as exc:
                result.update(status="FAILED", error="".join(traceback.format_exception_only(exc)).strip()[:2000])
        self._report(execution, result)
        self._seen.add(execution.execution_id, result)
        self.processed += 1
        return result

    def _report(self, execution: Execution, result: dict[str, Any]) -> None:
        self._producer.send(self._results_topic, key=execution.job_id.encode(), value=json.dumps(result).encode())
