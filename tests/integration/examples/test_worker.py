"""The example worker (examples/worker.py), on the real local Kafka."""

from __future__ import annotations

import contextlib
import importlib.util
import io
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from jobrunner_client.worker import Execution

if TYPE_CHECKING:
    from types import ModuleType

    from jobrunner.config import Settings

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def example_worker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_worker_under_test", ROOT / "examples" / "worker.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_echo_prints_to_the_stream_it_was_built_with_not_one_swapped_in_later(settings: Settings) -> None:
    # Given an example worker built while the process prints to one stream
    built_with = io.StringIO()
    with contextlib.redirect_stdout(built_with):
        worker = example_worker().build(settings.kafka.bootstrap, group_id="example-under-test")
    execution = Execution(execution_id="e-1", job_id="j-1", user_id="alice", scheduled_at="2026-11-22T10:00:00.000Z",
                          attempt=1, trigger="SCHEDULE", payload={"n": 1})
    # When it handles an execution while another part of the process has swapped standard output (a CLI
    # test capturing its command's output, as the worker of a test session's stack runs in a thread)
    swapped_in = io.StringIO()
    with contextlib.redirect_stdout(swapped_in):
        worker._handlers[None](execution)
    # Then its line went to the stream it was built with, and nothing into the other one
    assert swapped_in.getvalue() == ""
    assert built_with.getvalue() == "[worker] 2026-11-22T10:00:00.000Z attempt 1: {'n': 1}\n"


def test_build_consumes_and_reports_on_the_topics_it_is_given(settings: Settings) -> None:
    # Given an example worker built for topics other than the defaults
    worker = example_worker().build(settings.kafka.bootstrap, group_id="example-under-test",
                                    topic="example-test-executions", results_topic="example-test-results")
    try:
        # Then it listens to that topic alone and reports on the results topic it was given
        assert worker._consumer.subscription() == {"example-test-executions"}
        assert worker._results_topic == "example-test-results"
    finally:
        worker._consumer.close()
        worker._producer.close()
