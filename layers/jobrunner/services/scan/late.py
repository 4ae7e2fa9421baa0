"""The polls of a partition's LATE lane (``LateLane``): the rows written by others after its scan may have started."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import Lane
from jobrunner.domain.placement import LATE_REACH
from jobrunner.domain.publication import row_identity

if TYPE_CHECKING:
    from datetime import datetime

    from jobrunner.domain.jobs import ScheduledExecution
    from jobrunner.ports import ScheduledRowStore
    from jobrunner.services.scan.due import DueRows
    from jobrunner.services.scan.rules import ScanReport

log = logging.getLogger(__name__)


class LateLane:
    """Polls one partition's LATE lane about every second, adding the rows it has not taken yet to ``due``."""

    def __init__(self, store: ScheduledRowStore, report: ScanReport, due: DueRows) -> None:
        self._store = store
        self._report = report
        self._due = due
        #: Where the next poll starts (the due instant up to which the lane has been read).
        self.read_up_to: datetime | None = None
        #: Late-lane rows already taken, by identity (each poll returns the rows it returned before).
        #: Planned rows are streamed once, in order: a scan's memory does not grow with its partition
        #: (docs/benchmarks.md, "Memory"), only with its late lane and the rows it writes into its own.
        self._seen: set[tuple[object, ...]] = set()

    def poll(self, now: datetime, to_end: bool) -> bool:
        """Read the late lane's next window: the rows due from where the last poll stopped (the whole lane's
        start for the first) up to ``LATE_REACH`` after ``now``, or, once the minute has ended (``to_end``), the
        whole lane to its end. No row lands behind a window once read (``domain.placement``), so each row is read
        once, and no poll but the last reads again the rows (and the tombstones of the done rows) of the windows
        before it. The last one does, to find a row that landed behind them all the same (a writer's clock off by
        more than the bound): it is published late, counted (``ScanReport.behind_window``) and logged, not lost.
        False when the read failed."""
        segment, bucket = self._report.segment, self._report.bucket
        reach = now + LATE_REACH
        since = None if to_end else self.read_up_to
        try:
            for row in self._store.lane_rows(bucket, segment, Lane.LATE, since=since,
                                             until=None if to_end else reach):
                if row_identity(row) not in self._seen:
                    self._seen.add(row_identity(row))
                    self._due.add(row)
                    self._behind(row)
        except Unavailable as exc:
            log.warning("late lane poll of %s/%s failed: %s", segment, bucket, exc)
            return False
        self.read_up_to = reach if self.read_up_to is None else max(self.read_up_to, reach)
        return True

    def _behind(self, row: ScheduledExecution) -> None:
        """Count and log a late row found behind the windows already read (see ``poll``)."""
        if self.read_up_to is not None and row.due_at < self.read_up_to:
            self._report.behind_window += 1
            log.error("a late row landed behind the late lane's windows already read (clock skew between its "
                      "writer and this scan beyond the bound?): published late", extra={
                          "job_id": row.job_id, "execution_id": row.execution_id, "due_at": row.due_at.isoformat(),
                          "read_up_to": self.read_up_to.isoformat()})
