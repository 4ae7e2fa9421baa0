"""The local stack's events, in the shapes Powertools reads them in (``devstack.stack``)."""

from __future__ import annotations

from types import SimpleNamespace

from aws_lambda_powertools.utilities.data_classes import KafkaEvent
from kafka.structs import TopicPartition

from devstack.stack import msk_event


def test_the_local_msk_event_reads_as_powertools_kafka_event() -> None:
    # Given two records a local consumer polled from one partition, one without a key
    partition = TopicPartition("job-results", 2)
    trace = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    polled = [SimpleNamespace(topic="job-results", partition=2, offset=offset, timestamp=1795000000000, key=key,
                              value=value, headers=headers)
              for offset, (key, value, headers) in enumerate([(b"j-1", b'{"a": 1}', [("traceparent", trace)]),
                                                               (None, b"\xff", [])])]
    # When they are put in the shape of an MSK event
    event = KafkaEvent(msk_event({partition: polled}))
    # Then Powertools reads each record's topic, offset and raw value back
    assert event.event_source == "aws:kafka"
    assert [(r.topic, r.partition, r.offset, r.decoded_key, r.decoded_value) for r in event.records] == [
        ("job-results", 2, 0, b"j-1", b'{"a": 1}'), ("job-results", 2, 1, b"", b"\xff")]
    # and each record's headers, as MSK sends them (the execution's trace context for the delivery)
    assert [dict(r.decoded_headers) for r in event.records] == [{"traceparent": trace}, {}]


def test_the_local_stack_keeps_the_webhook_secrets_on_moto_read_again_each_second() -> None:
    from devstack.servers import Endpoints
    from devstack.stack import local_settings

    endpoints = Endpoints("127.0.0.1", 31042, "127.0.0.1:31092", "http://127.0.0.1:31501")
    settings = local_settings(endpoints)
    assert settings.secrets_endpoint == settings.dynamodb_endpoint == "http://127.0.0.1:31501"
    assert settings.webhook_secret_cache_s == 1.0
    assert local_settings(endpoints, webhook_secret_cache_s=5.0).webhook_secret_cache_s == 5.0
