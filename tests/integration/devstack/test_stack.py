"""The local stack (devstack/stack.py) on the real local Kafka: what it wires, without starting it."""

from __future__ import annotations

import dataclasses
import io
from typing import TYPE_CHECKING

import pytest

from devstack.stack import LocalStack
from jobrunner_client.worker import Execution

if TYPE_CHECKING:
    from jobrunner.config import Settings

pytestmark = pytest.mark.integration


def test_the_example_worker_runs_on_the_stacks_own_topics_and_stream(settings: Settings) -> None:
    # Given a stack whose executions and results go to topics of its own (not `jobs` and `job-results`)
    own = dataclasses.replace(settings, topic="stack-test-executions", results_topic="stack-test-results")
    out = io.StringIO()
    stack = LocalStack(own, port=0, worker_out=out)

    # When it builds its example worker
    worker = stack.build_example_worker()
    try:
        # Then the worker consumes the stack's topic, reports on the stack's results topic, and prints to
        # the stream the stack was given
        assert worker._consumer.subscription() == {"stack-test-executions"}
        assert worker._results_topic == "stack-test-results"
        worker._handlers[None](Execution(execution_id="e-1", job_id="j-1", user_id="alice",
                                         scheduled_at="2026-11-22T10:00:00.000Z", attempt=1, trigger="SCHEDULE",
                                         payload={"n": 1}))
        assert out.getvalue() == "[worker] 2026-11-22T10:00:00.000Z attempt 1: {'n': 1}\n"
    finally:
        worker._consumer.close()
        worker._producer.close()
