"""Custom resource ``Custom::KafkaTopics``: create the job runner's topics on MSK Serverless.

Called by the CDK Provider framework (which answers CloudFormation), so this only returns or raises.
Properties: ``BootstrapServers`` (the IAM bootstrap string) and ``Topics`` ([{Name, Partitions}]; the
values arrive as strings). Create and Update create every missing topic; topics that exist are left
alone (partitions are never shrunk or grown here). Delete does nothing: topics go with the cluster,
and a replaced resource must not delete topics the new one still uses.

A new cluster's brokers, its DNS names or the IAM grant may not be ready the first seconds, and one
failed attempt would roll the whole stack back: each attempt (connect, list, create) is retried with
exponential backoff and jitter while the function has time left; what still fails is raised with the
topics, the attempts and the last error, which is what CloudFormation shows.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING, Any

from kafka.admin import KafkaAdminClient
from kafka.errors import (
    IllegalArgumentError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaConfigurationError,
    KafkaError,
    PolicyViolationError,
    TopicAlreadyExistsError,
)

if TYPE_CHECKING:
    from collections.abc import Callable

log = logging.getLogger()
log.setLevel(logging.INFO)

#: First pause between attempts and its ceiling, in seconds (doubled each time, with full jitter).
FIRST_BACKOFF_S = 2.0
MAX_BACKOFF_S = 30.0
#: Time kept back from the function's timeout to report the failure (the provider answers CloudFormation).
REPORT_MARGIN_S = 20.0
#: Errors worth another attempt: Kafka's (no broker yet, timeouts, authorization not yet in force) and the
#: network's (DNS not resolving yet, connection refused or reset).
TRANSIENT = (KafkaError, OSError, TimeoutError)
#: Kafka errors no later attempt can change (a bad topic or partition count, the client's configuration).
PERMANENT = (IllegalArgumentError, InvalidPartitionsError, InvalidReplicationFactorError, InvalidRequestError,
             InvalidTopicError, KafkaConfigurationError, PolicyViolationError)


class TopicsNotCreated(RuntimeError):
    """Every attempt failed; the message is what CloudFormation shows as the resource's failure reason."""


def wanted_topics(properties: dict[str, Any]) -> dict[str, int]:
    return {str(t["Name"]): int(t["Partitions"]) for t in properties["Topics"]}


def create_missing(admin: Any, topics: dict[str, int]) -> list[str]:
    """Create each topic of ``topics`` that ``admin`` does not list yet; returns those it created."""
    existing = set(admin.list_topics())
    created = []
    for name, partitions in sorted(topics.items()):
        if name in existing:
            continue
        try:
            # Replication factor left to the broker: MSK Serverless fixes it and rejects other values.
            admin.create_topics({name: {"num_partitions": partitions}}, timeout_ms=30_000)
            created.append(name)
        except TopicAlreadyExistsError:
            pass
    return created


def connect(bootstrap: str) -> Any:
    return KafkaAdminClient(
        bootstrap_servers=bootstrap.split(","),
        security_protocol="SASL_SSL",
        sasl_mechanism="AWS_MSK_IAM",
        client_id="jobrunner-topic-admin",
        request_timeout_ms=30_000,
    )


def create_with_retries(
    bootstrap: str, topics: dict[str, int], *, remaining_s: Callable[[], float],
    sleep: Callable[[float], None] = time.sleep, jitter: Callable[[float], float] = lambda cap: random.uniform(0, cap),
) -> list[str]:
    """Connect and create the missing topics, retrying transient failures while ``remaining_s()`` allows.

    Topics created by an attempt that failed later are found by the next one (listed, not re-created).
    """
    created: list[str] = []
    attempt = 0
    while True:
        attempt += 1
        admin = None
        try:
            admin = connect(bootstrap)
            created += create_missing(admin, topics)
            return created
        except PERMANENT:
            raise
        except TRANSIENT as exc:
            backoff = jitter(min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** (attempt - 1)))
            if remaining_s() - backoff < REPORT_MARGIN_S:
                raise TopicsNotCreated(
                    f"Kafka topics {', '.join(sorted(topics))} not created on {bootstrap} after {attempt} attempts "
                    f"(created so far: {', '.join(created) or 'none'}); last error: {type(exc).__name__}: {exc}. "
                    "Check that the cluster is ACTIVE, that the topic admin function's security group reaches "
                    "port 9098, and its log group for each attempt."
                ) from exc
            log.warning("attempt %d to create topics failed (%s: %s); next in %.1f s",
                        attempt, type(exc).__name__, exc, backoff)
            sleep(backoff)
        finally:
            if admin is not None:
                admin.close()


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    properties = event["ResourceProperties"]
    physical_id = event.get("PhysicalResourceId") or f"kafka-topics-{event['LogicalResourceId']}"
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": physical_id}
    created = create_with_retries(
        str(properties["BootstrapServers"]), wanted_topics(properties),
        remaining_s=lambda: context.get_remaining_time_in_millis() / 1000,
    )
    log.info("topics created: %s", created or "none")
    return {"PhysicalResourceId": physical_id, "Data": {"Created": ",".join(created)}}
