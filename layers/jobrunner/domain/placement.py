"""Where a scheduled execution is written so that its scan is sure to see it.

The tick running during minute M dispatches the scan of bucket M+1, so a scan may start reading its
partition up to 60 s before its bucket begins. It reads the PLANNED lane once, then polls the LATE
lane about every second until ``SETTLE`` after its bucket ends. A writer therefore:
- puts an execution in the bucket of ``max(due_at, now + SETTLE)``: an overdue or imminent execution
  goes to the bucket being scanned now, never to one whose scan may already have finished;
- writes to the LATE lane whenever that bucket's scan may already have started (``OPEN_AHEAD`` before
  the bucket, which leaves 30 s for clock skew between the writer and the tick).
The only requirement left on the writer is that its write lands before the scan of its bucket can
finish: a scan polls its late lane once more after ``bucket + 1 min + SETTLE`` before it is done, so a
write that has returned by then is seen. ``placed_in_time`` tells a writer whether that held; when it
did not (a slow or retried write), the writer places the row again from the new ``now`` and writes it
again: the same execution, so at worst a second copy with the same ``execution_id``, never a loss.
Placement is always computed at the moment of each write attempt, never once for all attempts.

A PLANNED row is not deleted once its execution is done (a delete per execution would be a second write,
and a tombstone for the next read to skip); every row expires ``KEEP_ROWS`` after its scan may close
(``row_ttl``), and only a done LATE row, which its scan's polls read whole, is deleted.
A scan that crashes or runs out of time resumes after the last row it settled, which its lease item
keeps, so a done row is not read again; a partition can stay not done (failing, parked, waiting for an
operator) for up to ``KEEP_ROWS`` before its rows expire.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from jobrunner.domain.jobs import Lane, ScheduledExecution
from jobrunner.domain.time import MINUTE, minute_bucket, utc

if TYPE_CHECKING:
    from collections.abc import Iterable

OPEN_AHEAD = timedelta(seconds=90)
SETTLE = timedelta(seconds=5)
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


def scan_closes_at(bucket: datetime) -> datetime:
    """The earliest instant the scan of ``bucket`` may take its last look at its late lane."""
    return bucket + MINUTE + SETTLE


def placed_in_time(buckets: Iterable[datetime], returned_at: datetime) -> bool:
    """True when a write into ``buckets`` that returned at ``returned_at`` is sure to be seen by their scans."""
    return all(utc(returned_at) <= scan_closes_at(bucket) for bucket in buckets)


def placed_anew(row: ScheduledExecution, now: datetime) -> ScheduledExecution:
    """``row`` (the same execution, under the same version) placed as seen at ``now``."""
    bucket, lane = place(row.due_at, now)
    return replace(row, bucket=bucket, lane=lane)


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
