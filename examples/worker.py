"""An example worker: ``python examples/worker.py``. It reads KAFKA_BOOTSTRAP (default 127.0.0.1:9092),
KAFKA_SECURITY (plaintext, or msk-iam for the deployed stack: the KafkaBootstrapBrokers output, with the
stack's WorkerPolicy and AWS_DEFAULT_REGION), KAFKA_GROUP (default example-workers) and
JOBRUNNER_OTEL_EXPORTER (default none). See docs/deploy.md, "Running a worker against the stack".

Job types it understands (the payload's ``type``):
- ``echo`` (and any payload without a type): prints the execution and succeeds;
- ``flaky``: fails while ``attempt <= payload["fail_attempts"]``, then succeeds (shows retries);
- ``fail``: always fails (shows dead letters after the last retry);
- ``sleep``: works until ``payload["seconds"]`` (at most 30) after its fire, then succeeds (shows executions
  in flight and, with a shorter ``timeout_s``, timeouts); a cancel message for it (overlap policy
  ``cancel_other``) stops it at once, reported cancelled. Counting from the fire, not from when it is read,
  keeps a worker that reads a topic from its start (a new consumer group on a shared topic) from sleeping
  through every old execution again.
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import UTC, datetime, timedelta
from typing import TextIO

from jobrunner import telemetry
from jobrunner_client.worker import Execution, Worker


def build(
    bootstrap: str, group_id: str = "example-workers", security: str = "plaintext", out: TextIO | None = None,
    *, topic: str = "jobs", results_topic: str = "job-results",
) -> Worker:
    """The worker, consuming ``topic`` and reporting on ``results_topic``; ``echo`` prints to ``out``, by
    default the standard output as it is now. The stream is taken once, here: a worker running in a thread
    never writes into a stream that another part of the process swaps in later (a CLI test capturing its
    command's output, say)."""
    worker = Worker(bootstrap=bootstrap, topic=topic, results_topic=results_topic, group_id=group_id,
                    security=security, span=telemetry.span)
    stream = out if out is not None else sys.stdout

    @worker.handler(None)
    @worker.handler("echo")
    def echo(execution: Execution) -> None:
        print(f"[worker] {execution.scheduled_at} attempt {execution.attempt}: {execution.payload}", file=stream,
              flush=True)

    @worker.handler("flaky")
    def flaky(execution: Execution) -> None:
        if execution.attempt <= int(execution.payload.get("fail_attempts", 1)):
            raise RuntimeError(f"flaky failure on attempt {execution.attempt}")

    @worker.handler("fail")
    def fail(execution: Execution) -> None:
        raise RuntimeError("this job always fails")

    @worker.handler("sleep")
    def sleep(execution: Execution) -> None:
        seconds = min(float(execution.payload.get("seconds", 1)), 30.0)
        fire = datetime.fromisoformat(execution.scheduled_at.replace("Z", "+00:00"))
        left = (fire + timedelta(seconds=seconds) - datetime.now(UTC)).total_seconds()
        # waits on its cancel event: a cancel message (overlap policy cancel_other) ends it at once
        if left > 0 and execution.cancelled.wait(min(left, seconds)):
            execution.raise_if_cancelled()

    return worker


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    # Optional: this worker's spans, children of each message's traceparent (see jobrunner.telemetry).
    telemetry.configure(os.environ.get("JOBRUNNER_OTEL_EXPORTER", "none"), service_name="example-worker",
                        path=os.environ.get("JOBRUNNER_OTEL_FILE", ".local/logs/traces.jsonl"))
    build(os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"),
          group_id=os.environ.get("KAFKA_GROUP", "example-workers"),
          security=os.environ.get("KAFKA_SECURITY", "plaintext")).run()
