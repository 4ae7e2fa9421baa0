"""The reconciler: the safety net that walks the jobs and re-plans every execution it finds lost.

The job row is the truth and the scheduled rows (``task_schedule_v2``) an index of it: a row that is lost (never
written, written where no scan reads it, removed by mistake) loses its execution, and a recurring job's every later
fire with it. The reconciler finds such orphans (``domain.orphans``: a missed fire, a missed retry, a hold nothing
will release) and re-plans each under its own ``execution_id``, placed as of now, as any writer would (so a consumer
deduplicates a copy). In a healthy system it repairs nothing: each repair is logged with its job, fire and reason,
written to the job's change log (action ``repair``; the firing ledger shows the fire ``repaired``), and counted
(``Reconciled``, alarmed): a bug report.

One run (``run``, every ``ReconcileRules.interval``, in a function and with a concurrency of its own):
1. Reads the segments' watermarks (``domain.orphans.Scanned``): the horizon. The pass's window ends where every
   partition is done (and ``grace`` before now), and starts where the last pass ended.
2. Reads the PLANNED lane of every done partition of the window (pages, ``stale_ok``): the rows that were there.
3. Walks the jobs (``JobStore.walk_jobs``: pages at ``LOCAL_ONE``, at most ``rate`` rows a second, until the run's
   deadline; the cursor is kept for the next run). For each job, its schedule says without a read whether a fire
   fell due in the window (``domain.orphans.last_fire_due``); only when that fire's row was not among those read, or
   the job has retries or a buffer policy, is its newest history read (one page, ``stale_ok``) and examined.
4. Reads again, then examines, the jobs it watches: those with an execution in flight, or an execution it could not
   yet tell lost from late (the evidence it needs comes with a later run).
5. Before it writes, reads each orphan's job and record again (``LOCAL_QUORUM``): a job changed meanwhile, or a
   record that has appeared, means there is nothing to repair.
Its state (the pass's window and cursor, the previous run's horizon, what it watches) is one item of the heartbeat
table (``ports.ReconcilerStateStore``), so a stateless function resumes where the last run stopped.
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from jobrunner.domain.changes import JobChange
from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import JobState, Lane, Trigger, execution_id_for
from jobrunner.domain.orphans import MAX_AGE, Evidence, Orphan, Reason, Scanned, examine, last_fire_due
from jobrunner.domain.placement import placed_in_time, plan_execution
from jobrunner.domain.policies import Overlap
from jobrunner.domain.time import MINUTE, from_epoch_ms, minute_bucket, rfc3339, to_epoch_ms
from jobrunner.ports import (
    RECONCILER_LEASE,
    RECONCILER_SEGMENT,
    HistoryStore,
    JobStore,
    ScheduledRowStore,
)
from jobrunner.services.wake import wake

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from jobrunner.domain.jobs import ExecutionRecord, Job, ScheduledExecution
    from jobrunner.ports import ChangeLog, Clock, LeaseStore, ReconcilerStateStore
    from jobrunner.services.wake import ScanWaker

log = logging.getLogger(__name__)

#: Attempts to write a repair in time for its scan (each placed anew), as the other writers do.
MAX_PLACEMENTS = 5
#: Who the change log names as the author of a repair (and the prefix of the lease's owner).
ACTOR = "reconciler"
#: How long the run's lease outlasts its deadline (its repairs, the save of its state).
LEASE_MARGIN = timedelta(minutes=2)
_MS = timedelta(milliseconds=1)


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


@dataclass
class _Index:
    """The index rows read for a pass: from bucket ``first`` to ``read_to``, in ``segments`` segments."""

    first: datetime
    segments: int
    read_to: datetime
    rows: set[tuple[str, int]] = field(default_factory=set)


@dataclass
class _Pass:
    start: datetime
    end: datetime
    cursor: str | None = None


@dataclass
class _State:
    """The reconciler's progress, kept between runs (``ports.ReconcilerStateStore``), as JSON."""

    pass_: _Pass | None = None
    #: Where the last pass's window ended: the next one starts there.
    examined_to: datetime | None = None
    #: The horizons read at the start of earlier runs, oldest first (``HORIZONS`` of them, ``HORIZON_SPACING`` apart).
    earlier: list[Scanned] = field(default_factory=list)
    #: Jobs to read again, "user_id|job_id" -> when.
    watch: dict[str, datetime] = field(default_factory=dict)
    sightings: dict[str, datetime] = field(default_factory=dict)
    #: Executions this reconciler re-planned, by id -> when.
    repaired: dict[str, datetime] = field(default_factory=dict)

    def dumps(self) -> str:
        def ms(values: dict[str, datetime]) -> dict[str, int]:
            return {key: to_epoch_ms(value) for key, value in values.items()}

        data: dict[str, Any] = {
            "v": 1, "examined_to": to_epoch_ms(self.examined_to) if self.examined_to else None,
            "earlier": [scanned.to_dict() for scanned in self.earlier],
            "watch": ms(self.watch), "sightings": ms(self.sightings), "repaired": ms(self.repaired),
            "pass": None if self.pass_ is None else {"start": to_epoch_ms(self.pass_.start),
                                                     "end": to_epoch_ms(self.pass_.end), "cursor": self.pass_.cursor},
        }
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def loads(cls, text: str | None) -> _State:
        if not text:
            return cls()
        data = json.loads(text)

        def instants(values: dict[str, int] | None) -> dict[str, datetime]:
            return {key: from_epoch_ms(int(value)) for key, value in (values or {}).items()}

        raw = data.get("pass")
        window = None if raw is None else _Pass(from_epoch_ms(raw["start"]), from_epoch_ms(raw["end"]), raw["cursor"])
        examined = data.get("examined_to")
        return cls(window, from_epoch_ms(examined) if examined is not None else None,
                   [Scanned.from_dict(scanned) for scanned in data.get("earlier") or ()],
                   instants(data.get("watch")), instants(data.get("sightings")), instants(data.get("repaired")))


