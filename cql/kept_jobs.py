"""One-time jobs' rows written before they expired by themselves, given their time to live (a step of ``migrate``).

A release before ``adapters.stores.expiring`` wrote every job whole with ``INSERT_JOB``: no time to live, and a
row marker. Such a one-time job's row is kept until it is changed, so ``expire_kept_one_time_jobs`` walks
``job_table_v2`` (page by page) and rewrites each row that is a job (``codec.is_job``), one-time, due to expire
(``RowExpiry``: not paused, an instant the stores can hold) and has no time to live yet (``TTL(version)`` null):
every column as read, with the time to live the store would write it with now (``RowExpiry.ttl``: one rule, the
tenant's history retention from the same settings as the store's), so the row reads as before until its instant.
A row whose instant has passed gets the shortest time to live, 1 s (``domain.expiry.ttl_seconds`` never gives
0, "none", for a past instant): it goes at once. Nothing is rewritten where the stage keeps these rows
(``one_time_rows_expire`` false).

Races: the rewrite is a compare-and-set on the version read (``IF version = ?``), so a change landing meanwhile
wins and the row is skipped: the change's own write carries the time to live already. Running the step again
rewrites nothing (every row it rewrote has a time to live).

The row marker: an INSERT's marker keeps the time to live it was written with (none), and outlives the cells, a
key with no columns that reads as no job but costs storage and is walked by lists. So once the compare-and-set
has landed, the marker is written again with the same time to live (``EXPIRE_ROW_MARKER``, the key only): then
the whole row, key included, goes at the instant. It is safe: it writes no data cell, so it cannot undo a change
that lands after the compare-and-set; such a change (a later instant, a job made recurring: no time to live)
keeps the row alive by its cells, which outlive the marker. Keyspaces takes an INSERT of the key alone with
``USING TTL`` (its grammar; the table has TTL turned on, ``cql.schema.with_row_ttls``).

Left as they are: the marker of an INSERT-written row changed by this release before the step ran (its cells have
a time to live, so the step skips it; its key is left once they expire), as ``expiring``'s module doc says.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cassandra import ConsistencyLevel
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import SimpleStatement

from jobrunner.adapters.stores import codec
from jobrunner.adapters.stores.driver import unset_nulls
from jobrunner.adapters.stores.expiring import RowExpiry

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cassandra.cluster import Session

    from jobrunner.config import Settings

#: Every column of ``job_table_v2`` but its key: those the store writes, and the scan's of an older release
#: (``scan_next_run_at``, ``scan_schedule_version``), which a row copied from ``job_table`` may still hold.
KEPT_COLUMNS = ("schedule", "payload", "topic", "state", "version", "schedule_version", "schedule_version_set_at",
                "retry", "timeout_s", "paused_at", "trace_parent", "created_at", "updated_at", "next_run_at",
                "scan_next_run_at", "scan_schedule_version", "last_run_at", "last_execution_id", "last_status",
                "jitter_s", "tags", "policies", "created_by")
SELECT_KEPT_JOBS = (
    f"SELECT user_id, shard, job_id, {', '.join(KEPT_COLUMNS)}, TTL(version) AS version_ttl FROM job_table_v2"
)
#: The row as read, every cell with the row's time to live, unless a change landed since (its version).
EXPIRE_KEPT_JOB = (
    f"UPDATE job_table_v2 USING TTL ? SET {', '.join(f'{c} = ?' for c in KEPT_COLUMNS)}"
    " WHERE user_id = ? AND shard = ? AND job_id = ? IF version = ?"
)
#: The row marker again, with the cells' time to live (module doc).
EXPIRE_ROW_MARKER = "INSERT INTO job_table_v2 (user_id, shard, job_id) VALUES (?, ?, ?) USING TTL ?"

STATEMENTS = (SELECT_KEPT_JOBS, EXPIRE_KEPT_JOB, EXPIRE_ROW_MARKER)


@dataclass(frozen=True)
class KeptJob:
    """A row to rewrite: its key, its columns as read (``KEPT_COLUMNS``), its version as read, its time to live."""

    key: tuple[str, int, str]
    columns: tuple[Any, ...]
    version: int
    ttl: int


def row_expiry(settings: Settings) -> RowExpiry:
    """The rule the store of ``settings`` writes one-time jobs' rows with (``wiring``): its lever, its tenants'
    history retention."""
    limits = settings.tenant_limits
    return RowExpiry(lambda tenant: limits.of(tenant).history_ttl_s, on=settings.one_time_rows_expire,
                     now=lambda: datetime.now(UTC))


def kept_job(row: Any, expiry: RowExpiry) -> KeptJob | None:
    """The rewrite ``row`` (read by ``SELECT_KEPT_JOBS``) needs, or None: not a job, a time to live already, not
    a one-time job, or one that must not expire (paused, no fire, an instant too far: ``RowExpiry.ttl`` 0)."""
    if not codec.is_job(row) or row.version_ttl is not None:
        return None
    job = codec.job_from_row(row)
    ttl = expiry.ttl(job) if expiry.applies(job) else 0
    if ttl == 0:
        return None
    return KeptJob((row.user_id, row.shard, row.job_id), tuple(getattr(row, c) for c in KEPT_COLUMNS),
                   row.version, ttl)


def expire_kept_one_time_jobs(session: Session, expiry: RowExpiry, page_size: int = 500,
                              concurrency: int = 32) -> int:
    """Give every one-time job's row of ``job_table_v2`` that has no time to live its own (see the module doc);
    returns how many rows were rewritten. Nothing is read where ``expiry`` is off."""
    if not expiry.on:
        return 0
    read = SimpleStatement(SELECT_KEPT_JOBS, fetch_size=page_size, consistency_level=ConsistencyLevel.LOCAL_QUORUM)
    rewritten = 0
    page: list[KeptJob] = []
    for row in session.execute(read):
        kept = kept_job(row, expiry)
        if kept is not None:
            page.append(kept)
        if len(page) == page_size:
            rewritten += rewrite_kept_jobs(session, page, concurrency)
            page = []
    return rewritten + rewrite_kept_jobs(session, page, concurrency)


def rewrite_kept_jobs(session: Session, jobs: Sequence[KeptJob], concurrency: int = 32) -> int:
    """Rewrite ``jobs`` with their time to live, each unless its version changed since it was read, then the
    marker of each rewritten one; returns how many were."""
    if not jobs:
        return 0
    rewrite = session.prepare(EXPIRE_KEPT_JOB)  # its serial consistency is the session profile's
    rewrite.consistency_level = ConsistencyLevel.LOCAL_QUORUM
    marker = session.prepare(EXPIRE_ROW_MARKER)
    marker.consistency_level = ConsistencyLevel.LOCAL_QUORUM
    # unset, not null: a null writes a tombstone where the row has no cell
    values = [(job.ttl, *unset_nulls(job.columns), *job.key, job.version) for job in jobs]
    results = execute_concurrent_with_args(session, rewrite, values, concurrency=concurrency,
                                           raise_on_first_error=True)
    landed = [job for job, (_ok, result) in zip(jobs, results, strict=True) if result.one().applied]
    execute_concurrent_with_args(session, marker, [(*job.key, job.ttl) for job in landed], concurrency=concurrency,
                                 raise_on_first_error=True)
    return len(landed)
