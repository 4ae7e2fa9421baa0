"""``jobrunner tail``: follow a topic (``jobs``, ``job-results``, ...) from its end, bounded by a count and a
time limit, with a kafka-python consumer outside any group (it commits nothing and disturbs no worker)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable


class Consumer(Protocol):
    """The part of ``kafka.KafkaConsumer`` that tail uses (a fake one in unit tests)."""

    def partitions_for_topic(self, topic: str) -> set[int] | None: ...
    def assign(self, partitions: list[Any]) -> None: ...
    def seek_to_end(self, *partitions: Any) -> None: ...
    def seek_to_beginning(self, *partitions: Any) -> None: ...
    def position(self, partition: Any) -> int: ...
    def poll(self, timeout_ms: int) -> dict[Any, list[Any]]: ...
    def close(self) -> None: ...


class TopicMissing(Exception):
    pass


class KafkaUnreachable(Exception):
    """No broker answered at the bootstrap servers."""


#: How long to wait for a first broker (kafka-python waits 30 s by default).
BOOTSTRAP_TIMEOUT_MS = 10_000


def kafka_consumer(bootstrap: str, security: str) -> Consumer:
    """A consumer with no group; ``security`` is ``plaintext`` (local) or ``msk-iam`` (Amazon MSK, IAM over TLS)."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaTimeoutError

    config: dict[str, Any] = {"bootstrap_servers": bootstrap.split(","), "group_id": None,
                              "enable_auto_commit": False, "client_id": "jobrunner-cli-tail",
                              "bootstrap_timeout_ms": BOOTSTRAP_TIMEOUT_MS}
    if security == "msk-iam":
        config.update(security_protocol="SASL_SSL", sasl_mechanism="AWS_MSK_IAM")
    try:
        consumer: Consumer = KafkaConsumer(**config)
    except KafkaTimeoutError as exc:
        raise KafkaUnreachable(str(exc)) from exc
    return consumer


@dataclass(frozen=True)
class TailRecord:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: str | None
    value: Any  # the decoded JSON, or the text when it is not JSON
    headers: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset,
                "timestamp_ms": self.timestamp_ms, "key": self.key, "value": self.value, "headers": self.headers}


def decode(message: Any) -> TailRecord:
    raw = message.value or b""
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw.decode("utf-8", errors="replace")
    headers = {k: (v or b"").decode("utf-8", errors="replace") for k, v in (message.headers or [])}
    return TailRecord(topic=message.topic, partition=message.partition, offset=message.offset,
                      timestamp_ms=message.timestamp, key=message.key.decode() if message.key else None,
                      value=value, headers=headers)


def follow(
    consumer: Consumer,
    topic: str,
    on_record: Callable[[TailRecord], None],
    *,
    count: int | None,
    timeout_s: float | None,
    from_beginning: bool = False,
    job_id: str | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> int:
    """Hand each record of ``topic`` (of ``job_id`` only, if given) to ``on_record`` until ``count`` records
    or ``timeout_s`` seconds; returns how many were handed over."""
    from kafka import TopicPartition

    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            raise TopicMissing(f"no topic {topic!r} on this Kafka")
        assignment = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(assignment)
        if from_beginning:
            consumer.seek_to_beginning(*assignment)
        else:
            consumer.seek_to_end(*assignment)
        for tp in assignment:  # fix the starting offsets now: what is published from here on is shown
            consumer.position(tp)
        deadline = None if timeout_s is None else monotonic() + timeout_s
        seen = 0
        while count is None or seen < count:
            remaining = None if deadline is None else deadline - monotonic()
            if remaining is not None and remaining <= 0:
                break
            wait_ms = 500 if remaining is None else max(1, min(500, int(remaining * 1000)))
            for batch in consumer.poll(timeout_ms=wait_ms).values():
                for message in batch:
                    record = decode(message)
                    if job_id is not None and record.key != job_id and _job_of(record) != job_id:
                        continue
                    on_record(record)
                    seen += 1
                    if count is not None and seen >= count:
                        return seen
        return seen
    finally:
        consumer.close()


def _job_of(record: TailRecord) -> str | None:
    return record.value.get("job_id") if isinstance(record.value, dict) else None