#: Horizons kept from earlier runs, at least ``HORIZON_SPACING`` apart: an execution planned by a completion is decided
#: once the earliest of them that saw its partition done is behind the scans (about 8 to 16 minutes of them).
HORIZONS = 16
HORIZON_SPACING = timedelta(seconds=30)
#: A horizon with more parked partitions than this is kept without them, and unusable (its state would grow too big).
MAX_PARKED_KEPT = 200


def _kept_horizons(earlier: list[Scanned], scanned: Scanned) -> list[Scanned]:
    """``earlier`` with this run's horizon after them (unless the last is less than ``HORIZON_SPACING`` older), the
    ``HORIZONS`` newest."""
    if len(scanned.parked) > MAX_PARKED_KEPT:
        scanned = Scanned(scanned.at, None)
    if earlier and scanned.at - earlier[-1].at < HORIZON_SPACING:
        return earlier
    return [*earlier, scanned][-HORIZONS:]


def _watch_key(job: Job) -> str:
    return f"{job.user_id}|{job.job_id}"


class ReconcileService:
    def __init__(
        self, store: ReconcileStores, leases: LeaseStore, state: ReconcilerStateStore, clock: Clock,
        rules: ReconcileRules, *, changes: ChangeLog | None = None, waker: ScanWaker | None = None,
    ) -> None:
        self._store = store
        self._leases = leases
        self._state_store = state
        self._clock = clock
        self._rules = rules
        #: Each repair is written to its job's change log (the firing ledger shows the fire repaired).
        self._changes = changes
        #: Wakes the scan of a partition a repair is written to (``services.wake``).
        self._waker = waker
        #: The rows of the index read for the pass under way (a pass may span runs).
        self._index: _Index | None = None

    def run(self, deadline: datetime | None = None) -> ReconcileReport:
        """One run: go on with the pass (or start one), then the watched jobs; keep the state. ``deadline``: when to
        stop walking (default ``budget`` from now). A run that finds another one running (its lease held: an event
        delivered twice) does nothing."""
        now = self._clock.now()
        deadline = deadline or now + self._rules.budget
        report = ReconcileReport(started_at=now)
        owner = f"{ACTOR}:{uuid.uuid4()}"
        ttl = (deadline - now + LEASE_MARGIN).total_seconds()
        if not self._leases.acquire(RECONCILER_SEGMENT, RECONCILER_LEASE, owner, now, ttl):
            report.skipped = True
            log.info("another reconciler run holds the lease; this one does nothing")
            return report
        try:
            self._run(now, deadline, report)
        finally:
            self._leases.release(RECONCILER_SEGMENT, RECONCILER_LEASE, owner, self._clock.now())
        return report

    def _run(self, now: datetime, deadline: datetime, report: ReconcileReport) -> None:
        state = _State.loads(self._state_store.load_reconciler_state())
        segments = max(self._rules.segment_count, self._leases.record_segment_count(self._rules.segment_count))
        scanned = self._scanned(now, segments)
        evidence = Evidence(now, self._rules.grace, scanned, state.earlier, state.repaired, state.sightings)
        run = _Run(self, state, evidence, report, segments)
        if state.pass_ is None:
            state.pass_ = self._new_pass(state, scanned, now)
        if state.pass_ is not None:
            run.walk(state.pass_, deadline)
        run.read_watched()
        state.earlier = _kept_horizons(state.earlier, scanned)
        self._forget_old(state, now)
        report.watched = len(state.watch)
        if report.unwatched:
            log.warning("%d jobs with something in flight not watched: %d watched already", report.unwatched,
                        len(state.watch))
        self._state_store.save_reconciler_state(state.dumps())

    def _scanned(self, now: datetime, highest: int) -> Scanned:
        """How far every segment's scans have got (each segment below the highest count on record)."""
        states = self._leases.segments(range(highest))
        watermarks = [s.watermark for s in states]
        frontier = None if len(states) < highest or None in watermarks else min(w for w in watermarks if w)
        parked = frozenset(bucket for s in states for bucket in s.parked)
        return Scanned(now, frontier, parked)

    def _new_pass(self, state: _State, scanned: Scanned, now: datetime) -> _Pass | None:
        """The next pass's window: from where the last one ended to where every partition is done (and ``grace``
        before now); None when there is nothing new to look at (or a segment was never scanned)."""
        if scanned.frontier is None:
            return None
        end = min(now - self._rules.grace, scanned.frontier + MINUTE - _MS)
        start = state.examined_to if state.examined_to is not None else end - self._rules.first_lookback
        start = max(start, end - self._rules.max_window)
        return _Pass(start, end) if end > start else None

    @staticmethod
    def _forget_old(state: _State, now: datetime) -> None:
        for book in (state.sightings, state.repaired):
            for key in [k for k, at in book.items() if at < now - MAX_AGE]:
                del book[key]

    # -- what a run reads ---------------------------------------------------------------------------------------

    def index(self, start: datetime, scanned: Scanned, segments: int, report: ReconcileReport) -> set[tuple[str, int]]:
        """(execution_id, schedule version) of every scheduled fire's row in the PLANNED lanes of the done partitions
        from the bucket of ``start`` on, in ``segments`` segments (a row a scan settled is kept there until it
        expires). A done partition's planned rows do not change, so the next run of the same pass (in the same warm
        environment) reads only the partitions done since."""
        first = minute_bucket(start)
        cached = self._index
        if cached is None or cached.first != first or cached.segments != segments:
            cached = self._index = _Index(first, segments, first - MINUTE)
        found = cached.rows
        if scanned.frontier is None:
            return found
        bucket = cached.read_to + MINUTE
        cached.read_to = max(cached.read_to, scanned.frontier)
        while bucket <= scanned.frontier:
            for segment in range(segments):
                report.index_partitions += 1
                for row in self._store.lane_rows(bucket, segment, Lane.PLANNED, stale_ok=True):
                    report.index_rows += 1
                    if row.trigger is Trigger.SCHEDULE:
                        found.add((row.execution_id, row.job_version))
            bucket += MINUTE
        return found

    def history(self, jobs: Sequence[Job], report: ReconcileReport) -> dict[str, list[ExecutionRecord]]:
        if not jobs:
            return {}
        pages = self._store.latest_records([job.job_id for job in jobs], self._rules.records, stale_ok=True)
        report.history_reads += len(jobs)
        report.records_read += sum(len(page) for page in pages.values())
        return pages

    # -- repairs ------------------------------------------------------------------------------------------------

    def repair(self, orphans: Sequence[Orphan], state: _State, report: ReconcileReport) -> None:
        """Read each orphan's job and record again, and re-plan those still lost (see the module doc)."""
        if not orphans:
            return
        jobs = self._store.get_jobs(sorted({(o.user_id, o.job_id) for o in orphans}))
        records = self._store.get_records([o.record_key for o in orphans])
        for orphan in orphans:
            job = jobs.get((orphan.user_id, orphan.job_id))
            if job is None or not _still_lost(orphan, job, records.get(orphan.record_key)):
                report.settled_on_reading += 1
                continue
            try:
                row = self._write(functools.partial(_replanned, orphan, job, segment_count=self._rules.segment_count))
            except Unavailable as exc:
                report.errors += 1
                log.warning("repair of %s could not be written: %s", orphan.execution_id, exc,
                            extra={"job_id": orphan.job_id})
                continue
            state.repaired[orphan.execution_id] = self._clock.now()
            report.repaired[orphan.reason.value] += 1
            self._record(orphan, job, row)

    def _write(self, plan: Callable[[datetime], ScheduledExecution]) -> ScheduledExecution:
        """Write ``plan(now)`` until a write returns in time for its scan (``domain.placement``), waking the scan."""
        for _ in range(MAX_PLACEMENTS):
            placed_at = self._clock.now()
            row = plan(placed_at)
            self._store.write_scheduled([row])
            returned = self._clock.now()
            wake(self._waker, [row])
            if placed_in_time([row], placed_at, returned):
                return row
        raise Unavailable("the database keeps answering too slowly for the scans")

    def _record(self, orphan: Orphan, job: Job, row: ScheduledExecution) -> None:
        """Log the repair with its job, fire and reason, and keep it in the job's change log (best effort)."""
        details = {"reason": orphan.reason.value, "fire": rfc3339(orphan.scheduled_at), "attempt": orphan.attempt,
                   "trigger": orphan.trigger.value, "execution_id": orphan.execution_id, "why": orphan.why,
                   "due_at": rfc3339(row.due_at)}
        log.warning("execution repaired (%s): %s", orphan.reason.value, orphan.why,
                    extra={"job_id": orphan.job_id, "execution_id": orphan.execution_id,
                           "fire": rfc3339(orphan.scheduled_at), "attempt": orphan.attempt,
                           "reason": orphan.reason.value})
        if self._changes is None:
            return
        entry = JobChange(job_id=job.job_id, user_id=job.user_id, changed_at=self._clock.now(),
                          change_id=str(uuid.uuid4()), actor=ACTOR, action="repair", version=job.version,
                          details=details)
        try:
            self._changes.record(entry)
        except Unavailable as exc:
            log.warning("change log unavailable, repair of %s not logged: %s", orphan.execution_id, exc)

    @property
    def rules(self) -> ReconcileRules:
        return self._rules

    @property
    def store(self) -> ReconcileStores:
        return self._store

    @property
    def clock(self) -> Clock:
        return self._clock


