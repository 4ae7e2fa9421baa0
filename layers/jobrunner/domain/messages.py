"""The Kafka messages of an execution as the scan builds them (DESIGN.md, "Kafka messages"); their fields and
headers are declared in ``jobrunner_client.protocol``, shared with the worker SDK."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobrunner.domain.time import rfc3339
from jobrunner.domain.tracing import child_traceparent
from jobrunner_client.protocol import (
    ATTEMPT_HEADER,
    CANCEL_HEADER,
    EXECUTION_ID_HEADER,
    SCHEDULED_AT_HEADER,
    TRACEPARENT_HEADER,
    CancelMessage,
    ExecutionMessage,
)

if TYPE_CHECKING:
    from datetime import datetime

    from jobrunner.domain.jobs import ExecutionRecord, Job, ScheduledExecution


def destination(job: Job, delivery_topic: str) -> str:
    """The topic ``job``'s messages go to: the delivery function's (``delivery_topic``) for a job with a target,
    else the job's own."""
    return delivery_topic if job.spec.target is not None else job.spec.topic or ""


def execution_message(
    job: Job, row: ScheduledExecution, result_token: str
) -> tuple[str, dict[str, Any], dict[str, str]]:
    """(key, value, headers) of the message that hands ``row`` to the workers, or for a job with a target to the
    delivery function (the value then holds the target); ``result_token`` is what the worker (or the delivery
    function) sends back with its result (``domain.receipts``)."""
    value: ExecutionMessage = {
        "execution_id": row.execution_id,
        "job_id": job.job_id,
        "user_id": job.user_id,
        "scheduled_at": rfc3339(row.scheduled_at),
        "attempt": row.attempt,
        "trigger": row.trigger.value,
        "payload": job.spec.payload,
        "result_token": result_token,
    }
    if job.spec.target is not None:
        value["target"] = job.spec.target.to_dict()
    headers = {
        EXECUTION_ID_HEADER: row.execution_id,
        SCHEDULED_AT_HEADER: value["scheduled_at"],
        ATTEMPT_HEADER: str(row.attempt),
    }
    if job.trace_parent:
        headers[TRACEPARENT_HEADER] = child_traceparent(job.trace_parent, row.execution_id)
    return job.job_id, dict(value), headers


__all__ = ["CANCEL_HEADER", "cancel_message", "dead_letter_message", "destination", "execution_message"]


def cancel_message(
    job: Job, execution_id: str, scheduled_at: datetime, attempt: int, superseded_by: datetime
) -> tuple[str, dict[str, Any], dict[str, str]]:
    """(key, value, headers) of the message that asks the workers to cancel execution ``execution_id`` (the
    overlap policy ``cancel_other``: the fire at ``superseded_by`` replaces it). Keyed by the job like its
    executions, so it reaches the partition, hence the worker, that has the execution."""
    value: CancelMessage = {
        "cancel": True,
        "execution_id": execution_id,
        "job_id": job.job_id,
        "user_id": job.user_id,
        "scheduled_at": rfc3339(scheduled_at),
        "attempt": attempt,
        "reason": f"overlap policy cancel_other: the fire at {rfc3339(superseded_by)} replaces it",
    }
    return job.job_id, dict(value), {CANCEL_HEADER: execution_id, EXECUTION_ID_HEADER: execution_id}


def dead_letter_message(job: Job, record: ExecutionRecord) -> tuple[str, dict[str, Any], dict[str, str]]:
    """(key, value, headers) of the dead letter of an execution that ended FAILED (``record``, its ``error`` the
    reason): sent to the deployment's dead-letter topic with the job's payload, keyed by the job."""
    value: dict[str, Any] = {
        "execution_id": record.execution_id, "job_id": job.job_id, "user_id": job.user_id,
        "scheduled_at": rfc3339(record.scheduled_at), "attempt": record.attempt, "payload": job.spec.payload,
        "error": record.error,
    }
    headers = {"execution_id": record.execution_id, "scheduled_at": value["scheduled_at"],
               "attempt": str(record.attempt)}
    return job.job_id, value, headers
