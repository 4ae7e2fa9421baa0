"""The local stack (devstack/stack.py) on the real local Kafka: what it wires, without starting it."""

from __future__ import annotations

import io
import uuid
from typing import TYPE_CHECKING

import pytest
from kafka import KafkaConsumer, KafkaProducer

from devstack.stack import LocalStack, start_at_the_end
from jobrunner.adapters.publishers.topics import ensure_topics
from jobrunner_client.worker import Execution

if TYPE_CHECKING:
    from jobrunner.config import Settings

pytestmark = pytest.mark.integration


def test_the_example_worker_runs_on_the_stacks_own_topics_and_stream(settings: Settings) -> None:
    # Given a stack whose executions and results go to topics of its own (not `jobs` and `job-results`)
    own = settings.replace(topic="stack-test-executions", results_topic="stack-test-results")
    out = io.StringIO()
    stack = LocalStack(own, port=0, worker_out=out)

    # When it builds its example worker
    worker = stack.build_example_worker()
    try:
        # Then the worker consumes the stack's topic, reports on the stack's results topic, and prints to
        # the stream the stack was given
        assert worker._consumer.subscription() == {"stack-test-executions"}
        assert worker._results_topic == "stack-test-results"
        worker._handlers[None](Execution(execution_id="e-1", job_id="j-1", user_id="alice",
                                         scheduled_at="2026-11-22T10:00:00.000Z", attempt=1, trigger="SCHEDULE",
                                         payload={"n": 1}))
        assert out.getvalue() == "[worker] 2026-11-22T10:00:00.000Z attempt 1: {'n': 1}\n"
    finally:
        worker._consumer.close()
        worker._producer.close()


def test_a_new_group_starts_at_the_end_of_a_shared_topic_and_a_known_one_where_it_stopped(settings: Settings) -> None:
    # Given a shared topic with a record another stack left there
    topic, group = f"stack-test-deliveries-{uuid.uuid4().hex[:8]}", f"stack-test-{uuid.uuid4().hex[:8]}"
    bootstrap = settings.kafka.bootstrap
    ensure_topics(bootstrap, [topic], replication=1)
    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","))

    def send(value: bytes) -> None:
        producer.send(topic, value).get(timeout=10)

    def read() -> list[bytes]:
        """What the group's trigger reads next (nothing committed: it reads it again next time)."""
        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap.split(","), group_id=group,
                                 enable_auto_commit=False, auto_offset_reset="earliest", consumer_timeout_ms=5000)
        try:
            return [record.value for record in consumer]
        finally:
            consumer.close()

    try:
        send(b"another stack's")
        # When a new stack's group is given its start, Then it reads only what comes after
        start_at_the_end(bootstrap, topic, group)
        send(b"own")
        assert read() == [b"own"]
        # And a stack restarted with the same group goes on where it stopped, missing nothing sent meanwhile
        send(b"sent while stopped")
        start_at_the_end(bootstrap, topic, group)
        assert sorted(read()) == [b"own", b"sent while stopped"]  # (from partitions in any order)
    finally:
        producer.close()
