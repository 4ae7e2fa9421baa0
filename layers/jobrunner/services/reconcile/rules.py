"""What a reconciler run is given (its rules, the store ports it uses) and what it reports."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from jobrunner.domain.time import MINUTE
from jobrunner.ports import HistoryStore, JobStore, ScheduledRowStore


class ReconcileStores(JobStore, ScheduledRowStore, HistoryStore, Protocol):
    """The store ports the reconciler uses: the jobs (walked, read), the scheduled rows (read, repairs written) and the
    history (read)."""


@dataclass(frozen=True)
class ReconcileRules:
    segment_count: int
    #: How often a run starts (the EventBridge rule's rate in AWS, the local stack's reconciler thread).
    interval: timedelta = MINUTE
    #: An execution is looked at once it is this long overdue, no sooner.
    grace: timedelta = timedelta(minutes=2)
    #: Jobs per page of the walk.
    page_size: int = 500
    #: Jobs walked per second, at most (the walk's read rate).
    rate: float = 2000.0
    #: How long one run may walk before it keeps its cursor for the next.
    budget: timedelta = timedelta(seconds=50)
    #: History records read per job (one page, about one 4 KB read unit).
    records: int = 10
    #: The longest window of due instants one pass covers (a reconciler that was off resumes this far back).
    max_window: timedelta = timedelta(hours=1)
    #: How far back the first pass ever looks.
    first_lookback: timedelta = timedelta(minutes=15)
    #: The most jobs it watches at once (its state stays small).
    max_watched: int = 2000


@dataclass
class ReconcileReport:
    started_at: datetime
    #: Another run held the lease: this one did nothing.
    skipped: bool = False
    #: The pass's window of due instants, (start, end]; None: no pass could start (a segment never scanned).
    window: tuple[datetime, datetime] | None = None
    #: The walk reached the last job in this run (the pass is over).
    pass_done: bool = False
    jobs_walked: int = 0
    walk_pages: int = 0
    #: Rows of the index read (``task_schedule_v2``, PLANNED lanes of done partitions), and the partitions read.
    index_rows: int = 0
    index_partitions: int = 0
    #: Jobs whose newest history was read (one page each), and the records those pages held.
    history_reads: int = 0
    records_read: int = 0
    #: Watched jobs read again this run.
    watched_reads: int = 0
    #: Repairs, by reason (``domain.orphans.Reason``).
    repaired: Counter[str] = field(default_factory=Counter)
    #: Orphans found but left: the job had changed, or the record had appeared, when read again.
    settled_on_reading: int = 0
    #: Jobs it watches after this run, and those it could not watch (``max_watched`` reached).
    watched: int = 0
    unwatched: int = 0
    errors: int = 0

    @property
    def repaired_total(self) -> int:
        return sum(self.repaired.values())
