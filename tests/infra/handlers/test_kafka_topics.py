"""The topic custom resource handler, with a fake admin client (no Kafka)."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.errors import TopicAlreadyExistsError

from infra.handlers.kafka_topics import handler as topics


class FakeAdmin:
    def __init__(self, existing: set[str], racing: frozenset[str] = frozenset()) -> None:
        self.topics = set(existing)
        self.racing = racing
        self.requests: list[dict[str, Any]] = []
        self.closed = False

    def list_topics(self) -> list[str]:
        return sorted(self.topics)

    def create_topics(self, new_topics: dict[str, Any], timeout_ms: int) -> None:
        self.requests.append(new_topics)
        (name,) = new_topics
        if name in self.racing:
            raise TopicAlreadyExistsError(name)
        self.topics.add(name)

    def close(self) -> None:
        self.closed = True


def _event(request: str, physical_id: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "RequestType": request, "LogicalResourceId": "StreamingTopics",
        "ResourceProperties": {"BootstrapServers": "b-1:9098,b-2:9098",
                               "Topics": [{"Name": "jobs", "Partitions": "6"}, {"Name": "job-dlq", "Partitions": "1"}]},
    }
    if physical_id:
        event["PhysicalResourceId"] = physical_id
    return event


def test_creates_only_the_missing_topics_with_their_partitions() -> None:
    admin = FakeAdmin(existing={"jobs"})

    created = topics.create_missing(admin, {"jobs": 6, "job-dlq": 1})

    assert created == ["job-dlq"]
    assert admin.requests == [{"job-dlq": {"num_partitions": 1}}]  # replication factor left to MSK


def test_a_topic_created_meanwhile_is_not_an_error() -> None:
    admin = FakeAdmin(existing=set(), racing={"jobs"})

    assert topics.create_missing(admin, {"jobs": 6}) == []


def test_create_connects_with_msk_iam_and_answers_a_stable_id(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = FakeAdmin(existing=set())
    seen: dict[str, Any] = {}

    def client(**config: Any) -> FakeAdmin:
        seen.update(config)
        return admin

    monkeypatch.setattr(topics, "KafkaAdminClient", client)

    answer = topics.handler(_event("Create"), None)

    assert seen["bootstrap_servers"] == ["b-1:9098", "b-2:9098"]
    assert (seen["security_protocol"], seen["sasl_mechanism"]) == ("SASL_SSL", "AWS_MSK_IAM")
    assert answer == {"PhysicalResourceId": "kafka-topics-StreamingTopics", "Data": {"Created": "job-dlq,jobs"}}
    assert admin.closed


def test_delete_touches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topics, "KafkaAdminClient", lambda **_: pytest.fail("no connection on delete"))

    assert topics.handler(_event("Delete", "kafka-topics-x"), None) == {"PhysicalResourceId": "kafka-topics-x"}
