"""Where a scheduled execution is written so that its scan is sure to see it.

The tick running during minute M dispatches the scan of bucket M+1, so a scan may start reading its
partition up to 60 s before its bucket begins. It reads the PLANNED lane once, then polls the LATE
lane about every second until ``SETTLE`` after its bucket ends. A writer therefore:
- puts an execution in the bucket of ``max(due_at, now + SETTLE)``: an overdue or imminent execution
  goes to the bucket being scanned now, never to one whose scan may already have finished;
- writes to the LATE lane whenever that bucket's scan may already have started (``OPEN_AHEAD`` before
  the bucket, which leaves 30 s for clock skew between the writer and the tick).
The scan reads its late lane in windows of due time, each row once: a poll at ``t`` reads the rows due
from where the last poll stopped up to ``t + LATE_REACH``, and the next poll goes on from there. So a
LATE row must never land behind a window already read. A writer keys it no earlier than
``LATE_LEAD`` after the moment it places it (``late_due``: a row due sooner, or overdue, is published
at that key, up to ``LATE_LEAD`` after its write), and its write must return within
``LATE_WRITE_WITHIN``. Then a row that lands after a poll started at ``t`` (on the scan's clock) is
keyed at least ``LATE_LEAD - LATE_WRITE_WITHIN - CLOCK_SKEW`` = ``LATE_REACH`` after ``t``: in a
window not read yet, as long as the writer's clock is within ``CLOCK_SKEW`` of the scan's.
The other requirement on the writer is that its write lands before the scan of its bucket can
finish: a scan polls its late lane once more, to its end, after ``bucket + 1 min + SETTLE`` before it
is done, so a write that has returned by then is seen. A PLANNED row is read once, as the scan streams
its lane from the start, and a scan may start ``SCAN_OPENS`` before its bucket (the tick running
during the minute before dispatches it): its write must return before then (by the writer's clock,
``CLOCK_SKEW`` earlier still). ``placed_in_time`` tells a writer whether these held; when they did not (a
slow or retried write), the writer places the row again from the new ``now`` and writes it again: the
same execution, so at worst a second copy with the same ``execution_id``, never a loss. Placement is
always computed at the moment of each write attempt, never once for all attempts.

A PLANNED row is not deleted once its execution is done (a delete per execution would be a second write,
and a tombstone for the next read to skip); every row expires ``KEEP_ROWS`` after its scan may close
(``row_ttl``), and only a done LATE row is deleted: the polls of a running scan read each row once, but a
scan taking the partition over reads its late lane from the start.
A scan that crashes or runs out of time resumes after the last row it settled, which its lease item
keeps, so a done row is not read again; a partition can stay not done (failing, parked, waiting for an
operator) for up to ``KEEP_ROWS`` before its rows expire.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from jobrunner.domain.jobs import Lane, ScheduledExecution, Trigger, due_of, execution_id_for
from jobrunner.domain.segments import segment_of
from jobrunner.domain.time import MINUTE, minute_bucket, utc

if TYPE_CHECKING:
    from collections.abc import Iterable

    from jobrunner.domain.jobs import Job

OPEN_AHEAD = timedelta(seconds=90)
#: How long before its bucket a scan may start reading its PLANNED lane (the tick of the minute before).
SCAN_OPENS = timedelta(seconds=60)
SETTLE = timedelta(seconds=5)
#: How far past its poll a scan's read of its late lane reaches (the rows due up to then).
LATE_REACH = timedelta(seconds=1)
#: Clock difference tolerated between a writer of LATE rows and the scan (hosts synchronised by NTP
#: or the Amazon Time Sync Service are within milliseconds).
CLOCK_SKEW = timedelta(milliseconds=500)
#: How long a LATE row's write may take; one that returns later is placed and written again.
LATE_WRITE_WITHIN = timedelta(milliseconds=500)
#: The earliest a LATE row is keyed after the moment it is placed.
LATE_LEAD = LATE_REACH + CLOCK_SKEW + LATE_WRITE_WITHIN
#: How long a scheduled row is kept after its scan may close (the ParkedPartitions alarm fires long before).
KEEP_ROWS = timedelta(days=30)
#: The longest time to live Cassandra and Amazon Keyspaces accept (20 years).
MAX_TTL_S = 630_720_000
#: The latest expiry Cassandra stores before its 5.0 storage format (32-bit seconds; CASSANDRA-14092).
LATEST_EXPIRY = datetime(2038, 1, 1, tzinfo=UTC)


def place(due_at: datetime, now: datetime) -> tuple[datetime, Lane]:
    """The (minute bucket, lane) to write an execution due at ``due_at``, as decided at ``now``."""
    now = utc(now)
    bucket = minute_bucket(max(utc(due_at), now + SETTLE))
    lane = Lane.LATE if now >= bucket - OPEN_AHEAD else Lane.PLANNED
    return bucket, lane


def late_due(due_at: datetime, now: datetime) -> datetime:
    """The key of a LATE row due at ``due_at`` placed at ``now``: no earlier than ``LATE_LEAD`` after ``now``
    (so that it lands in a window of the late lane its scan has not read yet)."""
    return max(utc(due_at), utc(now) + LATE_LEAD)


def scan_closes_at(bucket: datetime) -> datetime:
    """The earliest instant the scan of ``bucket`` may take its last look at its late lane."""
    return bucket + MINUTE + SETTLE


def placed_in_time(rows: Iterable[ScheduledExecution], placed_at: datetime, returned_at: datetime) -> bool:
    """True when a write of ``rows``, placed at ``placed_at``, that returned at ``returned_at`` is sure to be
    seen by their scans: a LATE row within ``LATE_WRITE_WITHIN`` and before its scan may close; a PLANNED row
    before its scan may have started to read its lane (``SCAN_OPENS``, less ``CLOCK_SKEW``)."""
    returned_at = utc(returned_at)
    # compared to the bucket, not the bucket to instants: a bucket's close may lie past year 9999
    closing, opening = returned_at - (MINUTE + SETTLE), returned_at + SCAN_OPENS + CLOCK_SKEW
    return all(
        opening <= row.bucket if row.lane is Lane.PLANNED
        else closing <= row.bucket and returned_at <= utc(placed_at) + LATE_WRITE_WITHIN
        for row in rows
    )


def placed_anew(row: ScheduledExecution, now: datetime) -> ScheduledExecution:
    """``row`` (the same execution, under the same version) placed as seen at ``now``. A LATE row's key is
    no earlier than its last one, which was no earlier than its due instant."""
    bucket, lane = place(row.due_at, now)
    return replace(row, bucket=bucket, lane=lane, due_at=late_due(row.due_at, now) if lane is Lane.LATE else row.due_at)


def row_ttl(bucket: datetime, now: datetime) -> int:
    """Seconds a row of ``bucket`` written at ``now`` is kept: until ``KEEP_ROWS`` after its scan may close;
    0 (no expiry) for a row due so far ahead that no time to live reaches that far (``MAX_TTL_S``,
    ``LATEST_EXPIRY``)."""
    if utc(bucket) >= LATEST_EXPIRY - KEEP_ROWS:  # also keeps the sums below inside datetime's years (9999)
        return 0
    expiry = scan_closes_at(bucket) + KEEP_ROWS
    seconds = math.ceil((expiry - utc(now)).total_seconds())
    if seconds > MAX_TTL_S or expiry >= LATEST_EXPIRY:
        return 0
    return max(1, seconds)


def plan_execution(
    job: Job, due_at: datetime, now: datetime, segment_count: int, *, trigger: Trigger, attempt: int = 1,
    scheduled_at: datetime | None = None, origin: Trigger = Trigger.SCHEDULE,
) -> ScheduledExecution:
    """The ``task_schedule_v2`` row for one attempt of ``job`` due at ``due_at``, placed as seen at ``now``
    (a LATE row is keyed no earlier than ``domain.placement.LATE_LEAD`` after ``now``); ``origin``: the
    lineage of a retry or a watchdog (``domain.jobs.execution_id_for``). For a scheduled fire (no
    ``scheduled_at``) ``due_at`` is the fire, and the row is due at ``domain.jobs.due_of`` it."""
    if scheduled_at is None and trigger is Trigger.SCHEDULE:
        scheduled_at, due_at = due_at, due_of(job, due_at)  # a fire: due within the job's jitter window
    scheduled_at = utc(scheduled_at or due_at)
    bucket, lane = place(due_at, now)
    return ScheduledExecution(
        bucket=bucket,
        segment=segment_of(job.job_id, segment_count),
        lane=lane,
        due_at=late_due(due_at, now) if lane is Lane.LATE else utc(due_at),
        job_id=job.job_id,
        execution_id=execution_id_for(job.job_id, scheduled_at, attempt, trigger, origin),
        user_id=job.user_id,
        scheduled_at=scheduled_at,
        attempt=attempt,
        job_version=job.schedule_version,
        trigger=trigger,
    )
