"""The walk of every tenant's jobs (``JobStore.walk_jobs``), on memory and on real Cassandra: pages in the store's own
order (token order in Cassandra), every job once, resumable from a cursor by another instance."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import TYPE_CHECKING

from jobrunner.adapters.stores.codec import job_shard
from jobrunner.domain.jobs import ExecutionRecord, ExecutionStatus, Lane, Trigger
from tests.contract.test_job_store import BUCKET, make_job, make_row, unique_segment

if TYPE_CHECKING:
    from collections.abc import Callable

    from jobrunner.domain.jobs import Job
    from jobrunner.ports import Stores


def _ids_in_one_shard(count: int, shard: int = 3) -> list[str]:
    """Job ids that all fall in one ``job_table_v2`` partition of their tenant (a partition larger than a page)."""
    ids: list[str] = []
    while len(ids) < count:
        candidate = str(uuid.uuid4())
        if job_shard(candidate) == shard:
            ids.append(candidate)
    return ids


def _population(store: Stores) -> list[Job]:
    """Three tenants: one with many jobs in a single partition, two with jobs spread over their shards."""
    crowded = f"walk-{uuid.uuid4().hex[:6]}"
    jobs = [make_job(crowded, job_id=job_id) for job_id in _ids_in_one_shard(7)]
    jobs += [make_job(f"walk-{uuid.uuid4().hex[:6]}") for _ in range(3) for _ in range(3)]
    store.create_jobs([(job, None) for job in jobs])
    return jobs


def _walk(store: Stores, limit: int, after: str | None = None) -> tuple[list[list[Job]], str | None]:
    """Every page from ``after`` to the end (at most 10,000 pages)."""
    pages: list[list[Job]] = []
    for _ in range(10_000):
        page, after = store.walk_jobs(after, limit)
        pages.append(page)
        if after is None:
            return pages, None
    raise AssertionError("the walk did not end")


def test_a_walk_returns_every_job_once_in_pages_of_at_most_its_limit(job_store: Stores) -> None:
    # Given jobs of three tenants, one of them with more jobs in one partition than a page holds
    mine = _population(job_store)

    # When the whole table is walked two jobs at a time
    pages, _ = _walk(job_store, limit=2)

    # Then every page holds at most two jobs, and every job comes back exactly once (the table may hold
    # other tests' jobs too: none of them twice either)
    assert all(len(page) <= 2 for page in pages)
    walked = [(job.user_id, job.job_id) for page in pages for job in page]
    assert len(walked) == len(set(walked))
    assert {(job.user_id, job.job_id) for job in mine} <= set(walked)
    # And a job comes back whole, as get_job reads it
    first = mine[0]
    assert next(job for page in pages for job in page if job.job_id == first.job_id) == job_store.get_job(
        first.user_id, first.job_id)


def test_a_walk_resumes_from_its_cursor_in_another_instance(job_store_instances: Callable[[], Stores]) -> None:
    # Given jobs, and a walk that stopped after its first page (a Lambda invocation that ran out of time)
    mine = _population(job_store_instances())
    first, cursor = job_store_instances().walk_jobs(None, 3)
    assert cursor is not None

    # When another instance goes on from the cursor
    rest, _ = _walk(job_store_instances(), limit=3, after=cursor)

    # Then the two together return every job once
    walked = [job.job_id for job in first] + [job.job_id for page in rest for job in page]
    assert len(walked) == len(set(walked))
    assert {job.job_id for job in mine} <= set(walked)


def test_jobs_written_during_a_walk_leave_the_others_returned_once(job_store: Stores) -> None:
    # Given jobs, and a walk one page in
    mine = _population(job_store)
    first, cursor = job_store.walk_jobs(None, 2)

    # When more jobs are written (some in the crowded partition) before the walk goes on
    later = [make_job(mine[0].user_id, job_id=job_id) for job_id in _ids_in_one_shard(3)]
    job_store.create_jobs([(job, None) for job in later])
    rest, _ = _walk(job_store, limit=2, after=cursor)

    # Then the jobs there from the start are each returned once; the new ones at most once
    walked = [job.job_id for job in first] + [job.job_id for page in rest for job in page]
    assert len(walked) == len(set(walked))
    assert {job.job_id for job in mine} <= set(walked)


def test_a_walk_of_an_empty_page_size_one_ends(job_store: Stores) -> None:
    # Given a few jobs, When walked one job a page, Then the walk still ends, each job once
    mine = _population(job_store)
    pages, cursor = _walk(job_store, limit=1)

    assert cursor is None
    walked = [job.job_id for page in pages for job in page]
    assert len(walked) == len(set(walked))
    assert {job.job_id for job in mine} <= set(walked)


def test_the_reconcilers_stale_reads_return_what_the_consistent_ones_do_on_a_quiet_store(job_store: Stores) -> None:
    # The reconciler reads the index and the history at the lowest consistency (half the price on Keyspaces); on a
    # store nobody is writing to, they return the very same rows
    job = make_job()
    segment = unique_segment()
    rows = [make_row(job, BUCKET + timedelta(seconds=s), segment=segment) for s in (1, 2, 3, 4)]
    job_store.write_scheduled(rows)
    job_store.write_started([ExecutionRecord(
        job.job_id, row.scheduled_at, 1, row.execution_id, job.user_id, ExecutionStatus.RUNNING, Trigger.SCHEDULE,
        row.due_at, published_at=row.due_at, job_version=1) for row in rows[:2]])
    fresh = list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED))
    assert list(job_store.lane_rows(BUCKET, segment, Lane.PLANNED, stale_ok=True)) == fresh == rows
    records = job_store.latest_records([job.job_id], 10)
    assert len(records[job.job_id]) == 2
    assert job_store.latest_records([job.job_id], 10, stale_ok=True) == records
