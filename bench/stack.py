"""The benchmark's own corner of the shared local servers: a keyspace, a heartbeat table and topics
named after one run id (``jr_bench_<id>``), created at the start and removed at the end.

Other engineers run tests against the same Cassandra, Kafka and moto at the same time, so nothing
here touches a name the benchmark did not create.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

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


def new_names() -> BenchNames:
    return BenchNames(uuid.uuid4().hex[:8])


def bench_settings(endpoints: servers.Endpoints, names: BenchNames, segments: int = 16) -> Settings:
    return local_settings(
        endpoints,
        CASSANDRA_KEYSPACE=names.keyspace,
        HEARTBEAT_TABLE=names.heartbeat_table,
        JOBRUNNER_SEGMENTS=str(segments),
        JOBRUNNER_TOPIC=names.topic,
        JOBRUNNER_ALLOWED_TOPICS=f"{names.topic},{names.lateness_topic}",
    )


def with_segments(settings: Settings, segments: int) -> Settings:
    return dataclasses.replace(settings, segments=segments)


def create(settings: Settings, names: BenchNames) -> None:
    """Schema, topics and heartbeat table, as the local stack bootstraps them."""
    import boto3

    from jobrunner.adapters.heartbeats.dynamodb import ensure_table
    from jobrunner.adapters.publishers.topics import ensure_topics
    from jobrunner.adapters.stores.migrate import migrate

    migrate(settings.cassandra)
    ensure_topics(settings.kafka.bootstrap, [names.topic, names.lateness_topic], partitions=TOPIC_PARTITIONS)
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
            doomed = [t for t in (names.topic, names.lateness_topic) if t in existing]
            if doomed:
                admin.delete_topics(doomed)
        finally:
            admin.close()
    except Exception as exc:
        problems.append(f"topics: {exc}")
    try:
        dynamodb = boto3.client("dynamodb", region_name=settings.region, endpoint_url=settings.dynamodb_endpoint)
        with contextlib.suppress(dynamodb.exceptions.ResourceNotFoundException):
            dynamodb.delete_table(TableName=settings.heartbeat_table)
    except Exception as exc:
        problems.append(f"heartbeat table: {exc}")
    for problem in problems:
        log.warning("clean-up: %s", problem)
    return problems
