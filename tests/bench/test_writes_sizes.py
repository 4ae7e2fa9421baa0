"""The sizes the writes section measures (bench/writes.py), without servers: a result message as the worker
sends it, and a job row as the store writes it, sized by Keyspaces' rules."""

from __future__ import annotations

import json
import re
from collections import namedtuple
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.raw import Example
from bench.rowsize import CLIENT_TIMESTAMPS_BYTES, TTL_BYTES, row_bytes
from bench.seed import PAD
from bench.writes import _report_bytes, keyspaces_tables, result_message_bytes, sizes, stored_bytes
from jobrunner.adapters.stores import codec
from jobrunner.adapters.stores.cassandra import INSERT_JOB
from jobrunner.domain.jobs import Job
from jobrunner.domain.schedules import At
from jobrunner.domain.spec import JobSpec
from jobrunner_client.worker import Worker


class _Producer:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send(self, topic: str, **message: Any) -> None:
        self.sent.append(message)


def test_a_result_message_is_counted_as_the_worker_sends_it() -> None:
    # Given a job message as the scan publishes it, answered by the real worker (which sends no headers)
    _, value, headers = Example(("tenant-a", "job-1"), 0, "jobs", recurring=True).message
    producer = _Producer()
    worker = Worker(consumer=object(), producer=producer)
    worker.handler()(lambda execution: None)
    worker._process(value, dict(headers))
    [sent] = producer.sent
    # When the benchmark answers the same message, then its report is the worker's, byte for byte
    decoded = json.loads(value)
    report = _report_bytes(decoded, dict(headers), fail=False)
    assert report == sent["value"] and sent.get("headers") is None
    # And the message's bytes are its key (the job id) and its value
    assert result_message_bytes(decoded, report) == len(sent["key"]) + len(sent["value"])


def test_a_one_time_job_row_counts_its_written_nulls_time_to_live_and_timestamps() -> None:
    # Given a one-time job row as the store writes it (every column of INSERT_JOB, nulls included), read back
    now = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
    job = Job(user_id="tenant-a", job_id="0b0e4bd6-6a43-4f4c-9f05-1c1d7f0b9d9e", created_at=now, updated_at=now,
              spec=JobSpec(At(now + timedelta(hours=1)), {"bench": True, "n": 1, "pad": PAD}, topic="jobs"),
              next_run_at=now + timedelta(hours=1), created_by="tenant-a")
    table = keyspaces_tables()["job_table_v2"]
    written = re.findall(r"\w+", INSERT_JOB.split("(", 1)[1].split(")", 1)[0])
    values = dict(zip(written, codec.job_values(job), strict=True))
    row = namedtuple("Row", [c.name for c in table.columns])(**{c.name: values.get(c.name) for c in table.columns})
    # When it is sized as Keyspaces stores it, then its table has time to live on (one-time rows expire) and
    # client-side timestamps: 8 bytes a row, 8 a cell (the key's and the written nulls too), and the timestamps
    cells = len([c for c in table.columns if c.name in written])
    plain = row_bytes(table, row._asdict(), written=written)
    assert table.rows_expire
    assert stored_bytes(table, row, written) == plain + TTL_BYTES * (1 + cells) + CLIENT_TIMESTAMPS_BYTES
    # And a written null counts a byte and its column id, where an unset one counts nothing
    nulls = sum(1 for c in table.regular if c.name in written and values[c.name] is None)
    assert nulls and plain == row_bytes(table, row._asdict()) + 2 * nulls


def test_sizes_are_a_median_and_a_range() -> None:
    assert sizes([3, 1, 2, 10]) == {"median": 2.5, "min": 1, "max": 10, "count": 4}
    assert sizes([])["count"] == 0
