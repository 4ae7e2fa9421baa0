"""The local Cassandra, Kafka and moto servers answer real client requests."""

from __future__ import annotations

import time
import uuid

import boto3
import pytest
from cassandra.cluster import Cluster
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from devstack.servers import Endpoints, ensure_all


@pytest.fixture(scope="module")
def endpoints() -> Endpoints:
    return ensure_all()


@pytest.mark.integration
def test_cassandra_answers_cql(endpoints: Endpoints) -> None:
    cluster = Cluster([endpoints.cassandra_host], port=endpoints.cassandra_port, protocol_version=5)
    try:
        row = cluster.connect().execute("SELECT release_version FROM system.local").one()
    finally:
        cluster.shutdown()
    assert row is not None
    assert str(row.release_version).startswith("5.0")


@pytest.mark.integration
def test_kafka_round_trips_a_message(endpoints: Endpoints) -> None:
    topic = f"devstack-test-{uuid.uuid4().hex[:12]}"
    admin = KafkaAdminClient(bootstrap_servers=endpoints.kafka_bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    finally:
        admin.close()

    producer = KafkaProducer(bootstrap_servers=endpoints.kafka_bootstrap, acks="all")
    try:
        producer.send(topic, key=b"k", value=b"hello devstack").get(timeout=30)
    finally:
        producer.close()

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=endpoints.kafka_bootstrap,
        group_id=f"{topic}-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    received: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while not received and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                received.extend(record.value for record in records)
    finally:
        consumer.close()
    assert received == [b"hello devstack"]


@pytest.mark.integration
def test_moto_serves_dynamodb(endpoints: Endpoints) -> None:
    dynamodb = boto3.client(
        "dynamodb",
        endpoint_url=endpoints.dynamodb_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    table = f"devstack-test-{uuid.uuid4().hex[:12]}"
    dynamodb.create_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    try:
        described = dynamodb.describe_table(TableName=table)["Table"]
        assert described["TableName"] == table
        assert described["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    finally:
        dynamodb.delete_table(TableName=table)
