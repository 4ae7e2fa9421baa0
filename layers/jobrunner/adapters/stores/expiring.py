"""A one-time job's row on Cassandra or Keyspaces, expiring by itself: the statements and the time to live.

A one-time job's row expires by itself at the instant ``domain.expiry.row_expires_at`` gives for the job as written
(its tenant's history retention from ``history_ttl_s``), with no write of its own. Time to live is per cell in
Cassandra and Keyspaces: an UPDATE re-sets only the cells it writes, and an INSERT's row marker keeps the time to
live it was written with. So every write of such a row writes every column with the one instant (``ttl_seconds`` of
it at ``now``): the submit as an UPDATE (``UPSERT_JOB_EXPIRING``: no row marker at all), each compare-and-set of it
as the whole row again (``UPDATE_JOB_EXPIRING``), a paused job's with none (TTL 0) until its resume writes one
again. No cell outlives the others or dies before them, so the row is readable whole until its instant and not at
all after it. Races with the expiry: a compare-and-set (``IF version = ?``) on a row that has expired reads no
version and fails, so a change landing as the row expires resurrects nothing (the API answers 404: the job is gone);
a change that lands just before moves the instant (every cell again). Recurring jobs are written as before
(``INSERT_JOB``, the two updates), never expiring this way. A row written whole by an INSERT without a time to live
(a recurring job, or one submitted before this release) and later made one-time keeps its marker after its cells
expire: a key with no columns, which reads as no job (``codec.is_job``). The migration gives the rows of one-time
jobs an older release wrote, not changed since, their time to live, marker included (``cql.kept_jobs``).

Amazon Keyspaces: its UPDATE takes ``USING TTL`` and ``IF`` together (its CQL reference's grammar; its page on
lightweight transactions prices them on tables with TTL), on a table with TTL turned on: ``job_table_v2`` is, by
the CDK app (``cql.schema.with_row_ttls`` finds these statements). A time to live of 0 is none, as on Cassandra.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from jobrunner.adapters.stores import codec
from jobrunner.domain.expiry import row_expires_at, ttl_seconds

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from jobrunner.domain.jobs import Job

#: Every column a job's writes set, in ``INSERT_JOB``'s order after the key (``codec.job_values``); the scan's
#: columns of an older release (``scan_next_run_at``, ``scan_schedule_version``) are no longer written by anyone.
_EVERY_COLUMN = (
    "schedule = ?, payload = ?, topic = ?, state = ?, version = ?, schedule_version = ?, schedule_version_set_at = ?,"
    " retry = ?, timeout_s = ?, paused_at = ?, trace_parent = ?, created_at = ?, updated_at = ?, next_run_at = ?,"
    " last_run_at = ?, last_execution_id = ?, last_status = ?, jitter_s = ?, tags = ?, policies = ?, created_by = ?"
)
#: A one-time job as submitted: every column, each cell expiring at the row's instant (``domain.expiry``). An
#: UPDATE, not an INSERT: it writes no row marker, whose time to live no later UPDATE could move, so the row
#: is only its cells, all of one instant, and goes whole when they do (module doc).
UPSERT_JOB_EXPIRING = (
    f"UPDATE job_table_v2 USING TTL ? SET {_EVERY_COLUMN} WHERE user_id = ? AND shard = ? AND job_id = ?"
)
#: The compare-and-set of a change of a one-time job (or of one that was): the whole row again, every cell with
#: the row's new instant (0: none, a paused job), so no cell outlives the others or dies before them.
UPDATE_JOB_EXPIRING = UPSERT_JOB_EXPIRING + " IF version = ?"


class RowExpiry:
    """Which job rows are written to expire, and with what time to live (``CassandraJobStore``, "expiry")."""

    def __init__(self, history_ttl_s: Callable[[str], int], *, on: bool, now: Callable[[], datetime]) -> None:
        self._history_ttl_s = history_ttl_s
        self._on = on
        #: The wall clock a time to live is counted from (a test's, to see an instant come).
        self._now = now

    @property
    def on(self) -> bool:
        """Whether the stage lets one-time jobs' rows expire (``one_time_rows_expire``)."""
        return self._on

    def applies(self, job: Job, was_one_time: bool = False) -> bool:
        """Whether ``job``'s row is written whole with a time to live: a one-time job (or one that was, made
        recurring: its cells lose theirs), where the stage lets rows expire."""
        return self._on and (not job.spec.schedule.recurring or was_one_time)

    def ttl(self, job: Job) -> int:
        """The time to live of ``job``'s row written now: to its instant (``domain.expiry``), or 0 for none."""
        history = timedelta(seconds=self._history_ttl_s(job.user_id))
        return ttl_seconds(row_expires_at(job, history), self._now())

    def upsert_values(self, job: Job) -> tuple[Any, ...]:
        """``UPSERT_JOB_EXPIRING``'s values of a job as submitted: its time to live, its columns, its key."""
        values = codec.job_values(job)
        return (self.ttl(job), *values[3:], *values[:3])
