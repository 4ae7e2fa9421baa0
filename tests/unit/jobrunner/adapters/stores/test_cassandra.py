"""CassandraJobStore's writes and request packing, as the driver receives them (the contract tests run them on the
real server)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from cassandra import ConsistencyLevel, WriteTimeout, WriteType

from jobrunner.adapters.stores.cassandra import KEYSPACES_MAX_BATCH, KEYSPACES_MAX_IN, CassandraJobStore, packed
from jobrunner.adapters.stores.codec import JOB_SHARDS, job_shard
from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import Job, Lane, ScheduledExecution, Trigger, execution_id_for
from jobrunner.domain.schedules import At
from jobrunner.domain.segments import segment_of
from jobrunner.domain.spec import JobSpec

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


class RecordingSession:
    """Prepares by returning the CQL itself, and records what is executed; fails on ``fail_on`` if given."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.executed: list[Any] = []
        self._fail_on = fail_on

    def prepare(self, cql: str) -> Any:
        return SimpleNamespace(query_string=cql)

    def execute(self, statement: Any, parameters: Any = None) -> Any:
        cql = getattr(statement, "query_string", None)
        if self._fail_on is not None and cql is not None and cql.startswith(self._fail_on):
            raise WriteTimeout("timed out", consistency=ConsistencyLevel.LOCAL_QUORUM, required_responses=2,
                               received_responses=1, write_type=WriteType.SIMPLE)
        self.executed.append(cql if cql is not None else statement)
        return SimpleNamespace(one=lambda: None)


def job_and_first_run() -> tuple[Job, ScheduledExecution]:
    due = NOW + timedelta(minutes=3)
    job = Job(user_id="tenant", job_id=str(uuid.uuid4()), spec=JobSpec(schedule=At(at=due), payload={}, topic="jobs"),
              created_at=NOW, updated_at=NOW, next_run_at=due)
    first = ScheduledExecution(
        bucket=due.replace(second=0), segment=1, lane=Lane.PLANNED, due_at=due, job_id=job.job_id,
        execution_id=execution_id_for(job.job_id, due, 1, Trigger.SCHEDULE), user_id="tenant", scheduled_at=due,
        attempt=1, job_version=job.schedule_version, trigger=Trigger.SCHEDULE)
    return job, first


def test_a_job_is_created_by_its_first_run_then_itself_without_a_logged_batch() -> None:
    # A logged batch waits for its batch log on two other nodes; for the seconds a dead node is still thought
    # alive (10 to 20 s), every batch then timed out, and so did every POST /jobs (the cluster fault suite).
    session = RecordingSession()
    job, first = job_and_first_run()

    CassandraJobStore(session).create_job(job, first)  # type: ignore[arg-type]

    # (a one-time job's row as an update that expires: ``UPSERT_JOB_EXPIRING``)
    assert [cql.split(" (")[0].split(" SET")[0] for cql in session.executed] == [
        "INSERT INTO task_schedule_v2", "UPDATE job_table_v2 USING TTL ?"]


def test_a_create_whose_job_write_fails_leaves_no_job_only_a_run_no_scan_publishes() -> None:
    # (a scan drops a row whose job does not exist once the change grace has passed: services/scan/publishing.py)
    session = RecordingSession(fail_on="UPDATE job_table_v2")
    job, first = job_and_first_run()

    with pytest.raises(Unavailable):
        CassandraJobStore(session).create_job(job, first)  # type: ignore[arg-type]

    assert [cql.split(" (")[0] for cql in session.executed] == ["INSERT INTO task_schedule_v2"]


