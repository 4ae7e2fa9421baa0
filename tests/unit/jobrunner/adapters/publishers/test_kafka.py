"""KafkaPublisher: what reaches the producer for each OutboundMessage."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kafka.errors import KafkaTimeoutError

from jobrunner.adapters.publishers.kafka import GRACE_S, KafkaPublisher, KafkaSettings, producer_config
from jobrunner.ports import OutboundMessage, PublishError


class Acknowledged:
    def get(self, timeout: float | None = None) -> None:
        return None


class RecordingProducer:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send(self, topic: str, **fields: Any) -> Acknowledged:
        self.sent.append({"topic": topic, **fields})
        return Acknowledged()

    def flush(self, timeout: float | None = None) -> None: ...


def test_a_message_is_sent_with_its_headers_and_not_its_parent_trace() -> None:
    producer = RecordingProducer()
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
    message = OutboundMessage(
        topic="jobs", key="job-1", value={"execution_id": "e-1"},
        headers={"execution_id": "e-1", "traceparent": traceparent},
        parent_trace="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    )
    KafkaPublisher(KafkaSettings(), kafka_producer=producer).publish([message])
    assert producer.sent == [{
        "topic": "jobs", "key": b"job-1", "value": b'{"execution_id":"e-1"}',
        "headers": [("execution_id", b"e-1"), ("traceparent", traceparent.encode())],
    }]


class LateFuture:
    """A send whose fate is settled only after ``settles_in`` seconds (the producer's delivery timeout)."""

    def __init__(self, settles_in: float) -> None:
        self._settled = threading.Event()
        threading.Timer(settles_in, self._settled.set).start()

    @property
    def is_done(self) -> bool:
        return self._settled.is_set()

    def get(self, timeout: float | None = None) -> None:
        if not self._settled.wait(timeout):
            raise KafkaTimeoutError("still queued")
        raise KafkaTimeoutError("expired: delivery timeout")


class StalledProducer(RecordingProducer):
    """A broker that stopped answering: flush gives up at once, each send settles (fails) a moment later."""

    def __init__(self) -> None:
        super().__init__()
        self.futures: list[LateFuture] = []

    def send(self, topic: str, **fields: Any) -> Any:  # type: ignore[override]
        super().send(topic, **fields)
        self.futures.append(LateFuture(0.3))
        return self.futures[-1]


def test_a_failed_publish_returns_only_once_no_message_is_still_queued() -> None:
    producer = StalledProducer()
    messages = [OutboundMessage(topic="jobs", key=f"job-{i}", value={}, headers={}) for i in range(2)]
    with pytest.raises(PublishError) as raised:
        KafkaPublisher(KafkaSettings(), kafka_producer=producer).publish(messages)
    assert raised.value.failed == [0, 1]
    assert all(future.is_done for future in producer.futures)


def test_the_producer_gives_a_message_up_before_a_publish_stops_waiting_for_it() -> None:
    # A message the producer still retried after the publish gave up on it could be written long after:
    # its delivery timeout (plus the grace) must fit in the publish's bound, and requests in that timeout.
    settings = KafkaSettings()
    config = producer_config(settings)
    assert config["delivery_timeout_ms"] / 1000 + GRACE_S <= settings.send_timeout_s
    assert config["request_timeout_ms"] + config["linger_ms"] <= config["delivery_timeout_ms"]
