"""Publisher on Apache Kafka / Amazon MSK with kafka-python.

The producer is injected (``kafka_producer``) or built from settings; it is idempotent with
acks=all, so a broker-side retry never duplicates a message within one producer session.

A publish is bounded in time and leaves nothing behind: the producer's own delivery timeout
(``delivery_timeout_ms``, after which it gives a message up for good) is shorter than the wait for
acknowledgements, sends stop being issued early enough for the last one to be acknowledged or given
up within the bound, and ``publish`` waits for every message's fate before it returns. So when it
returns or raises, no message of that call is still queued to reach the broker later (a scan whose
lease ran out could otherwise see its old messages written after another scan took over).

A record the broker refuses for good (too large for its topic, not authorized) leaves kafka-python's
idempotent producer failing every later send, whatever its topic; so after such a refusal the
publisher closes its producer and builds a new one for the next publish, and one bad job never stops
the others' executions (nor their dead letters).

A topic that does not exist is refused too. On a cluster that does not create topics on first use
(Amazon MSK's default; the CDK app creates ours) a send to a deleted topic waits for its metadata and
times out, as it would when the broker is away. After such a timeout the publisher asks
the cluster for its topics: if it answers without this one, the message is refused for good (and the
topic's later messages without a wait, for ``MISSING_TOPIC_TTL_S``); if it does not answer, it stays a
timeout, which never condemns a message.

A producer that leaves a message undecided past its own delivery timeout is replaced too. kafka-python
3.0.12 can wedge that way for good: when a batch already in flight expires (a broker restarted while
it was sent), the sender resets the idempotent producer id but leaves its transaction manager READY,
so it never asks for a new id and, for want of one, never sends nor expires another batch. Every later
publish then timed out, and a scan holding such a producer retried its rows until it was stopped.
kafka-python's own ``close`` cannot close such a producer: it flushes first, and a flush that cannot finish
raises before anything is closed (at a 0 s timeout, whenever a message is undecided), leaving the I/O thread
running with the message. So the publisher aborts what the producer holds instead (``_abort``); before,
the close's error escaped the publish and ended the scan (the cluster fault suite met it: a broker
killed, a scan crashed, and its partition's executions went out a minute late, after its lease lapsed).

Connections that die while the Lambda environment is frozen (the broker closes them after its
``connections.max.idle.ms``, an NLB or NAT gateway forgets a flow after 350 s idle) are closed by the
producer itself first: ``connections_max_idle_ms`` is below both, and kafka-python checks it when it
wakes up, before it sends, so the first publish after a long freeze opens a new connection instead
of waiting a request timeout on a dead one (measured with ``bench/freeze.py``: docs/reliability.md).
Its sockets also carry TCP keepalive and ``TCP_USER_TIMEOUT`` (``adapters/sockets.py``).
"""

from __future__ import annotations

import json
import logging
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError, KafkaTimeoutError

from jobrunner.adapters.sockets import liveness_options
from jobrunner.ports import OutboundMessage, Publisher, PublishError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap: str = "127.0.0.1:9092"
    #: "plaintext" (local) or "msk-iam" (Amazon MSK with IAM auth over TLS).
    security: str = "plaintext"
    region: str = "us-east-1"
    linger_ms: int = 5
    compression: str | None = None
    #: The longest a publish may take, when its caller gives no bound of its own.
    send_timeout_s: float = 10.0
    #: After this the producer gives a message up for good (never sends it later).
    delivery_timeout_s: float = 7.0
    #: The producer closes a connection idle this long (NLBs and NAT gateways drop idle flows at 350 s).
    connections_max_idle_s: float = 300.0
    #: Replicas of the topics the local stack creates (``adapters/publishers/topics.py``): 3 on a cluster.
    topic_replication: int = 1


#: Time kept between the producer's delivery timeout and the end of a publish's bound.
GRACE_S = 1.0
#: How long an aborted producer's I/O thread is given to fail what it held and exit.
ABORT_WAIT_S = 1.0
#: How long the cluster's answer that a topic does not exist is trusted before it is asked again.
MISSING_TOPIC_TTL_S = 30.0


