"""The store ports (``JobStore``, ``ScheduledRowStore``, ``HistoryStore``, ``IdempotencyStore``) on Apache
Cassandra or Amazon Keyspaces, through the DataStax driver.

Every statement here is Keyspaces-compatible (checked by ``tests/infra/test_keyspaces_compat.py``):
prepared DML only, LOCAL_QUORUM writes and reads, no TRUNCATE, no secondary index, no ALLOW FILTERING.

An execution writes no ``job_table`` row (its run fields are derived from history, ``domain.jobs.with_runs``),
and nothing uses a logged batch: a logged batch costs a batch-log write and delete on Cassandra, on Keyspaces
every row of one is written twice (prepare and commit), and on a cluster it stalls while a node that has just
died is still thought alive (its batch log goes to two other nodes and waits for both, 10 to 20 s until the
failure detector convicts the dead one: every ``POST /jobs`` timed out meanwhile in the cluster fault suite).
The steps that must not be half-done are ordered instead, so that what is written first makes the later
write safe to repeat:
- ``create_job`` writes the job's first run, then the job: a job is never without its first run, and a first
  run whose job write failed has no job, so no scan publishes it (it drops the row as stale); a retried
  create writes both again;
- ``settle_published`` writes the following rows (next fire, watchdog); the scan removes the done row, if it
  is a LATE one, only once those are known to be in time for their scans: a crash in between leaves the done
  row, whose replay writes them again. A done PLANNED row is not removed at all: it expires (``USING TTL``),
  and the scan keeps its progress past it;
- ``write_outcomes`` writes the retry row, then the record that ends the execution: a record that says FAILED
  always has its retry.

The per-execution writes and reads go in few requests, because on the scan's path the client's cost is per
request, not per row (a request costs the driver about ten times what a row in it costs):
- writes of many rows (``write_started``, ``write_scheduled``, ``delete_scheduled``) are packed into UNLOGGED
  batches of at most ``batch_rows`` statements, a partition's rows together (``packed``). An unlogged batch is
  no atomic step
  and costs nothing more than its rows (Keyspaces bills each row as a single write; Cassandra applies each
  partition's mutation on its own); each of these writes is idempotent, so a batch that fails in part is
  simply written again. ``KEYSPACES_MAX_BATCH`` bounds it;
- ``get_jobs`` reads a tenant's jobs with one ``job_id IN ?`` query per ``in_keys`` jobs of one of its
  shards (their rows share that partition; Keyspaces runs each value as a subquery, at most
  ``KEYSPACES_MAX_IN``).

A tenant's jobs are spread over ``codec.JOB_SHARDS`` partitions (``(user_id, shard)``, ``codec.job_shard``):
a job is read and written in one of them, so no partition carries all of one tenant's executions' reads,
and a list reads them all and merges them in job id order (``list_jobs``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cassandra import ConsistencyLevel

from jobrunner.adapters.stores import codec, history
from jobrunner.adapters.stores.cursors import decode_job_cursor, encode_job_cursor
from jobrunner.adapters.stores.driver import (
    DEFAULT_BATCH_ROWS,
    KEYSPACES_MAX_BATCH,
    KEYSPACES_MAX_IN,
    Statements,
    guarded,
    packed,
    unset_nulls,
    write_many,
)
from jobrunner.adapters.stores.expiring import UPDATE_JOB_EXPIRING, UPSERT_JOB_EXPIRING, RowExpiry
from jobrunner.adapters.stores.history import INSERT_RECORD, INSERT_RECORD_STARTED, CassandraHistory
from jobrunner.domain.jobs import Lane, LanePosition
from jobrunner.domain.limits import Limits
from jobrunner.domain.time import utc
from jobrunner.ports import (
    Completion,
    HistoryStore,
    IdempotencyClaim,
    IdempotencyStore,
    JobStore,
    Outcome,
    ScheduledRowStore,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from cassandra.cluster import Session

    from jobrunner.domain.jobs import ExecutionRecord, Job, ScheduledExecution
    from jobrunner.ports import RecordKey

#: Handed on from the modules they moved to, for the readers that import them from here.
__all__ = [
    "DEFAULT_BATCH_ROWS", "INSERT_RECORD", "INSERT_RECORD_STARTED", "KEYSPACES_MAX_BATCH", "KEYSPACES_MAX_IN",
    "STATEMENTS", "CassandraJobStore", "guarded", "packed", "unset_nulls", "write_many",
]

INSERT_JOB = (
    "INSERT INTO job_table_v2 (user_id, shard, job_id, schedule, payload, topic, state, version, schedule_version,"
    " schedule_version_set_at, retry, timeout_s, paused_at, trace_parent, created_at, updated_at, next_run_at,"
    " last_run_at, last_execution_id, last_status, jitter_s, tags, policies, created_by)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
SELECT_JOB = "SELECT * FROM job_table_v2 WHERE user_id = ? AND shard = ? AND job_id = ?"
#: Several jobs of one tenant's shard (one partition) in one request.
SELECT_JOBS_BY_ID = "SELECT * FROM job_table_v2 WHERE user_id = ? AND shard = ? AND job_id IN ?"
#: Every row expires some time after its scan may close (``domain.placement.row_ttl``): no delete per execution.
INSERT_SCHEDULED = (
    "INSERT INTO task_schedule_v2 (next_execution_time, segment, lane, due_at, job_id, execution_id, job_version,"
    " user_id, scheduled_at, attempt, trigger) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?"
)
#: A fire its overlap policy holds (``ScheduledExecution.held``): the one column other rows carry no cell for.
INSERT_SCHEDULED_HELD = (
    "INSERT INTO task_schedule_v2 (next_execution_time, segment, lane, due_at, job_id, execution_id, job_version,"
    " user_id, scheduled_at, attempt, trigger, held) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, true) USING TTL ?"
)
SELECT_SCHEDULED = (
    "SELECT * FROM task_schedule_v2 WHERE next_execution_time = ? AND segment = ? AND lane = ?"
)
#: Resuming a read after a position: the rows from its due instant on (those up to it are skipped).
SELECT_SCHEDULED_FROM = (
    "SELECT * FROM task_schedule_v2 WHERE next_execution_time = ? AND segment = ? AND lane = ? AND due_at >= ?"
)
#: A window of due time (the late lane's polls), with either bound or both.
SELECT_SCHEDULED_UNTIL = (
    "SELECT * FROM task_schedule_v2 WHERE next_execution_time = ? AND segment = ? AND lane = ? AND due_at < ?"
)
SELECT_SCHEDULED_WINDOW = (
    "SELECT * FROM task_schedule_v2 WHERE next_execution_time = ? AND segment = ? AND lane = ? AND due_at >= ?"
    " AND due_at < ?"
)
DELETE_SCHEDULED = (
    "DELETE FROM task_schedule_v2 WHERE next_execution_time = ? AND segment = ? AND lane = ? AND due_at = ?"
    " AND job_id = ? AND execution_id = ? AND job_version = ?"
)
UPDATE_JOB_USER_FIELDS = (
    "UPDATE job_table_v2 SET schedule = ?, payload = ?, topic = ?, state = ?, version = ?, schedule_version = ?,"
    " schedule_version_set_at = ?, retry = ?, timeout_s = ?, paused_at = ?, updated_at = ?, next_run_at = ?,"
    " jitter_s = ?, tags = ?, policies = ? WHERE user_id = ? AND shard = ? AND job_id = ? IF version = ?"
)
# A change that keeps the schedule and the state: the next run and the planned rows stay as they are.
UPDATE_JOB_SETTINGS = (
    "UPDATE job_table_v2 SET payload = ?, topic = ?, version = ?, schedule_version_set_at = ?, retry = ?,"
    " timeout_s = ?, updated_at = ?, jitter_s = ?, tags = ?, policies = ? WHERE user_id = ? AND shard = ?"
    " AND job_id = ? IF version = ?"
)
#: A job deleted after its last fire, written again whole to expire with its history (``JobStore.retire_job``).
INSERT_JOB_EXPIRING = INSERT_JOB + " USING TTL ?"
#: One shard of a tenant's jobs, in job id order (a list reads every shard and merges them).
SELECT_JOBS = "SELECT * FROM job_table_v2 WHERE user_id = ? AND shard = ? LIMIT ?"
SELECT_JOBS_AFTER = "SELECT * FROM job_table_v2 WHERE user_id = ? AND shard = ? AND job_id > ? LIMIT ?"
#: The walk of every tenant's jobs (``JobStore.walk_jobs``), a page at a time, in token order. No token value is
#: ever written down: the walk goes on from the partition of the last job it returned, by ``token(?, ?)`` of that
#: partition's key, so it holds under any partitioner (Murmur3, Random, Keyspaces' Default). A partition larger
#: than a page is finished by clustering key first.
WALK_JOBS = "SELECT * FROM job_table_v2 LIMIT ?"
WALK_JOBS_IN_PARTITION = "SELECT * FROM job_table_v2 WHERE user_id = ? AND shard = ? AND job_id > ? LIMIT ?"
WALK_JOBS_AFTER_PARTITION = "SELECT * FROM job_table_v2 WHERE token(user_id, shard) > token(?, ?) LIMIT ?"
CLAIM_IDEMPOTENCY_KEY = (
    "INSERT INTO job_idempotency (user_id, idempotency_key, job_id, fingerprint, created_at)"
    " VALUES (?, ?, ?, ?, ?) IF NOT EXISTS"
)
SELECT_IDEMPOTENCY_KEY = "SELECT * FROM job_idempotency WHERE user_id = ? AND idempotency_key = ?"

STATEMENTS = (
    INSERT_JOB, SELECT_JOB, SELECT_JOBS_BY_ID, INSERT_SCHEDULED, INSERT_SCHEDULED_HELD, SELECT_SCHEDULED,
    SELECT_SCHEDULED_FROM, SELECT_SCHEDULED_UNTIL, SELECT_SCHEDULED_WINDOW, DELETE_SCHEDULED, *history.STATEMENTS,
    UPDATE_JOB_USER_FIELDS, UPDATE_JOB_SETTINGS, SELECT_JOBS, SELECT_JOBS_AFTER, CLAIM_IDEMPOTENCY_KEY,
    SELECT_IDEMPOTENCY_KEY, INSERT_JOB_EXPIRING, UPSERT_JOB_EXPIRING, UPDATE_JOB_EXPIRING, WALK_JOBS,
    WALK_JOBS_IN_PARTITION, WALK_JOBS_AFTER_PARTITION,
)

#: The settling read's consistency on Cassandra (``JobStore.get_job_settled``): a Paxos read, which completes or
#: supersedes a lightweight transaction left in progress. Never on Amazon Keyspaces, which rejects the serial
#: levels: its store is built with ``serial_reads=False`` and reads at LOCAL_QUORUM.
SERIAL_READ = ConsistencyLevel.LOCAL_SERIAL


class CassandraJobStore(JobStore, ScheduledRowStore, HistoryStore, IdempotencyStore):
    """Takes a connected driver ``Session`` whose keyspace is set (see ``jobrunner.adapters.stores.session``).

    One adapter for the four store ports: they share the session, its prepared statements and the unlogged
    batching (``driver.Statements``), and the writes that span two tables (``create_job``, ``update_job``,
    ``settle_published``, ``write_outcomes``) call the rows' own writes in the order the module doc gives. The
    history table's statements are its own small adapter (``history.CassandraHistory``), which this one composes.

    Expiry (``one_time_rows_expire``, on by default): a one-time job's row expires by itself, each write of it
    whole with one time to live (``expiring``, whose module doc says how and why, races included)."""

    def __init__(self, session: Session, *, page_size: int = 1000, concurrency: int = 64,
                 history_ttl_s: Callable[[str], int] = lambda _tenant: Limits().history_ttl_s,
                 batch_rows: int = DEFAULT_BATCH_ROWS, in_keys: int = KEYSPACES_MAX_IN,
                 serial_reads: bool = True, one_time_rows_expire: bool = True,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        if not 1 <= batch_rows <= KEYSPACES_MAX_BATCH:
            raise ValueError(f"batch_rows must be 1 to {KEYSPACES_MAX_BATCH}")
        if not 1 <= in_keys <= KEYSPACES_MAX_IN:
            raise ValueError(f"in_keys must be 1 to {KEYSPACES_MAX_IN}")
        self._session = session
        self.session = session  # shared with the other tables' adapters (``adapters.stores.changes``)
        self._page_size = page_size
        self._in_keys = in_keys
        #: The consistency of ``get_job_settled``: a Paxos read on Cassandra; LOCAL_QUORUM where reads take no serial
        #: level (Amazon Keyspaces: ``serial_reads=False``).
        self._settling_read = SERIAL_READ if serial_reads else ConsistencyLevel.LOCAL_QUORUM
        self._statements = Statements(session, concurrency=concurrency, batch_rows=batch_rows)
        self._history = CassandraHistory(self._statements, history_ttl_s)
        self._expiry = RowExpiry(history_ttl_s, on=one_time_rows_expire, now=now)

    def _execute(self, cql: str, params: Sequence[Any]) -> Any:
        """The result of ``cql`` (a module constant) run once with ``params``."""
        stmt = self._statements.prepared(cql)
        return guarded(lambda: self._session.execute(stmt, params))

    def create_job(self, job: Job, first: ScheduledExecution | None) -> None:
        if first is not None:  # the first run, then the job (see the module doc)
            self._execute(INSERT_SCHEDULED, codec.scheduled_values(first))
        if self._expiry.applies(job):
            self._execute(UPSERT_JOB_EXPIRING, self._expiry.upsert_values(job))
        else:
            self._execute(INSERT_JOB, codec.job_values(job))

    def create_jobs(self, jobs: Sequence[tuple[Job, ScheduledExecution | None]]) -> None:
        # As ``create_job``, for all of them: every first run, then every job (see the module doc).
        self.write_scheduled([first for _, first in jobs if first is not None])
        expiring = [self._expiry.applies(job) for job, _ in jobs]
        self._statements.write_many(INSERT_JOB, [codec.job_values(job) for (job, _), e in zip(jobs, expiring,
                                                                                               strict=True) if not e],
                         partition=lambda v: v[:2])  # (user_id, shard)
        self._statements.write_many(UPSERT_JOB_EXPIRING, [self._expiry.upsert_values(job) for (job, _), e in
                                                          zip(jobs, expiring, strict=True) if e],
                                    partition=lambda v: v[-3:-1])  # (user_id, shard), after the columns

    def get_job(self, user_id: str, job_id: str) -> Job | None:
        row = self._execute(SELECT_JOB, codec.job_key(user_id, job_id)).one()
        return codec.job_from_row(row) if codec.is_job(row) else None

    def get_job_settled(self, user_id: str, job_id: str) -> Job | None:
        bound = self._statements.prepared(SELECT_JOB).bind(codec.job_key(user_id, job_id))
        bound.consistency_level = self._settling_read
        row = guarded(lambda: self._session.execute(bound).one())
        return codec.job_from_row(row) if codec.is_job(row) else None

    def get_jobs(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Job]:
        by_partition: dict[tuple[str, int], list[str]] = {}
        for user_id, job_id in keys:
            by_partition.setdefault((user_id, codec.job_shard(job_id)), []).append(job_id)
        requests: list[tuple[Any, Sequence[Any]]] = []
        for (user_id, shard), job_ids in by_partition.items():
            unique = list(dict.fromkeys(job_ids))
            for start in range(0, len(unique), self._in_keys):
                chunk = unique[start:start + self._in_keys]
                if len(chunk) == 1:
                    requests.append((self._statements.prepared(SELECT_JOB), (user_id, shard, chunk[0])))
                else:
                    requests.append((self._statements.prepared(SELECT_JOBS_BY_ID), (user_id, shard, chunk)))
        found: dict[tuple[str, str], Job] = {}
        for result in self._statements.run_concurrently(requests):
            for row in result:
                if codec.is_job(row):
                    found[(row.user_id, row.job_id)] = codec.job_from_row(row)
        return found

    def lane_rows(
        self, bucket: datetime, segment: int, lane: Lane, after: LanePosition | None = None, *,
        since: datetime | None = None, until: datetime | None = None, stale_ok: bool = False,
    ) -> Iterator[ScheduledExecution]:
        if after is not None and since is not None:
            raise ValueError("give after or since, not both")
        # One clustering column in each slice (Keyspaces-safe); the rest of ``after``'s key is compared here.
        lower = after.due_at if after is not None else since
        key: tuple[Any, ...] = (bucket, segment, lane.value)
        if lower is None and until is None:
            cql, params = SELECT_SCHEDULED, key
        elif until is None:
            cql, params = SELECT_SCHEDULED_FROM, (*key, lower)
        elif lower is None:
            cql, params = SELECT_SCHEDULED_UNTIL, (*key, until)
        else:
            cql, params = SELECT_SCHEDULED_WINDOW, (*key, lower, until)
        stmt = self._statements.prepared(cql)
        stmt.fetch_size = self._page_size
        if stale_ok:
            result = guarded(lambda: self._session.execute(self._statements.stale(cql, params, self._page_size)))
        else:
            result = guarded(lambda: self._session.execute(stmt, params))
        rows = iter(result)
        while True:  # the driver fetches the next page lazily inside next()
            row = guarded(lambda: next(rows, None))
            if row is None:
                return
            scheduled = codec.scheduled_from_row(row)
            if after is None or LanePosition.of(scheduled) > after:
                yield scheduled

    def settle_published(self, completions: Sequence[Completion]) -> None:
        # The following rows only: the scan removes a done LATE row once they are in time (see the module doc).
        self.write_scheduled([row for c in completions for row in (c.following, c.watchdog) if row is not None])

    def delete_scheduled(self, rows: Sequence[ScheduledExecution]) -> None:
        # (bucket, segment) is the partition
        self._statements.write_many(DELETE_SCHEDULED, [codec.scheduled_key(row) for row in rows],
                                    partition=lambda v: v[:2])

    def update_job(self, job: Job, rows: Sequence[ScheduledExecution], expected_version: int, *,
                   was_one_time: bool = False) -> bool:
        # Rows first: a job that names a next run always has its row. A conditional write cannot share a
        # batch with other partitions, so the compare-and-set on the job is a statement of its own.
        self.write_scheduled(rows)
        if self._expiry.applies(job, was_one_time):  # the whole row, one instant (class doc, "expiry")
            params = (self._expiry.ttl(job), *codec.job_row_fields(job), *codec.job_key(job.user_id, job.job_id),
                      expected_version)
            return bool(self._execute(UPDATE_JOB_EXPIRING, params).one().applied)
        if job.schedule_version == job.version:
            cql, fields = UPDATE_JOB_USER_FIELDS, codec.job_user_fields(job)
        else:
            cql, fields = UPDATE_JOB_SETTINGS, codec.job_settings(job)
        params = (*fields, *codec.job_key(job.user_id, job.job_id), expected_version)
        # Not applied: the rows stay (the winner may have planned the same ones; ``JobStore.update_job``).
        return bool(self._execute(cql, params).one().applied)

    def write_scheduled(self, rows: Sequence[ScheduledExecution]) -> None:
        # (bucket, segment) is the partition; a held row (rare) by its own statement, which writes its mark
        self._statements.write_many(INSERT_SCHEDULED, [codec.scheduled_values(row) for row in rows if not row.held],
                         partition=lambda v: v[:2])
        self._statements.write_many(INSERT_SCHEDULED_HELD, [codec.scheduled_values(row) for row in rows if row.held],
                         partition=lambda v: v[:2])

    def list_jobs(self, user_id: str, limit: int, cursor: str | None) -> tuple[list[Job], str | None]:
        # The first ``limit + 1`` jobs after the cursor of each shard, together, hold the first ``limit + 1`` of
        # the tenant's: merged in job id order, as one partition's listing was (the cursors did not change).
        after = decode_job_cursor(cursor) if cursor else None
        requests: list[tuple[Any, tuple[Any, ...]]]
        if after is None:
            requests = [(self._statements.prepared(SELECT_JOBS), (user_id, shard, limit + 1))
                        for shard in range(codec.JOB_SHARDS)]
        else:
            requests = [(self._statements.prepared(SELECT_JOBS_AFTER), (user_id, shard, after, limit + 1))
                        for shard in range(codec.JOB_SHARDS)]
        results = self._statements.run_concurrently(requests)
        rows = sorted((row for result in results for row in result), key=lambda r: r.job_id)
        page = [codec.job_from_row(row) for row in rows[:limit] if codec.is_job(row)]
        return page, encode_job_cursor(rows[limit - 1].job_id) if len(rows) > limit else None

    def claim_idempotency_key(self, claim: IdempotencyClaim) -> IdempotencyClaim:
        bound = self._statements.prepared(CLAIM_IDEMPOTENCY_KEY).bind(
            (claim.user_id, claim.key, claim.job_id, claim.fingerprint, claim.claimed_at)
        )
        row = guarded(lambda: self._session.execute(bound).one())
        if row.applied:
            return claim
        return IdempotencyClaim(claim.user_id, claim.key, row.job_id, row.fingerprint, utc(row.created_at))

    def idempotency_key(self, user_id: str, key: str) -> IdempotencyClaim | None:
        bound = self._statements.prepared(SELECT_IDEMPOTENCY_KEY).bind((user_id, key))
        bound.consistency_level = self._settling_read
        row = guarded(lambda: self._session.execute(bound).one())
        return IdempotencyClaim(user_id, key, row.job_id, row.fingerprint, utc(row.created_at)) if row else None

    def write_outcomes(self, outcomes: Sequence[Outcome]) -> None:
        # The retries first: a record that says FAILED always has its retry (module doc).
        self.write_scheduled([outcome.retry for outcome in outcomes if outcome.retry is not None])
        self._history.write_records([outcome.record for outcome in outcomes])

    def walk_jobs(self, after: str | None, limit: int) -> tuple[list[Job], str | None]:
        # The rest of the last partition (by job id), then the partitions after it in token order: pages
        # (one request each, LOCAL_ONE), never a token value written down (module constants, ``WALK_JOBS``).
        if after is None:
            rows = self._walk(WALK_JOBS, (limit,), limit)
        else:
            user_id, shard, job_id = json.loads(after)
            rows = self._walk(WALK_JOBS_IN_PARTITION, (user_id, shard, job_id, limit), limit)
            if len(rows) < limit:
                rows += self._walk(WALK_JOBS_AFTER_PARTITION, (user_id, shard, limit - len(rows)), limit - len(rows))
        cursor = json.dumps([rows[-1].user_id, rows[-1].shard, rows[-1].job_id]) if len(rows) == limit else None
        return [codec.job_from_row(row) for row in rows if codec.is_job(row)], cursor

    def _walk(self, cql: str, params: tuple[Any, ...], limit: int) -> list[Any]:
        return guarded(lambda: list(self._session.execute(self._statements.stale(cql, params, fetch_size=limit))))

    def retire_job(self, job: Job, expected_version: int, ttl_s: int) -> bool:
        # The compare-and-set first (state DELETED: nothing writes the job after it), then the whole row again
        # with a time to live: an update's cells would expire, but not the row an insert made.
        if not self.update_job(job, [], expected_version):
            return False
        values = (*codec.job_values(job), ttl_s)
        self._execute(INSERT_JOB_EXPIRING, values)
        return True

    # -- the history table (``history.CassandraHistory``) --------------------------------------------------------

    def write_started(self, records: Sequence[ExecutionRecord]) -> None:
        self._history.write_started(records)

    def history_page(
        self, job_id: str, limit: int, before: tuple[datetime, int, str | None] | None = None
    ) -> list[ExecutionRecord]:
        return self._history.history_page(job_id, limit, before)

    def latest_records(
        self, job_ids: Sequence[str], limit: int, *, stale_ok: bool = False
    ) -> dict[str, list[ExecutionRecord]]:
        return self._history.latest_records(job_ids, limit, stale_ok=stale_ok)

    def get_record(
        self, job_id: str, scheduled_at: datetime, attempt: int, execution_id: str
    ) -> ExecutionRecord | None:
        return self._history.get_record(job_id, scheduled_at, attempt, execution_id)

    def get_records(self, keys: Sequence[RecordKey]) -> dict[RecordKey, ExecutionRecord]:
        return self._history.get_records(keys)

    def record_by_execution_id(self, job_id: str, execution_id: str, scan_limit: int = 1000) -> ExecutionRecord | None:
        return self._history.record_by_execution_id(job_id, execution_id, scan_limit)
