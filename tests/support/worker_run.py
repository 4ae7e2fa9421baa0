"""Running the worker helper (``jobrunner_client.worker.Worker``) on one message, with fake Kafka clients."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobrunner import telemetry
from jobrunner_client.worker import Worker

if TYPE_CHECKING:
    from collections.abc import Callable

    from jobrunner_client.worker import Execution


@dataclass(frozen=True)
class _Message:
    value: bytes
    headers: list[tuple[str, bytes]] = field(default_factory=list)


class _OneBatch:
    """A consumer handing out one batch, then stopping the worker."""

    def __init__(self, message: _Message) -> None:
        self._batches = [{("jobs", 0): [message]}]
        self.stop: Callable[[], None] = lambda: None

    def poll(self, timeout_ms: int = 0) -> dict[tuple[str, int], list[_Message]]:
        if self._batches:
            return self._batches.pop(0)
        self.stop()
        return {}

    def commit(self) -> None: ...

    def close(self) -> None: ...


class _Producer:
    def __init__(self) -> None:
        self.values: list[bytes] = []

    def send(self, topic: str, key: bytes, value: bytes) -> None:
        self.values.append(value)

    def flush(self) -> None: ...

    def close(self) -> None: ...


def run_worker_once(value: bytes, handler: Callable[[Execution], Any],
                    headers: list[tuple[str, bytes]] | None = None) -> bytes:
    """Run ``handler`` in the worker helper on one ``jobs`` message; returns the one result it sent."""
    consumer, producer = _OneBatch(_Message(value, headers or [])), _Producer()
    worker = Worker(consumer=consumer, producer=producer, span=telemetry.span)
    consumer.stop = worker.stopping.set
    worker.handler()(handler)
    worker.run(install_signal_handlers=False)
    [result] = producer.values
    return result
