"""Creating the topics the system uses (the local stack; in AWS the CDK app creates them)."""

from __future__ import annotations

import contextlib

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

JOBS = "jobs"
RESULTS = "job-results"
DEAD_LETTERS = "job-dlq"


def ensure_topics(bootstrap: str, names: list[str], partitions: int = 4, replication: int = 1) -> list[str]:
    """Create the missing topics among ``names``; returns the ones created."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="jobrunner-admin")
    try:
        existing = set(admin.list_topics())
        missing = [n for n in dict.fromkeys(names) if n not in existing]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):
                admin.create_topics([NewTopic(n, partitions, replication) for n in missing])
        return missing
    finally:
        admin.close()