class _Run:
    """One run's walk and watch list, over the service's ports."""

    def __init__(
        self, service: ReconcileService, state: _State, evidence: Evidence, report: ReconcileReport, segments: int
    ) -> None:
        self._service = service
        self._segments = segments
        self._state = state
        self._evidence = evidence
        self._report = report

    def walk(self, window: _Pass, deadline: datetime) -> None:
        """Go on with the pass from its cursor, a page at a time, at most ``rate`` jobs a second, until its end or
        ``deadline``; at its end, the next pass starts where this one's window ended."""
        service, report, rules = self._service, self._report, self._service.rules
        report.window = (window.start, window.end)
        index = service.index(window.start, self._evidence.scanned, self._segments, report)
        began = service.clock.now()
        while service.clock.now() < deadline:
            jobs, window.cursor = service.store.walk_jobs(window.cursor, rules.page_size)
            report.walk_pages += 1
            report.jobs_walked += len(jobs)
            wanted = [job for job in jobs if _wants_history(job, last_fire_due(job, window.start, window.end), index)]
            self._examine(wanted, service.history(wanted, report))
            if window.cursor is None:
                self._state.examined_to, self._state.pass_ = window.end, None
                report.pass_done = True
                return
            service.clock.sleep_until(began + timedelta(seconds=report.jobs_walked / rules.rate))

    def read_watched(self) -> None:
        """Read again the watched jobs that are due (at most a page of them a run) and examine them."""
        due = sorted((at, key) for key, at in self._state.watch.items() if at <= self._evidence.now)
        keys = [tuple(key.split("|", 1)) for _, key in due[: self._service.rules.page_size]]
        if not keys:
            return
        store = self._service.store
        found = store.get_jobs([(user_id, job_id) for user_id, job_id in keys])
        for user_id, job_id in keys:
            if (user_id, job_id) not in found:
                self._state.watch.pop(f"{user_id}|{job_id}", None)
        jobs = list(found.values())
        self._report.watched_reads += len(jobs)
        self._examine(jobs, self._service.history(jobs, self._report))

    def _examine(self, jobs: Iterable[Job], pages: dict[str, list[ExecutionRecord]]) -> None:
        orphans: list[Orphan] = []
        full = self._service.rules.records
        for job in jobs:
            records = pages.get(job.job_id, [])
            findings = examine(job, records, self._evidence, full_page=len(records) >= full)
            orphans += findings.orphans
            self._state.sightings.update(findings.sightings)
            self._watch(job, findings.recheck_at)
        self._service.repair(orphans, self._state, self._report)

    def _watch(self, job: Job, recheck_at: datetime | None) -> None:
        key = _watch_key(job)
        if recheck_at is None:
            self._state.watch.pop(key, None)
        elif key in self._state.watch or len(self._state.watch) < self._service.rules.max_watched:
            self._state.watch[key] = recheck_at
        else:  # logged once a run (``run``)
            self._report.unwatched += 1


