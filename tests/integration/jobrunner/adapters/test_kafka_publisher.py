"""KafkaPublisher on the real broker."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from jobrunner.adapters.publishers.kafka import KafkaPublisher, KafkaSettings, cluster_topics
from jobrunner.ports import OutboundMessage, PublishError

if TYPE_CHECKING:
    from devstack.servers import Endpoints

pytestmark = pytest.mark.integration


def message(topic: str, index: int) -> OutboundMessage:
    return OutboundMessage(topic=topic, key=f"job-{index}", value={"i": index}, headers={})


def test_a_record_the_broker_refuses_does_not_stop_the_next_publishes(endpoints: Endpoints) -> None:
    # Given a topic that refuses every record (larger than its max.message.bytes)
    refusing = f"refusing-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=endpoints.kafka_bootstrap)
    admin.create_topics([NewTopic(refusing, 1, 1, topic_configs={"max.message.bytes": "1"})])
    admin.close()
    publisher = KafkaPublisher(KafkaSettings(bootstrap=endpoints.kafka_bootstrap))
    try:
        # When a publish mixes a record for it with a good one
        with pytest.raises(PublishError) as raised:
            publisher.publish([message(refusing, 0), message("jobs", 1)])
        # Then the next publishes, to any other topic, go through
        publisher.publish([message("jobs", 2)])
        publisher.publish([message("job-dlq", 3)])
        # and the call failed as refused for good (the idempotent producer fails every record of the call
        # after one refusal, so the scan tries each alone before it blames one: services/scan/publishing.py)
        assert 0 in raised.value.rejected
    finally:
        publisher.close()



def test_the_cluster_lists_its_topics_to_the_publisher(endpoints: Endpoints) -> None:
    # The question the publisher asks after a metadata timeout (has the cluster this topic?), on the real
    # broker. (A send to a missing topic cannot time out here: this broker creates topics on first use.)
    listed = cluster_topics(KafkaSettings(bootstrap=endpoints.kafka_bootstrap))
    assert "jobs" in listed and f"deleted-{uuid.uuid4().hex[:8]}" not in listed


def test_closing_at_once_leaves_no_message_undecided_to_be_sent_later(endpoints: Endpoints) -> None:
    # Given a producer holding a message it has not sent yet (a long linger keeps it in its buffer)
    settings = KafkaSettings(bootstrap=endpoints.kafka_bootstrap, linger_ms=3_000, delivery_timeout_s=10)
    publisher = KafkaPublisher(settings)
    future = publisher.producer.send("jobs", key=b"job-0", value=b"{}")
    # When the publisher closes it at once (as it does with a producer that has stopped settling messages)
    publisher.close(timeout_s=0)
    # Then the close returned (kafka-python's own close raises here), and the message is settled: sent or
    # failed, never left for the producer's thread to send later
    assert future.is_done
