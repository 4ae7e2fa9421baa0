"""The messages of an execution: what a worker, the delivery function or a consumer of the dead letters reads."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import NotRequired, get_origin, get_type_hints

from jobrunner.domain.jobs import ExecutionStatus, Job, Trigger
from jobrunner.domain.messages import dead_letter_message, destination, execution_message
from jobrunner.domain.placement import plan_execution
from jobrunner.domain.publication import started_record
from jobrunner.domain.schedules import Every
from jobrunner.domain.spec import JobSpec
from jobrunner.domain.targets import SqsTarget, target_from_dict
from jobrunner_client.protocol import ExecutionMessage

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def test_a_dead_letter_carries_the_payload_and_the_reason_keyed_by_the_job() -> None:
    job = Job(user_id="alice", job_id="job-1",
              spec=JobSpec(schedule=Every(timedelta(minutes=1), start=T0), payload={"n": 1}, topic="jobs"),
              created_at=T0, updated_at=T0)
    row = plan_execution(job, T0 + timedelta(minutes=1), T0, 16, trigger=Trigger.SCHEDULE)
    record = replace(started_record(row, job, T0), status=ExecutionStatus.FAILED, error="refused 5 times")
    key, value, headers = dead_letter_message(job, record)
    assert key == "job-1"
    assert (value["payload"], value["error"], value["execution_id"]) == ({"n": 1}, "refused 5 times", row.execution_id)
    assert headers == {"execution_id": row.execution_id, "scheduled_at": "2026-11-22T10:01:00.000Z", "attempt": "1"}


SQS = SqsTarget("https://sqs.eu-west-1.amazonaws.com/123456789012/work.fifo", "tenant-a")


def job_with(target: SqsTarget | None) -> Job:
    spec = JobSpec(schedule=Every(timedelta(minutes=1), start=T0), payload={"n": 1},
                   topic=None if target is not None else "jobs", target=target)
    return Job(user_id="alice", job_id="job-1", spec=spec, created_at=T0, updated_at=T0)


def test_the_message_of_a_job_with_a_target_holds_it_and_goes_to_the_delivery_topic() -> None:
    # Given a job delivered to an SQS queue, and one of a topic's workers
    job, worked = job_with(SQS), job_with(None)
    row = plan_execution(job, T0 + timedelta(minutes=1), T0, 16, trigger=Trigger.SCHEDULE)
    # When their execution messages are built
    key, value, headers = execution_message(job, row, "token")
    _, plain, plain_headers = execution_message(worked, row, "token")
    # Then the first holds the target's shape beside what every execution message holds, the same headers; and
    # it goes to the delivery topic, the other to its own
    assert value == {**plain, "target": {"sqs": {"queue_url": SQS.queue_url, "message_group_id": "tenant-a"}}}
    assert (key, headers) == ("job-1", plain_headers)
    assert (destination(job, "job-deliveries"), destination(worked, "job-deliveries")) == ("job-deliveries", "jobs")


def declared() -> tuple[set[str], set[str]]:
    """(required, optional) fields of ``ExecutionMessage`` (read from its hints: the protocol's annotations are
    strings, which ``TypedDict`` does not sort by themselves)."""
    hints = get_type_hints(ExecutionMessage, include_extras=True)
    optional = {name for name, hint in hints.items() if get_origin(hint) is NotRequired}
    return set(hints) - optional, optional


def test_an_execution_message_holds_only_the_fields_the_protocol_declares() -> None:
    # The contract with workers and the delivery function: every required field, no field it does not declare
    job = job_with(SQS)
    row = plan_execution(job, T0 + timedelta(minutes=1), T0, 16, trigger=Trigger.RETRY, attempt=2)
    _, value, _ = execution_message(job, row, "token")
    required, optional = declared()
    assert "target" in optional
    assert required <= set(value) <= required | optional
    assert target_from_dict(value["target"]) == SQS  # what the delivery function reads back
    assert json.loads(json.dumps(value)) == value
