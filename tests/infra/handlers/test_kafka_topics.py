"""The topic custom resource handler, with a fake admin client (no Kafka) and injected failures."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.errors import InvalidPartitionsError, KafkaConnectionError, KafkaTimeoutError, TopicAlreadyExistsError

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


class LambdaContext:
    def __init__(self, remaining_s: float) -> None:
        self.remaining_s = remaining_s

    def get_remaining_time_in_millis(self) -> int:
        return int(self.remaining_s * 1000)


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

    answer = topics.handler(_event("Create"), LambdaContext(remaining_s=300))

    assert seen["bootstrap_servers"] == ["b-1:9098", "b-2:9098"]
    assert (seen["security_protocol"], seen["sasl_mechanism"]) == ("SASL_SSL", "AWS_MSK_IAM")
    assert answer == {"PhysicalResourceId": "kafka-topics-StreamingTopics", "Data": {"Created": "job-dlq,jobs"}}
    assert admin.closed


def test_delete_touches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topics, "KafkaAdminClient", lambda **_: pytest.fail("no connection on delete"))

    assert topics.handler(_event("Delete", "kafka-topics-x"), None) == {"PhysicalResourceId": "kafka-topics-x"}


class Clock:
    """Sleeps by moving time forward: ``remaining`` shrinks as the handler waits."""

    def __init__(self, budget_s: float) -> None:
        self.budget_s = budget_s
        self.sleeps: list[float] = []

    def remaining(self) -> float:
        return self.budget_s - sum(self.sleeps)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


def _connections(monkeypatch: pytest.MonkeyPatch, outcomes: list[Any]) -> list[FakeAdmin]:
    """Each connection attempt takes the next outcome: an exception to raise, or an admin to return."""
    opened: list[FakeAdmin] = []

    def connect(bootstrap: str) -> FakeAdmin:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        opened.append(outcome)
        return outcome

    monkeypatch.setattr(topics, "connect", connect)
    return opened


def test_transient_failures_are_retried_with_growing_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a cluster whose brokers are not reachable for the first two attempts
    admin = FakeAdmin(existing=set())
    opened = _connections(monkeypatch, [KafkaConnectionError(), ConnectionRefusedError("9098"), admin])
    clock = Clock(budget_s=300)

    # When the topics are created
    created = topics.create_with_retries("b-1:9098", {"jobs": 3}, remaining_s=clock.remaining, sleep=clock.sleep,
                                         jitter=lambda cap: cap)

    # Then the third attempt succeeds, after pauses of 2 s and 4 s, and its client is closed
    assert created == ["jobs"]
    assert clock.sleeps == [2.0, 4.0]
    assert opened == [admin] and admin.closed


def test_a_create_that_times_out_is_retried_and_the_topics_made_meanwhile_are_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a first attempt that creates one topic, then times out on the next
    class TimesOutOnce(FakeAdmin):
        def create_topics(self, new_topics: dict[str, Any], timeout_ms: int) -> None:
            if "jobs" in new_topics and "job-dlq" in self.topics:
                raise KafkaTimeoutError("create_topics")
            super().create_topics(new_topics, timeout_ms)

    first = TimesOutOnce(existing=set())
    second = FakeAdmin(existing=first.topics)
    _connections(monkeypatch, [first, second])
    clock = Clock(budget_s=300)

    created = topics.create_with_retries("b-1:9098", {"jobs": 3, "job-dlq": 1}, remaining_s=clock.remaining,
                                         sleep=clock.sleep, jitter=lambda cap: cap)

    assert created == ["job-dlq", "jobs"]
    assert first.closed and second.closed


def test_when_time_runs_out_the_failure_says_what_and_why(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given brokers that never answer and a function with 60 s left
    _connections(monkeypatch, [KafkaConnectionError("no brokers")] * 50)
    clock = Clock(budget_s=60)

    # Then it gives up in time to report (the provider answers CloudFormation) with a clear reason
    with pytest.raises(topics.TopicsNotCreated) as failure:
        topics.create_with_retries("b-1:9098", {"jobs": 3, "job-dlq": 1}, remaining_s=clock.remaining,
                                   sleep=clock.sleep, jitter=lambda cap: cap)

    message = str(failure.value)
    assert "job-dlq, jobs" in message and "b-1:9098" in message and "KafkaConnectionError" in message
    assert f"after {len(clock.sleeps) + 1} attempts" in message
    assert clock.remaining() >= topics.REPORT_MARGIN_S
    assert max(clock.sleeps) <= topics.MAX_BACKOFF_S


@pytest.mark.parametrize("error", [ValueError("bad bootstrap string"), InvalidPartitionsError("0 partitions")])
def test_an_error_no_retry_can_change_is_raised_at_once(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    _connections(monkeypatch, [error])
    clock = Clock(budget_s=300)

    with pytest.raises(type(error)):
        topics.create_with_retries("b-1:9098", {"jobs": 3}, remaining_s=clock.remaining, sleep=clock.sleep)
    assert clock.sleeps == []
