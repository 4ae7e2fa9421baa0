"""Where a scheduled execution is written so that its scan is sure to see it.

The tick running during minute M dispatches the scan of bucket M+1, so a scan may start reading its
partition up to 60 s before its bucket begins. It reads the PLANNED lane once, then polls the LATE
lane about every second until ``SETTLE`` after its bucket ends. A writer therefore:
- puts an execution in the bucket of ``max(due_at, now + SETTLE)``: an overdue or imminent execution
  goes to the bucket being scanned now, never to one whose scan may already have finished;
- writes to the LATE lane whenever that bucket's scan may already have started (``OPEN_AHEAD`` before
  the bucket, which leaves 30 s for clock skew between the writer and the tick).
The only requirement left on the writer is that its write lands within ``SETTLE`` of ``now``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from jobrunner.domain.jobs import Lane
from jobrunner.domain.time import minute_bucket, utc

OPEN_AHEAD = timedelta(seconds=90)
SETTLE = timedelta(seconds=5)


def place(due_at: datetime, now: datetime) -> tuple[datetime, Lane]:
    """The (minute bucket, lane) to write an execution due at ``due_at``, as decided at ``now``."""
    now = utc(now)
    bucket = minute_bucket(max(utc(due_at), now + SETTLE))
    lane = Lane.LATE if now >= bucket - OPEN_AHEAD else Lane.PLANNED
    return bucket, lane
