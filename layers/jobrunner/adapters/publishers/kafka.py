"""Publisher on Apache Kafka / Amazon MSK with kafka-python.

The producer is injected (``kafka_producer``) or built from settings; it is idempotent with
acks=all, so a broker-side retry never duplicates a message within one producer session.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka import KafkaProducer
from kafka.errors import KafkaError

from jobrunner.ports import OutboundMessage, Publisher, PublishError

if TYPE_CHECKING:
    from collections.abc import Sequence

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap: str = "127.0.0.1:9092"
    #: "plaintext" (local) or "msk-iam" (Amazon MSK with IAM auth over TLS).
    security: str = "plaintext"
    region: str = "us-east-1"
    linger_ms: int = 5
    compression: str | None = None
    send_timeout_s: float = 30.0


def producer_config(settings: KafkaSettings) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap_servers": settings.bootstrap.split(","),
        "acks": "all",
        "enable_idempotence": True,
        "linger_ms": settings.linger_ms,
        "retries": 10,
        "request_timeout_ms": 15_000,
        "reconnect_backoff_max_ms": 2_000,
        "max_block_ms": 10_000,  # a send never blocks the scan longer than this when the broker is away
    }
    if settings.compression:
        config["compression_type"] = settings.compression
    if settings.security == "msk-iam":
        config.update(security_protocol="SASL_SSL", sasl_mechanism="AWS_MSK_IAM")
    return config


def encode(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


class KafkaPublisher(Publisher):
    def __init__(self, settings: KafkaSettings, kafka_producer: KafkaProducer | None = None) -> None:
        self._settings = settings
        self._producer = kafka_producer

    @property
    def producer(self) -> KafkaProducer:
        if self._producer is None:
            self._producer = KafkaProducer(**producer_config(self._settings))
        return self._producer

    def publish(self, messages: Sequence[OutboundMessage]) -> None:
        try:
            producer = self.producer
        except KafkaError as exc:
            raise PublishError(range(len(messages)), f"cannot connect: {exc}") from exc
        futures = []
        failed: list[int] = []
        for index, message in enumerate(messages):
            try:
                futures.append((index, producer.send(
                    message.topic,
                    key=message.key.encode("utf-8"),
                    value=encode(message.value),
                    headers=[(k, v.encode("utf-8")) for k, v in message.headers.items()],
                )))
            except KafkaError as exc:
                log.warning("send failed: %s", exc)
                failed.append(index)
        cause = ""
        try:
            producer.flush(timeout=self._settings.send_timeout_s)
        except KafkaError as exc:
            cause = str(exc)
        for index, future in futures:
            try:
                future.get(timeout=0)
            except Exception as exc:
                failed.append(index)
                cause = cause or f"{type(exc).__name__}: {exc}"
        if failed:
            raise PublishError(sorted(failed), cause)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(timeout=10)
            self._producer = None
