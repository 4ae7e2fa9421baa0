"""The Kafka message contract of an execution (DESIGN.md, "Kafka messages")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobrunner.domain.time import rfc3339
from jobrunner.domain.tracing import child_traceparent

if TYPE_CHECKING:
    from jobrunner.domain.jobs import Job, ScheduledExecution


def execution_message(
    job: Job, row: ScheduledExecution, result_token: str
) -> tuple[str, dict[str, Any], dict[str, str]]:
    """(key, value, headers) of the message that hands ``row`` to the workers; ``result_token`` is what the
    worker sends back with its result (``domain.receipts``)."""
    value = {
        "execution_id": row.execution_id,
        "job_id": job.job_id,
        "user_id": job.user_id,
        "scheduled_at": rfc3339(row.scheduled_at),
        "attempt": row.attempt,
        "trigger": row.trigger.value,
        "payload": job.payload,
        "result_token": result_token,
    }
    headers = {
        "execution_id": row.execution_id,
        "scheduled_at": value["scheduled_at"],
        "attempt": str(row.attempt),
    }
    if job.trace_parent:
        headers["traceparent"] = child_traceparent(job.trace_parent, row.execution_id)
    return job.job_id, value, headers
