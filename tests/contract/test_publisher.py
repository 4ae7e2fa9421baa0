"""The Publisher contract (jobrunner.ports.Publisher), on memory and on Kafka (read back with a real consumer)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from jobrunner.ports import OutboundMessage, PublishError
from tests.support.buses import Delivered

if TYPE_CHECKING:
    from tests.support.buses import Bus

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
JOB_SPAN = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def message(topic: str, key: str, n: int, **headers: str) -> OutboundMessage:
    return OutboundMessage(topic=topic, key=key, value={"n": n}, headers=headers)


def by_key(delivered: list[Delivered]) -> dict[str, list[Delivered]]:
    keys: dict[str, list[Delivered]] = {}
    for each in delivered:
        keys.setdefault(each.key, []).append(each)
    return keys


def test_each_message_reaches_its_topic_with_its_key_value_and_headers_and_not_its_parent_trace(bus: Bus) -> None:
    topic = bus.topic()
    value = {"job_id": "j-1", "payload": {"nested": [1, 2.5, None, True], "text": "déjà vu ✓"}, "attempt": 1}
    sent = [
        OutboundMessage(topic=topic, key="job-1", value=value,
                        headers={"execution_id": "e-1", "traceparent": TRACEPARENT}, parent_trace=JOB_SPAN),
        OutboundMessage(topic=topic, key="job-2", value={}, headers={}),
    ]
    bus.publisher.publish(sent)
    assert sorted(bus.delivered(topic, 2), key=lambda d: d.key) == [
        Delivered("job-1", value, {"execution_id": "e-1", "traceparent": TRACEPARENT}),
        Delivered("job-2", {}, {}),
    ]


def test_messages_of_one_key_are_delivered_in_the_order_they_were_published(bus: Bus) -> None:
    # Given keys spread over the topic's partitions, their messages interleaved in a call, then a second call
    topic = bus.topic()
    keys = [f"job-{k}" for k in range(4)]
    first = [message(topic, keys[n % 4], n) for n in range(24)]
    then = [message(topic, keys[n % 4], n) for n in range(24, 32)]
    bus.publisher.publish(first)
    bus.publisher.publish(then)
    # Then each key's messages arrive in the order published, each once
    delivered = by_key(bus.delivered(topic, 32))
    assert {key: [d.value["n"] for d in ds] for key, ds in delivered.items()} == {
        key: [m.value["n"] for m in first + then if m.key == key] for key in keys}


def test_a_message_refused_for_good_is_named_and_not_written_and_the_next_publishes_go_through(bus: Bus) -> None:
    topic, refusing = bus.topic(), bus.refusing_topic()
    # When a publish mixes a message the broker refuses for good with good ones
    mixed = [message(topic, "job-0", 0), message(refusing, "job-1", 1), message(topic, "job-2", 2)]
    with pytest.raises(PublishError) as raised:
        bus.publisher.publish(mixed)
    # Then it is named failed and rejected (others of the call may fail with it, and are named too)
    error = raised.value
    assert 1 in error.rejected and set(error.rejected) <= set(error.failed) <= {0, 1, 2}
    # And the next publishes go through: to another topic, and the refused message alone is refused again
    bus.publisher.publish([message(topic, "job-3", 3)])
    with pytest.raises(PublishError) as alone:
        bus.publisher.publish([message(refusing, "job-1", 1)])
    assert (alone.value.failed, alone.value.rejected) == ([0], [0])
    bus.publisher.publish([message(topic, "job-4", 4)])
    # And every message not named failed was delivered (one that failed may have been too: at-least-once)
    delivered = {d.value["n"] for d in bus.delivered(topic, 4 - len(error.failed) + 1)}
    assert {n for n in (0, 2) if n not in error.failed} | {3, 4} <= delivered <= {0, 2, 3, 4}


@pytest.mark.solo  # it times the bound
def test_a_broker_that_cannot_be_reached_fails_every_message_within_the_bound_and_refuses_none(bus: Bus) -> None:
    publisher = bus.unreachable()
    started = time.monotonic()
    with pytest.raises(PublishError) as raised:
        publisher.publish([message("jobs", f"job-{n}", n) for n in range(3)], timeout_s=2)
    elapsed = time.monotonic() - started
    assert (raised.value.failed, raised.value.rejected) == ([0, 1, 2], [])
    assert elapsed < 2 + 1.5, f"took {elapsed:.1f} s, bound 2 s"


def test_an_empty_publish_returns(bus: Bus) -> None:
    bus.publisher.publish([], timeout_s=2)


def test_a_closed_publisher_may_be_closed_again_and_publishes_again(bus: Bus) -> None:
    topic = bus.topic()
    bus.publisher.publish([message(topic, "job-0", 0)])
    bus.publisher.close()
    bus.publisher.close()
    bus.publisher.publish([message(topic, "job-0", 1)])
    assert [d.value["n"] for d in bus.delivered(topic, 2)] == [0, 1]