def test_packed_keeps_each_partitions_items_together_and_in_order() -> None:
    items = [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", 2), ("a", 3)]
    chunks = packed(items, 3, partition=lambda item: item[0])
    assert chunks == [[("a", 1), ("a", 2), ("a", 3)], [("b", 1), ("b", 2), ("c", 1)]]


def test_packed_splits_a_partition_larger_than_a_chunk_and_loses_nothing() -> None:
    items = [("a", n) for n in range(7)] + [("b", 0)]
    chunks = packed(items, 3, partition=lambda item: item[0])
    assert [len(chunk) for chunk in chunks] == [3, 3, 2]
    assert [item for chunk in chunks for item in chunk] == items


def test_packed_of_nothing_is_no_chunk() -> None:
    assert packed([], 10, partition=lambda item: item) == []


@pytest.mark.parametrize("option", [{"batch_rows": 0}, {"batch_rows": KEYSPACES_MAX_BATCH + 1},
                                    {"in_keys": 0}, {"in_keys": KEYSPACES_MAX_IN + 1}])
def test_batches_and_in_lists_stay_within_what_keyspaces_takes(option: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="must be 1 to"):
        CassandraJobStore(session=None, **option)  # type: ignore[arg-type]


def test_a_jobs_shard_is_a_fixed_function_of_its_id() -> None:
    # A row is read where it was written by any release: the hash (its segment among 16) must never change.
    assert [job_shard(job_id) for job_id in ("job-1", "job-2", "3f0c1a9e-8d7b-4c1e-9a55-0b9f3d2e7c11", "")] == [
        11, 6, 13, 4]
    assert {job_shard(str(uuid.uuid4())) for _ in range(2000)} == set(range(JOB_SHARDS))


@pytest.mark.parametrize("segments", [16, 32, 64])
def test_the_jobs_a_segments_scan_reads_are_in_one_shard_per_tenant(segments: int) -> None:
    # so that a scan reads a tenant's jobs of a page in one IN request, as when a tenant was one partition
    ids = [str(uuid.uuid4()) for _ in range(4000)]
    shards_of_segment: dict[int, set[int]] = {}
    for job_id in ids:
        shards_of_segment.setdefault(segment_of(job_id, segments), set()).add(job_shard(job_id))
    assert len(shards_of_segment) == segments
    assert all(len(shards) == 1 for shards in shards_of_segment.values())


class SettlingSession(RecordingSession):
    """Records the consistency level each bound statement is executed at."""

    def __init__(self) -> None:
        super().__init__()
        self.levels: list[Any] = []

    def prepare(self, cql: str) -> Any:
        return SimpleNamespace(query_string=cql, bind=lambda values: SimpleNamespace(
            query_string=cql, values=values, consistency_level=None))

    def execute(self, statement: Any, parameters: Any = None) -> Any:
        self.levels.append(getattr(statement, "consistency_level", None))
        return super().execute(statement, parameters)


@pytest.mark.parametrize(("serial_reads", "level"), [(True, ConsistencyLevel.LOCAL_SERIAL),
                                                     (False, ConsistencyLevel.LOCAL_QUORUM)])
def test_the_settling_read_is_a_paxos_read_on_cassandra_and_a_quorum_read_on_keyspaces(
    serial_reads: bool, level: int
) -> None:
    # Cassandra: LOCAL_SERIAL completes or supersedes a compare-and-set left in progress. Amazon Keyspaces rejects
    # the serial levels; its LOCAL_QUORUM read reflects every write that succeeded before it (its documentation).
    session = SettlingSession()
    assert CassandraJobStore(session, serial_reads=serial_reads).get_job_settled("t", "j") is None  # type: ignore[arg-type]
    assert session.levels == [level]


def test_the_wiring_builds_the_keyspaces_store_without_serial_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    from jobrunner import wiring
    from jobrunner.adapters.stores import session as sessions
    from jobrunner.config import Settings

    built: dict[str, Any] = {}
    monkeypatch.setattr(sessions, "connect", lambda settings, **options: RecordingSession())
    monkeypatch.setattr("jobrunner.adapters.stores.cassandra.CassandraJobStore.__init__",
                        lambda self, session, **options: built.update(options))
    for mode, serial in (("keyspaces", False), ("cassandra", True)):
        wiring.Container(Settings.of(cassandra_mode=mode)).store  # noqa: B018 - built on first use
        assert built["serial_reads"] is serial
