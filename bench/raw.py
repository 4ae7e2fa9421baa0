"""The ceilings: the raw operations an execution needs, with the same driver, statements, consistency,
value sizes and producer settings as the adapters, but without any scheduler logic.

An execution costs 1 read (its job) + 1 row write before the publish (``start``: the history row) +
1 produce + the ``complete`` writes (the next row of a recurring job, then the delete of the done row),
each a single-row statement. ``combined`` runs exactly those per execution, in groups of the scan's
size and with the store's concurrency, so the ratio drain / combined is the share of the hardware the
scheduler's own logic leaves on the table. ``batches`` is a raw logged batch of two rows of two tables
(the shape a submit writes).
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from cassandra import ConsistencyLevel
from cassandra.query import BatchStatement, BatchType

from bench.cql import run_all
from bench.seed import make_job
from jobrunner.adapters.publishers.kafka import encode, producer_config
from jobrunner.adapters.stores import codec
from jobrunner.adapters.stores.cassandra import (
    DELETE_SCHEDULED,
    INSERT_JOB,
    INSERT_RECORD,
    INSERT_RECORD_STARTED,
    INSERT_SCHEDULED,
    SELECT_JOB,
    unset_nulls,
)
from jobrunner.domain.jobs import ExecutionRecord, ExecutionStatus, Lane, Trigger
from jobrunner.domain.messages import execution_message
from jobrunner.domain.placement import plan_execution
from jobrunner.domain.receipts import result_token
from jobrunner.domain.time import minute_bucket

if TYPE_CHECKING:
    from jobrunner.adapters.publishers.kafka import KafkaSettings

#: The store's defaults: CassandraJobStore(concurrency=64) and ScanRules.group_size.
CONCURRENCY = 64
GROUP = 500


class Statements:
    def __init__(self, session: Any) -> None:
        def prepare(cql: str) -> Any:
            statement = session.prepare(cql)
            statement.consistency_level = ConsistencyLevel.LOCAL_QUORUM
            return statement

        self.session = session
        self.select_job = prepare(SELECT_JOB)
        self.insert_record = prepare(INSERT_RECORD)
        self.insert_started = prepare(INSERT_RECORD_STARTED)
        self.insert_row = prepare(INSERT_SCHEDULED)
        self.delete_row = prepare(DELETE_SCHEDULED)
        self.insert_job = prepare(INSERT_JOB)


class Example:
    """Values of the same shape and size as the scan writes, for one execution of job ``key``."""

    def __init__(self, key: tuple[str, str], index: int, topic: str, recurring: bool) -> None:
        user_id, job_id = key
        self.topic = topic
        now = datetime.now(UTC)
        bucket = minute_bucket(now) + timedelta(days=30)
        job = make_job(index, bucket, topic, True, user_id, now).with_changes(job_id=job_id)
        self.row = plan_execution(job, bucket, now, 16, trigger=Trigger.SCHEDULE)
        self.following = plan_execution(job, bucket + timedelta(hours=1), now, 16, trigger=Trigger.SCHEDULE)
        self.recurring = recurring
        self.record = ExecutionRecord(
            job_id=job_id, scheduled_at=self.row.scheduled_at, attempt=1, execution_id=self.row.execution_id,
            user_id=user_id, status=ExecutionStatus.RUNNING, trigger=Trigger.SCHEDULE, due_at=self.row.due_at,
            published_at=now, job_version=self.row.job_version,
            next_fire_at=self.following.due_at if recurring else None,
        )
        self.job = job
        # a token of the same size as the scan's (the raw ceiling sends the same bytes)
        token = result_token(b"bench", tenant=self.row.user_id, execution_id=self.row.execution_id,
                             attempt=self.row.attempt)
        message_key, value, headers = execution_message(job, self.row, token)
        self.message = (message_key.encode(), encode(value), [(k, v.encode()) for k, v in headers.items()])


def examples(keys: list[tuple[str, str]], topic: str) -> list[Example]:
    return [Example(key, i, topic, recurring=i % 2 == 0) for i, key in enumerate(keys)]


def message_bytes(example: Example) -> int:
    key, value, headers = example.message
    return len(key) + len(value) + sum(len(k) + len(v) for k, v in headers)


def _batch(batch_type: BatchType = BatchType.LOGGED) -> BatchStatement:
    return BatchStatement(batch_type=batch_type, consistency_level=ConsistencyLevel.LOCAL_QUORUM)


def start_statements(s: Statements, e: Example) -> list[tuple[Any, Any]]:
    """The scan's ``start`` of one execution: its history row, as the store writes it (nulls unset)."""
    return [(s.insert_started, unset_nulls(codec.started_record_values(e.record)))]


def complete_statements(s: Statements, e: Example) -> tuple[list[tuple[Any, Any]], list[tuple[Any, Any]]]:
    """The scan's ``complete`` of one execution, in its two steps: the next row, then the delete of the
    done row, which only a LATE row gets (a PLANNED one expires)."""
    following = [(s.insert_row, codec.scheduled_values(e.following))] if e.recurring else []
    done = [(s.delete_row, codec.scheduled_key(e.row))] if e.row.lane is Lane.LATE else []
    return following, done


def pair_batch(s: Statements, e: Example) -> BatchStatement:
    """A logged batch of two rows of two tables (the raw ``batches`` ceiling)."""
    batch = _batch()
    batch.add(s.insert_record, codec.record_values(e.record))
    batch.add(s.insert_row, codec.scheduled_values(e.following))
    return batch


