"""KafkaPublisher: what reaches the producer for each OutboundMessage."""

from __future__ import annotations

from typing import Any

from jobrunner.adapters.publishers.kafka import KafkaPublisher, KafkaSettings
from jobrunner.ports import OutboundMessage


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
