"""Writing a job's scheduled rows where their scans will read them (``domain.placement``), for every use case
that plans a run: a submit, a change, a resume, a run now, a backfill."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import JobState, Trigger, execution_id_for
from jobrunner.domain.placement import placed_in_time, plan_execution

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from datetime import datetime

    from jobrunner.domain.jobs import Job, ScheduledExecution
    from jobrunner.ports import Clock, Stores
    from jobrunner.services.wake import Waker

#: Attempts to write a row in time for its scan before giving up with 503 (each is placed anew).
MAX_PLACEMENTS = 5


class RowWriter:
    """Plans a job's rows, writes them in time for their scans and wakes the scans of their late lanes."""

    def __init__(self, store: Stores, clock: Clock, segment_count: int, waker: Waker) -> None:
        self._store = store
        self._clock = clock
        self._segment_count = segment_count
        #: Wakes the scan of a partition a LATE row was written to (``services.wake``).
        self._waker = waker

    def plan(self, job: Job, due_at: datetime, now: datetime, trigger: Trigger,
             scheduled_at: datetime | None = None) -> ScheduledExecution:
        return plan_execution(job, due_at, now, self._segment_count, trigger=trigger, scheduled_at=scheduled_at)

    def write(self, rows: list[ScheduledExecution]) -> list[ScheduledExecution]:
        self._store.write_scheduled(rows)
        return rows

    def wake(self, rows: Iterable[ScheduledExecution]) -> None:
        self._waker.wake(rows)

    def write_in_time(self, write: Callable[[datetime], list[ScheduledExecution]]) -> bool:
        """Run ``write(now)``, which places its rows as seen at ``now``, writes them and returns them, until a
        write returns in time for the scans of the buckets it placed them in (see ``domain.placement``).
        True once it has; 503 if it never does."""
        for _ in range(MAX_PLACEMENTS):
            started = self._clock.now()
            rows = write(started)
            returned = self._clock.now()
            # After the write (the lease is read after it), but outside its time: a woken scan reads its late
            # lane from the start, so how long the request for it takes changes nothing for the rows.
            self._waker.wake(rows)
            if placed_in_time(rows, started, returned):
                return True
        raise Unavailable("the database keeps answering too slowly for the scans; the write may have to be retried")

    def reassert(self, job: Job) -> None:
        """Every idempotent path re-asserts its row (a repeated submit, a resume of an active job): the next run
        of an active job whose fire has no record yet (not published, skipped or held) is written again where its
        scan will read it, under the same execution_id: harmless where the row exists (the same row, or a copy
        with the same id), a repair where it does not (an earlier answer that was an error, a row lost)."""
        due = job.next_run_at
        if job.state is not JobState.ACTIVE or due is None:
            return
        if self._store.get_record(job.job_id, due, 1, execution_id_for(job.job_id, due, 1, Trigger.SCHEDULE)):
            return
        self.place(job, due)

    def place(self, job: Job, due: datetime) -> None:
        """Write the row of the job's scheduled fire at ``due``, placed anew until it lands in time."""
        self.write_in_time(lambda at: self.write([self.plan(job, due, at, Trigger.SCHEDULE)]))