def create_batch(s: Statements, e: Example) -> BatchStatement:
    """The submit's one write: the job and its first run."""
    batch = _batch()
    job = e.job.with_changes(job_id=str(uuid.uuid4()))
    batch.add(s.insert_job, codec.job_values(job))
    batch.add(s.insert_row, codec.scheduled_values(e.row))
    return batch


def _run(session: Any, statements: list[tuple[Any, Any]], concurrency: int = CONCURRENCY) -> int:
    return run_all(session, statements, concurrency)


def writes(s: Statements, exs: list[Example]) -> list[tuple[Any, Any]]:
    """Single-row INSERTs of task_history_v2-sized rows (fresh job ids: new rows, not overwrites)."""
    return [(s.insert_record, codec.record_values(replace(e.record, job_id=str(uuid.uuid4())))) for e in exs]


def reads(s: Statements, exs: list[Example]) -> list[tuple[Any, Any]]:
    return [(s.select_job, codec.job_key(e.job.user_id, e.job.job_id)) for e in exs]


def batches(s: Statements, exs: list[Example], shape: str) -> list[tuple[Any, Any]]:
    if shape == "create":
        return [(create_batch(s, e), None) for e in exs]
    return [(pair_batch(s, e), None) for e in exs]


def timed_concurrent(session: Any, statements: list[tuple[Any, Any]], concurrency: int,
                     start_at: float) -> dict[str, float]:
    _wait(start_at)
    started = time.monotonic()
    retried = _run(session, statements, concurrency)
    return {"ops": len(statements), "seconds": time.monotonic() - started, "started": started, "retried": retried}


def producer(settings: KafkaSettings, topic: str) -> Any:
    from kafka import KafkaProducer

    p = KafkaProducer(**producer_config(settings))
    p.partitions_for(topic)  # connect and fetch metadata before the clock starts
    return p


def produce(p: Any, topic: str, exs: list[Example], count: int, start_at: float) -> dict[str, float]:
    """``count`` sends of messages of the real size, then one flush (the raw Kafka ceiling)."""
    _wait(start_at)
    started = time.monotonic()
    for i in range(count):
        key, value, headers = exs[i % len(exs)].message
        p.send(topic, key=key, value=value, headers=headers)
    p.flush(timeout=120)
    return {"ops": count, "seconds": time.monotonic() - started, "started": started}


def combined(session: Any, s: Statements, p: Any, topic: str, exs: list[Example], start_at: float,
             group: int = GROUP) -> dict[str, float]:
    """Per execution: read its job, start, produce, complete; in the scan's group structure."""
    _wait(start_at)
    started = time.monotonic()
    for first in range(0, len(exs), group):
        chunk = exs[first:first + group]
        _run(session, reads(s, chunk))
        _run(session, [st for e in chunk for st in start_statements(s, e)])
        futures = [p.send(topic, key=e.message[0], value=e.message[1], headers=e.message[2]) for e in chunk]
        p.flush(timeout=120)
        for future in futures:
            future.get(timeout=0)
        steps = [complete_statements(s, e) for e in chunk]
        _run(session, [st for following, _ in steps for st in following])
        _run(session, [st for _, delete in steps for st in delete])
    return {"ops": len(exs), "seconds": time.monotonic() - started, "started": started}


def combined_streams(session: Any, s: Statements, producers: list[Any], topic: str,
                     per_stream: list[list[Example]], start_at: float, group: int = GROUP) -> dict[str, float]:
    """``combined`` on one thread per stream (as the scans run one thread per segment)."""
    results: list[dict[str, float]] = [{} for _ in per_stream]

    def run(index: int) -> None:
        results[index] = combined(session, s, producers[index], topic, per_stream[index], start_at, group)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(per_stream))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ended = max(r["started"] + r["seconds"] for r in results)
    return {"ops": sum(r["ops"] for r in results), "seconds": ended - start_at, "started": start_at,
            "ended": ended}


def latency_floor(s: Statements, p: Any, topic: str, exs: list[Example]) -> dict[str, Any]:
    """One execution at a time: ms from the start until the Kafka ack (read + start + produce), and
    until the complete batch returned. The least lateness any scan of this design can have here."""
    to_ack: list[float] = []
    total: list[float] = []
    failed = 0
    for e in exs:
        started = time.perf_counter()
        try:
            s.session.execute(s.select_job, codec.job_key(e.job.user_id, e.job.job_id))
            for statement, values in start_statements(s, e):
                s.session.execute(statement, values)
            future = p.send(topic, key=e.message[0], value=e.message[1], headers=e.message[2])
            p.flush(timeout=30)  # as KafkaPublisher.publish does: no waiting for linger
            future.get(timeout=0)
            to_ack.append((time.perf_counter() - started) * 1000)
            for step in complete_statements(s, e):
                for statement, values in step:
                    s.session.execute(statement, values)
            total.append((time.perf_counter() - started) * 1000)
        except Exception:  # a timeout on the shared, loaded servers: counted, not fatal
            failed += 1
    return {"to_ack_ms": to_ack, "total_ms": total, "failed": failed}


def _wait(start_at: float) -> None:
    delay = start_at - time.monotonic()
    if delay > 0:
        time.sleep(delay)
