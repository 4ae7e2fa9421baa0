"""The benchmark's own corner of the shared local servers: a keyspace, a heartbeat table and topics
named after one run id (``jr_bench_<id>``), created at the start and removed at the end.

Other engineers run tests against the same Cassandra, Kafka and moto at the same time, so nothing
here touches a name the benchmark did not create.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from devstack.stack import local_settings

if TYPE_CHECKING:
    from devstack import servers
    from jobrunner.config import Settings

log = logging.getLogger(__name__)

#: Partitions of the benchmark's topics: the local stack creates `jobs` with 4 (``ensure_topics``).
TOPIC_PARTITIONS = 4


@dataclass(frozen=True)
class BenchNames:
    run_id: str

    @property
    def keyspace(self) -> str:
        return f"jr_bench_{self.run_id}"

    @property
    def heartbeat_table(self) -> str:
        return f"jr-bench-heartbeats-{self.run_id}"

    @property
    def topic(self) -> str:
        """Drain, scaling, memory, submit and the Kafka ceiling."""
        return f"jr-bench-{self.run_id}"

    @property
    def lateness_topic(self) -> str:
        """Only the lateness minutes, read back afterwards for the messages' CreateTime."""
        return f"jr-bench-{self.run_id}-lateness"

    @property
    def results_topic(self) -> str:
        """Where workers report (never the shared `job-results`): the full-stack section's example worker."""
        return f"jr-bench-{self.run_id}-results"

    @property
    def dead_letter_topic(self) -> str:
        """Where exhausted executions go (never the shared `job-dlq`)."""
        return f"jr-bench-{self.run_id}-dlq"

    @property
    def fullstack_topic(self) -> str:
        """The executions of the full-stack section alone: its example worker consumes this topic from its
        start, so it must not hold the other sections' messages."""
        return f"jr-bench-{self.run_id}-fullstack"

    @property
    def fairness_topic(self) -> str:
        """The fairness section's minutes alone, read back afterwards for each message's tenant and CreateTime."""
        return f"jr-bench-{self.run_id}-fairness"

    @property
    def delivery_topic(self) -> str:
        """Where the scans put the executions of jobs with a target (never the shared `job-deliveries`): the
        deliveries section's delivery function consumes it."""
        return f"jr-bench-{self.run_id}-deliveries"

    @property
    def kafka_path_topic(self) -> str:
        """The deliveries section's executions without a target, beside the delivered ones: a consumer of its own
        reads them as they come."""
        return f"jr-bench-{self.run_id}-kafka-path"

    @property
    def fullstack_heartbeat_table(self) -> str:
        """The full-stack section's ticker starts from a table of its own, not from the watermarks and leases
        that the other sections' scans left in the run's table."""
        return f"{self.heartbeat_table}-fullstack"

    @property
    def topics(self) -> list[str]:
        return [self.topic, self.lateness_topic, self.results_topic, self.dead_letter_topic, self.fullstack_topic,
                self.fairness_topic, self.delivery_topic, self.kafka_path_topic]

    @property
    def consumer_groups(self) -> list[str]:
        """The groups of the local stack run on the run's keyspace (``devstack.stack.LocalStack``): its
        results loop and its example worker; and the deliveries section's delivery function."""
        return [f"jobrunner-results-{self.keyspace}", f"example-{self.keyspace}", f"jobrunner-delivery-{self.keyspace}"]


def new_names() -> BenchNames:
    return BenchNames(uuid.uuid4().hex[:8])


def bench_settings(endpoints: servers.Endpoints, names: BenchNames, segments: int = 16) -> Settings:
    return local_settings(
        endpoints,
        keyspace=names.keyspace,
        heartbeat_table=names.heartbeat_table,
        segments=segments,
        topic=names.topic,
        allowed_topics=(names.topic, names.lateness_topic, names.fullstack_topic, names.fairness_topic,
                        names.kafka_path_topic),
        delivery_topic=names.delivery_topic,
        results_topic=names.results_topic,
        dead_letter_topic=names.dead_letter_topic,
    )


def with_segments(settings: Settings, segments: int) -> Settings:
    return settings.replace(segments=segments)


def create(settings: Settings, names: BenchNames) -> None:
    """Schema, topics and heartbeat table, as the local stack bootstraps them."""
    import boto3

    from cql.migrate import migrate
    from jobrunner.adapters.leases.dynamodb import ensure_table
    from jobrunner.adapters.publishers.topics import ensure_topics

    migrate(settings.cassandra)
    ensure_topics(settings.kafka.bootstrap, names.topics, partitions=TOPIC_PARTITIONS)
    dynamodb = boto3.client("dynamodb", region_name=settings.region, endpoint_url=settings.dynamodb_endpoint)
    ensure_table(dynamodb, settings.heartbeat_table)


def destroy(settings: Settings, names: BenchNames) -> list[str]:
    """Drop everything ``create`` made; returns what could not be removed (best effort, never raises)."""
    import boto3
    from kafka import KafkaAdminClient

    from jobrunner.adapters.stores.session import connect

    problems: list[str] = []
    try:
        session = connect(settings.cassandra, keyspace=False)
        try:
            session.execute(f"DROP KEYSPACE IF EXISTS {names.keyspace}", timeout=120)
        finally:
            session.cluster.shutdown()
    except Exception as exc:
        problems.append(f"keyspace {names.keyspace}: {exc}")
    try:
        admin = KafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap.split(","), client_id="jr-bench-admin")
        try:
            existing = set(admin.list_topics())
            doomed = [t for t in names.topics if t in existing]
            if doomed:
                admin.delete_topics(doomed)
            problems += _delete_groups(admin, names.consumer_groups)
        finally:
            admin.close()
    except Exception as exc:
        problems.append(f"topics: {exc}")
    try:
        dynamodb = boto3.client("dynamodb", region_name=settings.region, endpoint_url=settings.dynamodb_endpoint)
        for table in (settings.heartbeat_table, names.fullstack_heartbeat_table):
            with contextlib.suppress(dynamodb.exceptions.ResourceNotFoundException):
                dynamodb.delete_table(TableName=table)
    except Exception as exc:
        problems.append(f"heartbeat table: {exc}")
    for problem in problems:
        log.warning("clean-up: %s", problem)
    return problems


def _delete_groups(admin: Any, groups: list[str]) -> list[str]:
    """Delete those of ``groups`` that exist (their committed offsets); returns the ones that could not be."""
    existing = {group["group_id"] for group in admin.list_groups()}
    doomed = [g for g in groups if g in existing]
    if not doomed:
        return []
    outcome: dict[str, Any] = admin.delete_groups(doomed)
    return [f"consumer group {group}: {error}" for group, error in outcome.items()
            if error not in (None, "OK", "NoError")]
