"""Reading what the system published: a consumer positioned at the end of a topic before a test acts."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka import KafkaConsumer, TopicPartition

if TYPE_CHECKING:
    from collections.abc import Callable


@dataclass(frozen=True)
class Received:
    key: str
    value: dict[str, Any]
    headers: dict[str, str]
    timestamp_ms: int  # when the producer sent it (CreateTime)


class TopicWatch:
    def __init__(self, bootstrap: str, topic: str) -> None:
        self._consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), enable_auto_commit=False,
                                       group_id=None, consumer_timeout_ms=500)
        partitions = self._consumer.partitions_for_topic(topic) or set()
        assignment = [TopicPartition(topic, p) for p in sorted(partitions)]
        self._consumer.assign(assignment)
        self._consumer.seek_to_end(*assignment)
        for tp in assignment:  # resolve the end offsets now, before the test acts
            self._consumer.position(tp)
        self.received: list[Received] = []

    def wait_for(self, done: Callable[[list[Received]], bool], timeout_s: float) -> list[Received]:
        deadline = time.monotonic() + timeout_s
        while not done(self.received) and time.monotonic() < deadline:
            for batch in self._consumer.poll(timeout_ms=500).values():
                for m in batch:
                    self.received.append(Received(
                        key=m.key.decode(), value=json.loads(m.value),
                        headers={k: v.decode() for k, v in m.headers}, timestamp_ms=m.timestamp,
                    ))
        return self.received

    def close(self) -> None:
        self._consumer.close()
