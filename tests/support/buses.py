"""Publishers under the contract test (``tests/contract/test_publisher.py``), each with a way to read back what
it delivered: the memory publisher's own record, or a real consumer of the Kafka topic."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobrunner.adapters.publishers.memory import MemoryPublisher

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from jobrunner.ports import Publisher

#: How long a reader waits for messages to arrive, and then for any more than it expects.
ARRIVAL_S = 15.0
SETTLE_S = 1.0


@dataclass(frozen=True)
class Delivered:
    """A message as a consumer of its topic reads it."""

    key: str
    value: Any
    headers: dict[str, str]


@dataclass
class Bus:
    """A publisher under test and the bus behind it."""

    publisher: Publisher
    #: A topic of the test's own, which takes every message (created empty).
    topic: Callable[[], str]
    #: A topic of the test's own, which refuses every message for good.
    refusing_topic: Callable[[], str]
    #: Every message delivered to ``topic`` (in the order of each key), once at least ``count`` have arrived.
    delivered: Callable[[str, int], list[Delivered]]
    #: A publisher of the same kind whose broker cannot be reached.
    unreachable: Callable[[], Publisher]


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def memory_bus() -> Bus:
    publisher = MemoryPublisher()

    def refusing_topic() -> str:
        name = fresh("refusing")
        publisher.broken_topics.add(name)
        return name

    def delivered(topic: str, count: int) -> list[Delivered]:
        return [Delivered(m.key, json.loads(json.dumps(m.value)), dict(m.headers))
                for m in publisher.sent if m.topic == topic]

    def unreachable() -> Publisher:
        away = MemoryPublisher()
        away.fail_next = 1_000_000
        return away

    return Bus(publisher, lambda: fresh("contract"), refusing_topic, delivered, unreachable)


def kafka_bus(bootstrap: str) -> Iterator[Bus]:
    """A Kafka publisher on ``bootstrap``, its topics created with four partitions (so that keys spread)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    from jobrunner.adapters.publishers.kafka import KafkaPublisher, KafkaSettings

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="contract-tests")
    publisher = KafkaPublisher(KafkaSettings(bootstrap=bootstrap))
    others: list[Publisher] = []

    def topic() -> str:
        name = fresh("contract")
        admin.create_topics([NewTopic(name, 4, 1)])
        return name

    def refusing_topic() -> str:  # every record is larger than the topic takes
        name = fresh("refusing")
        admin.create_topics([NewTopic(name, 1, 1, topic_configs={"max.message.bytes": "1"})])
        return name

    def delivered(topic: str, count: int) -> list[Delivered]:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), enable_auto_commit=False, group_id=None)
        try:
            partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
            consumer.assign(partitions)
            consumer.seek_to_beginning(*partitions)
            received: list[Delivered] = []
            deadline = time.monotonic() + ARRIVAL_S
            while time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=200).values():
                    received.extend(Delivered(m.key.decode(), json.loads(m.value),
                                              {k: v.decode() for k, v in m.headers}) for m in batch)
                if len(received) >= count:  # then a little longer, to see any message more than expected
                    deadline = min(deadline, time.monotonic() + SETTLE_S)
            return received
        finally:
            consumer.close()

    def unreachable() -> Publisher:
        others.append(KafkaPublisher(KafkaSettings(bootstrap="127.0.0.1:1")))  # nothing listens on port 1
        return others[-1]

    try:
        yield Bus(publisher, topic, refusing_topic, delivered, unreachable)
    finally:
        for each in [publisher, *others]:
            each.close()
        admin.close()
