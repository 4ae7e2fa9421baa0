"""When a one-time job's row may expire by itself (``USING TTL``), with no write of its own.

A one-time job's row may go once nothing can still need it and its history is gone:

- its last possible fire: the ``at`` instant, plus its jitter window; or the job's last write (``updated_at``)
  if later: a run now or a backfill of a one-time job writes its row first (``services.jobs.commands``), and a
  change such as a cancel or a PATCH may come after its fire, while work is still in flight;
- plus the longest its executions can still run and be retried from there (``execution_span``, counted twice:
  its fire may wait for one execution its overlap policy waits for, a run now asked just before it, then run
  its own);
- plus a margin for the system's own delays (a scan late, a result reported late: ``EXPIRY_MARGIN``);
- plus the tenant's history retention (``history_days``): an execution's record expires that long after its last
  write, so the job's history has expired by then too.

Before it the job is fully usable (GET, history, the ledger, results, retries, the reconciler); after it the row is
gone as if deleted (the API answers 404, lists skip it, the reconciler never walks it).

A job that can still fire later than planned has no instant (None: written with no time to live): a PAUSED one
(a resume may plan its fire any time later), a recurring one (never expires this way), a schedule with no fire.
Every write of the row carries the instant computed from the row as written, so a resume, a PATCH of ``at`` or of
the retry policy, a run now or a backfill moves it.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from jobrunner.domain.jobs import JobState
from jobrunner.domain.spec import MAX_TIMEOUT_S

if TYPE_CHECKING:
    from jobrunner.domain.jobs import Job
    from jobrunner.domain.spec import JobSpec

#: The system's own delays an execution may still see after its span: a scan that runs late (the reconciler's
#: repairs, a catch-up after an outage), a result reported or applied late.
EXPIRY_MARGIN = timedelta(days=1)
#: The longest time to live the stores take (Keyspaces and Cassandra: 20 years); an instant further away is
#: written with none (the job is kept, as any job was before).
MAX_TTL_S = 630_720_000
#: The latest instant Cassandra's storage can hold an expiry at (the year 2038 of its 32-bit seconds; a later one
#: is refused by default, ``expiration_date_overflow_policy``): a row due to expire later is written with none.
LATEST_EXPIRY = datetime(2038, 1, 19, 3, 14, 7, tzinfo=UTC)
#: Where a non-recurring schedule's fire is looked for from: before any fire a job can have.
_BEFORE_ANY_FIRE = datetime(1970, 1, 1, tzinfo=UTC)


def execution_span(spec: JobSpec) -> timedelta:
    """The longest one execution of a job can still need its row once published: each attempt up to its timeout
    (``MAX_TIMEOUT_S``, the longest a job may set, when it sets none: a result later than that finds the job gone,
    as it would a deleted one), and the longest wait before each retry (``max_delay_s``: a backoff or a
    ``Retry-After`` never waits longer)."""
    attempts = spec.retry.max_retries + 1
    attempt = timedelta(seconds=spec.timeout_s or MAX_TIMEOUT_S)
    return attempt * attempts + timedelta(seconds=spec.retry.max_delay_s) * spec.retry.max_retries


def row_expires_at(job: Job, history: timedelta) -> datetime | None:
    """The instant ``job``'s row (as written) may expire (see the module doc), ``history`` being its tenant's
    history retention (``Limits.history_days``), or None when it must not expire by itself: a recurring job, a
    PAUSED one, a schedule with no fire."""
    schedule = job.spec.schedule
    if schedule.recurring or job.state is JobState.PAUSED:
        return None
    fire = schedule.next_fire_after(_BEFORE_ANY_FIRE)
    if fire is None:
        return None
    last_need = max(fire + timedelta(seconds=job.spec.jitter_s or 0), job.updated_at)
    return last_need + 2 * execution_span(job.spec) + EXPIRY_MARGIN + history


def ttl_seconds(expires_at: datetime | None, now: datetime) -> int:
    """The time to live that makes a row written at ``now`` expire at ``expires_at``: 0 (none) for no instant or
    one past ``MAX_TTL_S`` or ``LATEST_EXPIRY`` (a job too far ahead is kept, as every job was before); at least 1
    (an instant already passed: the row goes at once, never kept)."""
    if expires_at is None or expires_at >= LATEST_EXPIRY:
        return 0
    seconds = math.ceil((expires_at - now).total_seconds())
    return 0 if seconds > MAX_TTL_S else max(1, seconds)
