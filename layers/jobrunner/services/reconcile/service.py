"""The reconciler's service: one run (the lease, the pass, the watched jobs, the repairs) over its ports; the story
of a run is the package's (``services.reconcile``)."""


from __future__ import annotations

import functools
import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import Lane, Trigger
from jobrunner.domain.orphans import MAX_AGE, Evidence, Orphan, Scanned, examine, last_fire_due
from jobrunner.domain.placement import placed_in_time
from jobrunner.domain.time import MINUTE, minute_bucket, rfc3339
from jobrunner.ports import RECONCILER_LEASE, RECONCILER_SEGMENT
from jobrunner.services.reconcile.repairs import replanned, still_lost, wants_history
from jobrunner.services.reconcile.rules import ReconcileReport
from jobrunner.services.reconcile.state import Pass, ReconcilerState, kept_horizons, watch_key

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from jobrunner.domain.jobs import ExecutionRecord, Job, ScheduledExecution
    from jobrunner.ports import Clock, LeaseStore, ReconcilerStateStore
    from jobrunner.services.jobs.changelog import ChangeBook
    from jobrunner.services.reconcile.rules import ReconcileRules, ReconcileStores
    from jobrunner.services.wake import Waker

log = logging.getLogger(__name__)

#: Attempts to write a repair in time for its scan (each placed anew), as the other writers do.
MAX_PLACEMENTS = 5
#: Who the change log names as the author of a repair (and the prefix of the lease's owner).
ACTOR = "reconciler"
#: How long the run's lease outlasts its deadline (its repairs, the save of its state).
LEASE_MARGIN = timedelta(minutes=2)
_MS = timedelta(milliseconds=1)


@dataclass
class _Index:
    """The index rows read for a pass: from bucket ``first`` to ``read_to``, in ``segments`` segments."""

    first: datetime
    segments: int
    read_to: datetime
    rows: set[tuple[str, int]] = field(default_factory=set)


class ReconcileService:
    def __init__(
        self, store: ReconcileStores, leases: LeaseStore, state: ReconcilerStateStore, clock: Clock,
        rules: ReconcileRules, *, changes: ChangeBook, waker: Waker,
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
        state = ReconcilerState.loads(self._state_store.load_reconciler_state())
        segments = max(self._rules.segment_count, self._leases.record_segment_count(self._rules.segment_count))
        scanned = self._scanned(now, segments)
        evidence = Evidence(now, self._rules.grace, scanned, state.earlier, state.repaired, state.sightings)
        run = _Run(self, state, evidence, report, segments)
        if state.pass_ is None:
            state.pass_ = self._new_pass(state, scanned, now)
        if state.pass_ is not None:
            run.walk(state.pass_, deadline)
        run.read_watched()
        state.earlier = kept_horizons(state.earlier, scanned)
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

    def _new_pass(self, state: ReconcilerState, scanned: Scanned, now: datetime) -> Pass | None:
        """The next pass's window: from where the last one ended to where every partition is done (and ``grace``
        before now); None when there is nothing new to look at (or a segment was never scanned)."""
        if scanned.frontier is None:
            return None
        end = min(now - self._rules.grace, scanned.frontier + MINUTE - _MS)
        start = state.examined_to if state.examined_to is not None else end - self._rules.first_lookback
        start = max(start, end - self._rules.max_window)
        return Pass(start, end) if end > start else None

    @staticmethod
    def _forget_old(state: ReconcilerState, now: datetime) -> None:
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

    def repair(self, orphans: Sequence[Orphan], state: ReconcilerState, report: ReconcileReport) -> None:
        """Read each orphan's job and record again, and re-plan those still lost (see the module doc)."""
        if not orphans:
            return
        jobs = self._store.get_jobs(sorted({(o.user_id, o.job_id) for o in orphans}))
        records = self._store.get_records([o.record_key for o in orphans])
        for orphan in orphans:
            job = jobs.get((orphan.user_id, orphan.job_id))
            if job is None or not still_lost(orphan, job, records.get(orphan.record_key)):
                report.settled_on_reading += 1
                continue
            try:
                row = self._write(functools.partial(replanned, orphan, job, segment_count=self._rules.segment_count))
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
            self._waker.wake([row])
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
        self._changes.record(job, "repair", ACTOR, details)

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
        self, service: ReconcileService, state: ReconcilerState, evidence: Evidence, report: ReconcileReport,
        segments: int,
    ) -> None:
        self._service = service
        self._segments = segments
        self._state = state
        self._evidence = evidence
        self._report = report

    def walk(self, window: Pass, deadline: datetime) -> None:
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
            wanted = [job for job in jobs if wants_history(job, last_fire_due(job, window.start, window.end), index)]
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
        key = watch_key(job)
        if recheck_at is None:
            self._state.watch.pop(key, None)
        elif key in self._state.watch or len(self._state.watch) < self._service.rules.max_watched:
            self._state.watch[key] = recheck_at
        else:  # logged once a run (``run``)
            self._report.unwatched += 1
