"""Custom resource ``Custom::KafkaTopics``: create the job runner's topics on MSK Serverless.

Called by the CDK Provider framework (which answers CloudFormation), so this only returns or raises.
Properties: ``BootstrapServers`` (the IAM bootstrap string) and ``Topics`` ([{Name, Partitions}]; the
values arrive as strings). Create and Update create every missing topic; topics that exist are left
alone (partitions are never shrunk or grown here). Delete does nothing: topics go with the cluster,
and a replaced resource must not delete topics the new one still uses.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka.admin import KafkaAdminClient
from kafka.errors import TopicAlreadyExistsError

log = logging.getLogger()
log.setLevel(logging.INFO)


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


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    properties = event["ResourceProperties"]
    physical_id = event.get("PhysicalResourceId") or f"kafka-topics-{event['LogicalResourceId']}"
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": physical_id}
    admin = KafkaAdminClient(
        bootstrap_servers=str(properties["BootstrapServers"]).split(","),
        security_protocol="SASL_SSL",
        sasl_mechanism="AWS_MSK_IAM",
        client_id="jobrunner-topic-admin",
        request_timeout_ms=60_000,
    )
    try:
        created = create_missing(admin, wanted_topics(properties))
    finally:
        admin.close()
    log.info("topics created: %s", created or "none")
    return {"PhysicalResourceId": physical_id, "Data": {"Created": ",".join(created)}}
