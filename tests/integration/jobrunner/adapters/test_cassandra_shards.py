"""A tenant's jobs spread over ``JOB_SHARDS`` partitions of ``job_table_v2``, on a real Cassandra: each row is
where its id's hash says, a tenant's partitions are many, and reads find every job."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobrunner.adapters.stores.cassandra import CassandraJobStore
from jobrunner.adapters.stores.codec import JOB_SHARDS, job_shard
from jobrunner.domain.jobs import Job
from jobrunner.domain.schedules import Every
from jobrunner.domain.spec import JobSpec

pytestmark = pytest.mark.integration

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def test_one_tenants_jobs_are_written_to_many_partitions_and_all_read_back(cassandra_session: Any) -> None:
    # Given 64 jobs of one tenant, created together
    tenant = f"sharded-{uuid.uuid4().hex[:8]}"
    jobs = [Job(user_id=tenant, job_id=str(uuid.uuid4()),
                spec=JobSpec(schedule=Every(timedelta(minutes=1), start=NOW), payload={"n": n}, topic="jobs"),
                created_at=NOW, updated_at=NOW) for n in range(64)]
    store = CassandraJobStore(cassandra_session)
    store.create_jobs([(job, None) for job in jobs])
    # Then each row is in the partition its id hashes to, and they cover most of the tenant's partitions
    placed: dict[int, set[str]] = {}
    for shard in range(JOB_SHARDS):
        rows = cassandra_session.execute("SELECT job_id FROM job_table_v2 WHERE user_id = %s AND shard = %s",
                                         (tenant, shard))
        placed[shard] = {row.job_id for row in rows}
    assert all(job_shard(job_id) == shard for shard, ids in placed.items() for job_id in ids)
    assert set().union(*placed.values()) == {job.job_id for job in jobs}
    assert sum(1 for ids in placed.values() if ids) >= 12  # 64 ids over 16: 12 or fewer has p < 1e-4
    # and one request's worth of reads finds each of them, one by one or all together
    assert store.get_jobs([(tenant, job.job_id) for job in jobs]) == {(tenant, job.job_id): job for job in jobs}
    assert all(store.get_job(tenant, job.job_id) == job for job in jobs[:5])
    # and a list returns them all in job id order, page by page
    listed: list[str] = []
    cursor: str | None = None
    while True:
        page, cursor = store.list_jobs(tenant, 10, cursor)
        listed += [job.job_id for job in page]
        if cursor is None:
            break
    assert listed == sorted(job.job_id for job in jobs)