def _wants_history(job: Job, last_fire: datetime | None, index: set[tuple[str, int]]) -> bool:
    """Whether a job with a fire due in the window (its last, ``last_fire``) needs its history read: when that fire's
    row was not found among the done partitions' rows (a row of the late lane, or a lost one), or when it has
    retries or a buffer policy (executions that may fail or wait after their fire)."""
    if last_fire is None:
        return False
    if job.retry.max_retries > 0 or job.overlap in (Overlap.BUFFER_ONE, Overlap.BUFFER_ALL):
        return True
    return (execution_id_for(job.job_id, last_fire, 1, Trigger.SCHEDULE), job.schedule_version) not in index


def _still_lost(orphan: Orphan, job: Job, record: ExecutionRecord | None) -> bool:
    """Whether ``orphan``, read again with its job (``job``) and its record, is still to repair."""
    if orphan.reason is Reason.MISSED_RETRY:
        return record is None and job.state is not JobState.CANCELLED
    if job.state is not JobState.ACTIVE or job.schedule_version != orphan.job_version:
        return False  # changed since: the change planned what it wants
    if orphan.reason is Reason.STUCK_HOLD:
        return record is not None and record.published_at is None
    return record is None


def _replanned(orphan: Orphan, job: Job, now: datetime, *, segment_count: int) -> ScheduledExecution:
    """The orphan's row again, under its own id, placed as of ``now``."""
    if orphan.reason is Reason.MISSED_RETRY:
        row = plan_execution(job, orphan.due_at, now, segment_count, trigger=Trigger.RETRY, attempt=orphan.attempt,
                             scheduled_at=orphan.scheduled_at, origin=orphan.origin)
    elif orphan.reason is Reason.STUCK_HOLD:  # held: let the scan decide again, at once
        row = replace(plan_execution(job, now, now, segment_count, trigger=Trigger.SCHEDULE,
                                     scheduled_at=orphan.scheduled_at), job_version=orphan.job_version)
    else:
        row = plan_execution(job, orphan.scheduled_at, now, segment_count, trigger=Trigger.SCHEDULE)
    assert row.execution_id == orphan.execution_id, (row, orphan)
    return row
