"""A result is accepted only from a holder of its execution's message, on the real local stack."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from kafka import KafkaProducer

from tests.support.kafka_watch import TopicWatch
from tests.support.stack_api import api, eventually

if TYPE_CHECKING:
    from collections.abc import Iterator

    from devstack.stack import LocalStack

pytestmark = pytest.mark.e2e


@pytest.fixture
def jobs_topic(local_stack: LocalStack) -> Iterator[TopicWatch]:
    watch = TopicWatch(local_stack.settings.kafka.bootstrap, "jobs")
    yield watch
    watch.close()


def submit(stack: LocalStack, payload: dict[str, Any]) -> str:
    due = (datetime.now(UTC) + timedelta(seconds=3)).isoformat()
    response = api(stack, "POST", "/jobs", {"schedule": {"at": due}, "payload": payload})
    assert response.status_code == 201, response.text
    job_id: str = response.json()["job_id"]
    return job_id


def test_forged_results_sent_straight_to_job_results_are_refused_and_the_workers_own_applies(
    local_stack: LocalStack, jobs_topic: TopicWatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an execution in flight (the example worker works on it for 5 s) and another job's message
    slow, other = submit(local_stack, {"type": "sleep", "seconds": 5}), submit(local_stack, {"n": 1})
    received = jobs_topic.wait_for(lambda r: {slow, other} <= {m.key for m in r}, timeout_s=90)
    message = next(m.value for m in received if m.key == slow)
    others = next(m.value for m in received if m.key == other)
    refused_before = local_stack.container.results.counters.outcomes["refused_token"]
    results = local_stack.container.results
    outcomes: list[tuple[str, str]] = []  # (job_id, outcome) of every result applied from here on

    def apply_many(reports: Any, _apply_many: Any = results.apply_many) -> list[str]:
        applied: list[str] = _apply_many(reports)
        outcomes.extend((report.job_id, outcome) for report, outcome in zip(reports, applied, strict=True))
        return applied

    monkeypatch.setattr(results, "apply_many", apply_many)  # the results function's path (apply is one of it)
    # When results for it are produced to job-results from its public fields, as FAILED: with no token,
    # a made-up one, and the other execution's own (a token of the sender's own job)
    public = {k: message[k] for k in ("execution_id", "job_id", "scheduled_at", "attempt")}
    producer = KafkaProducer(bootstrap_servers=local_stack.settings.kafka.bootstrap.split(","))
    for token in (None, "x" * 43, others["result_token"]):
        forged = {**public, "status": "FAILED", "error": "forged", **({"result_token": token} if token else {})}
        producer.send(local_stack.settings.results_topic, key=slow.encode(), value=json.dumps(forged).encode())
    producer.flush()
    producer.close()
    # Then none of them counts (a FAILED one would have ended the execution: no retries, dead-lettered), and
    # the worker's own result, behind them in the same partition, is the one applied
    history = eventually(lambda: api(local_stack, "GET", f"/jobs/{slow}/executions").json()["items"],
                         lambda h: bool(h) and h[0]["status"] in ("SUCCESS", "FAILED"), timeout_s=90)
    assert [(e["attempt"], e["status"], e.get("error")) for e in history] == [(1, "SUCCESS", None)]
    # and each of the three was refused and counted (the count is the function's: it may also hold unsigned
    # results left on the topic by an earlier run of the stack)
    assert [outcome for job_id, outcome in outcomes if job_id == slow] == ["refused_token"] * 3 + ["succeeded"]
    assert results.counters.outcomes["refused_token"] - refused_before >= 3
