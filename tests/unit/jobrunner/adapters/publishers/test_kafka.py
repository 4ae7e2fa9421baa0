"""KafkaPublisher: what reaches the producer for each OutboundMessage."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
from kafka.errors import KafkaTimeoutError

from jobrunner.adapters.publishers.kafka import GRACE_S, KafkaPublisher, KafkaSettings, producer_config
from jobrunner.ports import OutboundMessage, PublishError


class Acknowledged:
    is_done = True

    def get(self, timeout: float | None = None) -> None:
        return None


class RecordingProducer:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send(self, topic: str, **fields: Any) -> Acknowledged:
        self.sent.append({"topic": topic, **fields})
        return Acknowledged()

    def flush(self, timeout: float | None = None) -> None: ...


def test_a_message_is_sent_with_its_headers_and_not_its_parent_trace() -> None:
    producer = RecordingProducer()
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
    message = OutboundMessage(
        topic="jobs", key="job-1", value={"execution_id": "e-1"},
        headers={"execution_id": "e-1", "traceparent": traceparent},
        parent_trace="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    )
    KafkaPublisher(KafkaSettings(), kafka_producer=producer).publish([message])
    assert producer.sent == [{
        "topic": "jobs", "key": b"job-1", "value": b'{"execution_id":"e-1"}',
        "headers": [("execution_id", b"e-1"), ("traceparent", traceparent.encode())],
    }]


class LateFuture:
    """A send whose fate is settled only after ``settles_in`` seconds (the producer's delivery timeout)."""

    def __init__(self, settles_in: float) -> None:
        self._settled = threading.Event()
        threading.Timer(settles_in, self._settled.set).start()

    @property
    def is_done(self) -> bool:
        return self._settled.is_set()

    def get(self, timeout: float | None = None) -> None:
        if not self._settled.wait(timeout):
            raise KafkaTimeoutError("still queued")
        raise KafkaTimeoutError("expired: delivery timeout")


class StalledProducer(RecordingProducer):
    """A broker that stopped answering: flush gives up at once, each send settles (fails) a moment later."""

    def __init__(self) -> None:
        super().__init__()
        self.futures: list[LateFuture] = []

    def send(self, topic: str, **fields: Any) -> Any:  # type: ignore[override]
        super().send(topic, **fields)
        self.futures.append(LateFuture(0.3))
        return self.futures[-1]


def test_a_failed_publish_returns_only_once_no_message_is_still_queued() -> None:
    producer = StalledProducer()
    messages = [OutboundMessage(topic="jobs", key=f"job-{i}", value={}, headers={}) for i in range(2)]
    with pytest.raises(PublishError) as raised:
        KafkaPublisher(KafkaSettings(), kafka_producer=producer).publish(messages)
    assert raised.value.failed == [0, 1]
    assert all(future.is_done for future in producer.futures)


def test_the_producer_gives_a_message_up_before_a_publish_stops_waiting_for_it() -> None:
    # A message the producer still retried after the publish gave up on it could be written long after:
    # its delivery timeout (plus the grace) must fit in the publish's bound, and requests in that timeout.
    settings = KafkaSettings()
    config = producer_config(settings)
    assert config["delivery_timeout_ms"] / 1000 + GRACE_S <= settings.send_timeout_s
    assert config["request_timeout_ms"] + config["linger_ms"] <= config["delivery_timeout_ms"]


class MissingTopicProducer(RecordingProducer):
    """A cluster without the topic ``gone``: a send to it waits for metadata that never comes."""

    def __init__(self) -> None:
        super().__init__()
        self.waits = 0

    def send(self, topic: str, **fields: Any) -> Acknowledged:
        if topic == "gone":
            self.waits += 1
            raise KafkaTimeoutError("Failed to update metadata after 2.0 secs.")
        return super().send(topic, **fields)


def test_a_message_for_a_topic_the_cluster_does_not_have_is_refused_for_good() -> None:
    # Given a cluster that lists its topics, without "gone"
    producer = MissingTopicProducer()
    publisher = KafkaPublisher(KafkaSettings(), kafka_producer=producer, list_topics=lambda: {"jobs", "job-dlq"})
    messages = [OutboundMessage(topic=t, key=f"job-{i}", value={}, headers={})
                for i, t in enumerate(["gone", "jobs", "gone"])]
    # When a publish mixes its messages with a good one
    with pytest.raises(PublishError) as raised:
        publisher.publish(messages)
    # Then both are refused for good (not timed out), the good one went out, and only one send waited
    assert raised.value.failed == [0, 2] and raised.value.rejected == [0, 2]
    assert "gone" in str(raised.value) and [m["topic"] for m in producer.sent] == ["jobs"]
    assert producer.waits == 1


def test_a_metadata_timeout_while_the_cluster_does_not_answer_is_no_refusal() -> None:
    def unreachable() -> set[str]:
        raise KafkaTimeoutError("no broker")

    publisher = KafkaPublisher(KafkaSettings(), kafka_producer=MissingTopicProducer(), list_topics=unreachable)
    with pytest.raises(PublishError) as raised:
        publisher.publish([OutboundMessage(topic="gone", key="job-1", value={}, headers={})])
    assert raised.value.failed == [0] and raised.value.rejected == []


def test_the_producer_closes_an_idle_connection_before_the_path_or_the_broker_drops_it() -> None:
    # A Lambda frozen longer than an NLB's or NAT gateway's idle timeout (350 s) or the broker's
    # connections.max.idle.ms (600 s by default) wakes up with dead connections; the producer must have
    # given them up itself, or its first send waits a request timeout on one (bench/freeze.py).
    config = producer_config(KafkaSettings())
    assert config["connections_max_idle_ms"] < 350_000


def test_the_producer_sockets_keep_kafka_pythons_options_and_fail_a_dead_flow_within_a_request() -> None:
    options = {(level, name): value for level, name, value in producer_config(KafkaSettings())["socket_options"]}
    assert options[(socket.IPPROTO_TCP, socket.TCP_NODELAY)] == 1  # kafka-python's defaults, kept
    assert options[(socket.SOL_SOCKET, socket.SO_KEEPALIVE)] == 1
    if hasattr(socket, "TCP_USER_TIMEOUT"):  # Linux, as on Lambda
        request_timeout_ms = producer_config(KafkaSettings())["request_timeout_ms"]
        assert options[(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)] < request_timeout_ms


class Undecided:
    """A send the producer never settles (its sender wedged: no batch is sent nor expired any more)."""

    def __init__(self) -> None:
        self.is_done = False

    def get(self, timeout: float | None = None) -> None:
        raise KafkaTimeoutError("Timeout waiting for future")


class WedgedSender:
    """kafka-python's I/O thread: forced to close, it fails every batch still undecided, then exits."""

    def __init__(self, undecided: list[Undecided]) -> None:
        self._undecided = undecided
        self.forced = False

    def force_close(self) -> None:
        self.forced = True
        for future in self._undecided:
            future.is_done = True

    def join(self, timeout: float | None = None) -> None: ...


class WedgedProducer(RecordingProducer):
    """A producer that settles nothing any more. Its ``close`` flushes first, as kafka-python's does, and a
    flush that cannot finish within the close's timeout raises: so it raises while a message is undecided."""

    def __init__(self) -> None:
        super().__init__()
        self.closed_with: float | None = None
        self.undecided: list[Undecided] = []
        self._sender = WedgedSender(self.undecided)

    def send(self, topic: str, **fields: Any) -> Any:  # type: ignore[override]
        super().send(topic, **fields)
        self.undecided.append(Undecided())
        return self.undecided[-1]

    def close(self, timeout: float | None = None) -> None:
        if any(not future.is_done for future in self.undecided):
            raise KafkaTimeoutError("Timeout waiting for future")
        self.closed_with = timeout


class ClosableProducer(RecordingProducer):
    def close(self, timeout: float | None = None) -> None: ...


def test_a_producer_that_leaves_messages_undecided_is_closed_and_the_next_publish_gets_a_new_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a publisher whose own producer has wedged (it settles nothing any more)
    wedged, fresh = WedgedProducer(), ClosableProducer()
    waiting: list[RecordingProducer] = [wedged, fresh]
    monkeypatch.setattr("jobrunner.adapters.publishers.kafka.KafkaProducer", lambda **_: waiting.pop(0))
    publisher = KafkaPublisher(KafkaSettings())
    message = OutboundMessage(topic="jobs", key="job-1", value={}, headers={})
    # When a publish times out with its messages still undecided
    with pytest.raises(PublishError):
        publisher.publish([message], timeout_s=0.2)
    # Then what that producer held was aborted (never to be sent later) and the producer closed at once,
    # although its own close raised (a flush first, which cannot finish), and the next publish uses a new one
    assert wedged._sender.forced and all(future.is_done for future in wedged.undecided)
    assert wedged.closed_with == 0
    publisher.publish([message], timeout_s=0.2)
    assert waiting == [] and len(fresh.sent) == 1


def test_record_checksums_are_computed_in_c() -> None:
    # kafka-python checksums every record batch (CRC-32C); without the crc32c package it falls back to a
    # pure-Python loop that took 5 % of a scan's CPU in the drain benchmark.
    import crc32c
    from kafka.record import util

    assert util.calc_crc32c.__defaults__ == (crc32c.crc32c,)


def test_a_publish_that_must_first_connect_waits_for_the_broker_no_longer_than_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # kafka-python connects to the cluster in the producer's constructor, for 30 s by default; the first publish
    # of a scan builds the producer, so with the broker away it waited 30 s whatever its bound.
    asked: list[dict[str, Any]] = []

    def unreachable(**config: Any) -> RecordingProducer:
        asked.append(config)
        raise KafkaTimeoutError("Unable to bootstrap")

    monkeypatch.setattr("jobrunner.adapters.publishers.kafka.KafkaProducer", unreachable)
    message = OutboundMessage(topic="jobs", key="job-1", value={}, headers={})
    with pytest.raises(PublishError) as raised:
        KafkaPublisher(KafkaSettings()).publish([message], timeout_s=3)
    assert raised.value.failed == [0] and raised.value.rejected == []
    assert asked[0]["bootstrap_timeout_ms"] <= 3_000
    # Without a bound of its own, a publish's connection waits at most the publisher's own bound
    with pytest.raises(PublishError):
        KafkaPublisher(KafkaSettings(send_timeout_s=4)).publish([message])
    assert asked[1]["bootstrap_timeout_ms"] <= 4_000
