"""``jobrunner tail`` on a fake consumer: bounded by count and time, filtered by job, as a table or JSON lines."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafka import TopicPartition

from jobrunner_client.cli.tail import KafkaUnreachable, follow

if TYPE_CHECKING:
    from tests.client.cli.fakes import Cli


@dataclass
class Message:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]] = field(default_factory=list)


def execution(job_id: str, offset: int, **value: Any) -> Message:
    body = {"execution_id": f"e-{offset}-abcdef", "job_id": job_id, "user_id": "demo",
            "scheduled_at": "2026-11-22T10:00:00.000Z", "attempt": 1, "trigger": "SCHEDULE", "payload": {"n": offset},
            **value}
    return Message("jobs", 0, offset, 1_795_348_800_000 + offset, job_id.encode(), json.dumps(body).encode(),
                   [("attempt", b"1")])


class FakeConsumer:
    """Hands out ``batches`` one poll at a time, then nothing; remembers how it was positioned."""

    def __init__(self, batches: list[list[Message]], partitions: set[int] | None = None) -> None:
        self.batches = list(batches)
        self.partitions = {0, 1} if partitions is None else partitions
        self.assigned: list[TopicPartition] = []
        self.sought: str | None = None
        self.closed = False
        self.polls = 0

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return self.partitions or None

    def assign(self, partitions: list[Any]) -> None:
        self.assigned = partitions

    def seek_to_end(self, *partitions: Any) -> None:
        self.sought = "end"

    def seek_to_beginning(self, *partitions: Any) -> None:
        self.sought = "beginning"

    def position(self, partition: Any) -> int:
        return 0

    def poll(self, timeout_ms: int) -> dict[Any, list[Any]]:
        self.polls += 1
        return {TopicPartition("jobs", 0): self.batches.pop(0)} if self.batches else {}

    def close(self) -> None:
        self.closed = True


def test_follow_stops_at_the_count_and_closes_the_consumer() -> None:
    consumer = FakeConsumer([[execution("a", 1), execution("b", 2)], [execution("a", 3)]])
    seen: list[int] = []
    count = follow(consumer, "jobs", lambda r: seen.append(r.offset), count=2, timeout_s=None)
    assert (count, seen, consumer.closed, consumer.sought) == (2, [1, 2], True, "end")
    assert [tp.partition for tp in consumer.assigned] == [0, 1]


def test_follow_filters_by_job_and_stops_at_the_time_limit() -> None:
    consumer = FakeConsumer([[execution("a", 1), execution("b", 2)], [], [execution("b", 3)]])
    clock = iter(range(100))
    seen: list[int] = []
    count = follow(consumer, "jobs", lambda r: seen.append(r.offset), count=5, timeout_s=3, job_id="b",
                   from_beginning=True, monotonic=lambda: float(next(clock)))
    assert (count, seen, consumer.sought) == (1, [2], "beginning")  # the third poll is past the deadline


def test_tail_prints_a_table_row_per_message(cli: Cli) -> None:
    consumer = FakeConsumer([[execution("job-1", 7)]])
    result = cli("tail", "jobs", "--count", "1", "--timeout", "5", consumer=lambda servers, security: consumer)
    assert result.exit_code == 0, result.output
    header, row = [line for line in result.stdout.splitlines() if line.strip()]
    assert header.split()[:4] == ["TIME", "JOB", "EXECUTION", "ATTEMPT"]
    assert "job-1" in row and "e-7-abcd…" in row and "SCHEDULE" in row and '{"n":7}' in row
    assert "following jobs on 127.0.0.1:9092 until 1 message(s) or 5 s" in result.stderr


def test_tail_json_writes_one_document_per_message(cli: Cli) -> None:
    consumer = FakeConsumer([[execution("j", 1), execution("j", 2, status="SUCCESS")]])
    result = cli("-o", "json", "tail", "--count", "2", consumer=lambda servers, security: consumer)
    documents = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(d["offset"], d["key"], d["headers"]) for d in documents] == [(1, "j", {"attempt": "1"}),
                                                                          (2, "j", {"attempt": "1"})]
    assert documents[1]["value"]["status"] == "SUCCESS"


def test_tail_reads_kafka_settings_from_the_environment(cli: Cli) -> None:
    asked: list[tuple[str, str]] = []

    def factory(servers: str, security: str) -> FakeConsumer:
        asked.append((servers, security))
        return FakeConsumer([[execution("j", 1)]])

    cli.environ.update(KAFKA_BOOTSTRAP="b1:9098,b2:9098", KAFKA_SECURITY="msk-iam")
    assert cli("tail", "--count", "1", consumer=factory).exit_code == 0
    assert cli("tail", "--count", "1", "--bootstrap", "other:9092", consumer=factory).exit_code == 0
    assert asked == [("b1:9098,b2:9098", "msk-iam"), ("other:9092", "msk-iam")]


def test_tail_exit_codes(cli: Cli) -> None:
    # fewer messages than asked before the time limit: 1
    result = cli("tail", "--count", "1", "--timeout", "0", consumer=lambda s, x: FakeConsumer([]))
    assert result.exit_code == 1
    assert "timed out after 0 s with 0 of 1 message(s)" in result.stderr
    # no such topic: 3
    result = cli("tail", "nope", "--count", "1", consumer=lambda s, x: FakeConsumer([], partitions=set()))
    assert result.exit_code == 3
    assert "no topic 'nope'" in result.stderr

    # no broker: 4
    def unreachable(servers: str, security: str) -> FakeConsumer:
        raise KafkaUnreachable("Unable to bootstrap from ['127.0.0.1:9092']")

    result = cli("tail", "--count", "1", consumer=unreachable)
    assert result.exit_code == 4
    assert "cannot connect to Kafka at 127.0.0.1:9092" in result.stderr