def producer_config(settings: KafkaSettings) -> dict[str, Any]:
    delivery_ms = int(settings.delivery_timeout_s * 1000)
    config: dict[str, Any] = {
        "bootstrap_servers": settings.bootstrap.split(","),
        "acks": "all",
        "enable_idempotence": True,
        "linger_ms": settings.linger_ms,
        "retries": 10,
        "delivery_timeout_ms": delivery_ms,
        "request_timeout_ms": delivery_ms - settings.linger_ms - 500,
        "reconnect_backoff_max_ms": 2_000,
        "max_block_ms": 2_000,  # a send blocks at most this long when the broker (or the topic) is away
        "connections_max_idle_ms": int(settings.connections_max_idle_s * 1000),
        # kafka-python's own defaults (no Nagle, keepalive on) and the liveness options.
        "socket_options": [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1), *liveness_options()],
    }
    if settings.compression:
        config["compression_type"] = settings.compression
    if settings.security == "msk-iam":
        config.update(security_protocol="SASL_SSL", sasl_mechanism="AWS_MSK_IAM")
    return config


def cluster_topics(settings: KafkaSettings) -> set[str]:
    """The topics the cluster lists to us (those we may describe); raises ``KafkaError`` when it does not answer."""
    config = producer_config(settings)
    connection = {key: config[key] for key in ("bootstrap_servers", "security_protocol", "sasl_mechanism")
                  if key in config}
    admin = KafkaAdminClient(client_id="jobrunner-publisher", request_timeout_ms=3_000, **connection)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def encode(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


class KafkaPublisher(Publisher):
    def __init__(
        self, settings: KafkaSettings, kafka_producer: KafkaProducer | None = None,
        list_topics: Callable[[], set[str]] | None = None,
    ) -> None:
        self._settings = settings
        self._producer = kafka_producer
        #: A producer given to us is kept whatever happens; one we built is replaced after a refusal.
        self._owns_producer = kafka_producer is None
        self._list_topics = list_topics or (lambda: cluster_topics(settings))
        #: Topics the cluster said it does not have, until when that answer is trusted (monotonic).
        self._missing_topics: dict[str, float] = {}

    def _missing(self, topic: str, *, ask: bool) -> bool:
        """Whether the cluster says it has no ``topic`` (asked again once its last answer is old)."""
        if self._missing_topics.get(topic, 0.0) > time.monotonic():
            return True
        if not ask:
            return False
        try:
            listed = self._list_topics()
        except Exception as exc:  # the cluster did not answer either: the broker is away, not the topic
            log.warning("could not list the cluster's topics: %s", exc)
            return False
        if topic in listed:
            return False
        self._missing_topics[topic] = time.monotonic() + MISSING_TOPIC_TTL_S
        log.warning("topic %s does not exist: its messages are refused", topic)
        return True

    @property
    def producer(self) -> KafkaProducer:
        return self._connected(self._settings.send_timeout_s)

    def _connected(self, bound_s: float) -> KafkaProducer:
        """The producer, built if there is none. kafka-python connects to the cluster in its constructor (30 s
        by default): that wait is bounded by ``bound_s``, so a publish with the broker away keeps its bound."""
        if self._producer is None:
            config = producer_config(self._settings)
            config["bootstrap_timeout_ms"] = max(1, int(bound_s * 1000))
            self._producer = KafkaProducer(**config)
        return self._producer

    def publish(self, messages: Sequence[OutboundMessage], timeout_s: float | None = None) -> None:
        budget = self._settings.send_timeout_s if timeout_s is None else timeout_s
        started = time.monotonic()
        deadline = started + budget
        # The last send must leave the producer its delivery timeout to settle that message.
        send_until = started + max(budget - self._settings.delivery_timeout_s - GRACE_S, min(1.0, budget))
        try:
            producer = self._connected(budget)
        except KafkaError as exc:
            raise PublishError(range(len(messages)), f"cannot connect: {exc}") from exc
        futures, failed, missing = self._send(producer, messages, send_until)
        cause = "not sent within the publish's time bound" if failed else ""
        if missing:
            topics = sorted({messages[index].topic for index in missing})
            cause = f"topic(s) {', '.join(topics)} do not exist in the cluster"
        cause, rejected = _settle(producer, futures, deadline, failed, cause)
        self._drop_stuck_producer(futures, rejected)
        if failed or missing:
            raise PublishError(sorted(failed + missing), cause, rejected=sorted(rejected + missing))

    def _send(self, producer: KafkaProducer, messages: Sequence[OutboundMessage], send_until: float,
              ) -> tuple[list[tuple[int, Any]], list[int], list[int]]:
        """Send each message until ``send_until``; returns the futures of those sent (with their index) and the
        indexes of those not sent: failed (retriable: not written, now or later) and of a missing topic."""
        futures: list[tuple[int, Any]] = []
        failed: list[int] = []
        missing: list[int] = []
        for index, message in enumerate(messages):
            if self._missing(message.topic, ask=False):
                missing.append(index)
                continue
            if time.monotonic() > send_until:  # not sent at all: certainly not written, now or later
                failed.append(index)
                continue
            try:
                futures.append((index, producer.send(
                    message.topic,
                    key=message.key.encode("utf-8"),
                    value=encode(message.value),
                    headers=[(k, v.encode("utf-8")) for k, v in message.headers.items()],
                )))
            except KafkaTimeoutError as exc:  # no metadata for the topic: is it gone, or the broker?
                (missing if self._missing(message.topic, ask=True) else failed).append(index)
                log.warning("send failed: %s", exc)
            except KafkaError as exc:
                log.warning("send failed: %s", exc)
                failed.append(index)
        return futures, failed, missing

    def _drop_stuck_producer(self, futures: list[tuple[int, Any]], rejected: list[int]) -> None:
        """Close the producer (the next publish builds a new one) after a refusal for good, or when it left a
        message undecided past its delivery timeout; an injected producer is its owner's to close."""
        undecided = sum(1 for _, future in futures if not future.is_done)
        if rejected and self._owns_producer:
            log.warning("the broker refused %d record(s) for good; starting a new producer", len(rejected))
            self.close(timeout_s=0)
        elif undecided and self._owns_producer:
            # The producer should have settled every message within its delivery timeout; it did not, so
            # it has stopped sending (kafka-python 3.0.12 after an expired in-flight batch: see the module
            # doc). Closing it at once aborts what it still holds, so nothing of this call is sent later.
            log.warning("%d message(s) still undecided past the delivery timeout; starting a new producer", undecided)
            self.close(timeout_s=0)

    def close(self, timeout_s: float = 10) -> None:
        producer, self._producer = self._producer, None
        if producer is None:
            return
        try:
            producer.close(timeout=timeout_s)
        except KafkaError as exc:
            # kafka-python flushes before it closes, and a flush that cannot finish in time raises before
            # the producer is closed (always, at 0 s, while a message is undecided): its I/O thread would
            # go on and could still send that message. Abort what it holds instead.
            log.warning("could not close the producer (%s); aborting what it still holds", exc)
            _abort(producer, timeout_s)


def _settle(producer: KafkaProducer, futures: list[tuple[int, Any]], deadline: float, failed: list[int],
            cause: str) -> tuple[str, list[int]]:
    """Wait until ``deadline`` for the fate of every message sent. Those that failed are added to ``failed``;
    returns the cause to report (``cause``, or the first failure's) and the indexes refused for good."""
    rejected: list[int] = []
    try:
        producer.flush(timeout=max(0.0, deadline - time.monotonic()))
    except KafkaError as exc:
        cause = str(exc)
    for index, future in futures:
        try:
            # Waits out the delivery timeout at most: then the message is acknowledged or given up.
            future.get(timeout=max(0.0, deadline - time.monotonic()))
        except Exception as exc:
            failed.append(index)
            if isinstance(exc, KafkaError) and not exc.retriable and not isinstance(exc, KafkaTimeoutError):
                rejected.append(index)
            cause = cause or f"{type(exc).__name__}: {exc}"
    return cause, rejected


def _abort(producer: KafkaProducer, timeout_s: float) -> None:
    """Fail every message ``producer`` has not settled, so that none is sent later, and close it.

    kafka-python has no public call for this: its I/O thread (``_sender``), forced to close, fails every
    batch still undecided and exits, as ``close`` does when its own wait runs out after the flush.
    """
    sender = getattr(producer, "_sender", None)
    if sender is not None:
        sender.force_close()
        sender.join(max(timeout_s, ABORT_WAIT_S))
    try:
        producer.close(timeout=0)  # nothing is undecided now: this releases the rest
    except KafkaError as exc:
        log.warning("the producer could not be closed after its messages were aborted: %s", exc)
