"""Orphans: executions a job owes that nothing will publish any more, told apart from those merely late.

The reconciler (``services.reconcile``) decides from the job row (the truth), the job's newest history records and
how far the scans have got (the segments' watermarks) whether an execution was lost. It never waits to decide: an
execution is an orphan only once a row of it, written when the evidence says it was, would have been read by a scan
that is done (``Scanned.covers``), and the execution still has no record. Three kinds (``Reason``):

- ``missed_fire``: an active job's next fire (``owed_fire``: the newest fire record's ``next_fire_at``, or the job
  row's ``next_run_at`` when the change of schedule or state is newer than every fire) is due, and it has no record.
  A fire planned by a completion was written before the partition of the fire it follows was done; the earliest
  earlier run that read the watermarks past that partition (``Evidence.earlier``) bounds when, so the row lies in a
  bucket no later than that run's instant. A fire planned by a change or a submit was written before the job row
  was: the first run that sees the job owing it notes the sighting, and the row lies no later than that sighting
  (``WRITE_SLACK`` more for a write placed again).
- ``missed_retry``: a failed execution with a retry planned (its record's ``retry_at``) has no record of its retry
  (same fire, next attempt, same lineage). The retry's row is written before the record that says FAILED, by the
  results function (or the scan's watchdog) within ``WRITE_SLACK`` of the record's ``finished_at``.
- ``stuck_hold``: a fire held by a buffer policy (record SCHEDULED, not published) whose previous execution ended
  long enough ago that the held row, looked at again at most ``HOLD_RECHECK`` later, would have been released.

A repair re-plans the execution under its own ``execution_id`` (consumers deduplicate), so the worst a wrong
decision could cost is one duplicate; the rules above are built so that a late execution (a scan behind, a row
placed late, a job changed meanwhile) is never taken for a lost one, and the reconciler reads the job and the record
again before it writes anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from jobrunner.domain.jobs import ExecutionStatus, JobState, Trigger, due_of, execution_id_for, origin_of
from jobrunner.domain.placement import CLOCK_SKEW, SETTLE
from jobrunner.domain.policies import Overlap
from jobrunner.domain.policy_decisions import HOLD_RECHECK, PreviousState, previous_fire
from jobrunner.domain.schedules import fires_at
from jobrunner.domain.schedules.base import MILLISECOND
from jobrunner.domain.spec import MAX_JITTER_S
from jobrunner.domain.time import from_epoch_ms, minute_bucket, rfc3339, to_epoch_ms

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from jobrunner.domain.jobs import ExecutionRecord, Job

#: How long after the instant that decides it a writer may still write an execution's row: the API's and the results
#: function's longest request (29 s and 60 s), a write placed again because it returned late included.
WRITE_SLACK = timedelta(seconds=90)
#: Executions due longer ago than this are left alone: their records may have expired (a tenant keeps its history
#: two days at least), and the reconciler repairs within minutes anyway.
MAX_AGE = timedelta(days=1)
#: How long an execution in flight (published, no result yet) is left before its job is read again, at most.
MAX_RECHECK = timedelta(minutes=10)


class Reason(StrEnum):
    MISSED_FIRE = "missed_fire"
    MISSED_RETRY = "missed_retry"
    STUCK_HOLD = "stuck_hold"


@dataclass(frozen=True)
class Scanned:
    """How far the scans had got when the heartbeat table was read at ``at``."""

    at: datetime
    #: The last bucket every segment has done or parked (the lowest watermark); None: some segment never scanned.
    frontier: datetime | None
    #: The buckets parked in any segment (not done, retried with backoff).
    parked: frozenset[datetime] = frozenset()

    def covers(self, low: datetime, high: datetime) -> bool:
        """Whether every partition from the bucket of ``low`` to the bucket of ``high`` is done, in every segment: a
        row written there in time was read, and the execution it held was published (or recorded as not run)."""
        if self.frontier is None:
            return False
        first, last = minute_bucket(low), minute_bucket(high)
        return last <= self.frontier and not any(first <= bucket <= last for bucket in self.parked)

    def to_dict(self) -> dict[str, Any]:
        return {"at": to_epoch_ms(self.at), "frontier": to_epoch_ms(self.frontier) if self.frontier else None,
                "parked": sorted(to_epoch_ms(b) for b in self.parked)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scanned:
        frontier = data.get("frontier")
        return cls(from_epoch_ms(int(data["at"])), from_epoch_ms(int(frontier)) if frontier is not None else None,
                   frozenset(from_epoch_ms(int(b)) for b in data.get("parked", ())))


@dataclass(frozen=True)
class Orphan:
    """A lost execution, to re-plan under its own id."""

    reason: Reason
    job_id: str
    user_id: str
    #: Its fire (the record's ``scheduled_at``), attempt, trigger and lineage: its ``execution_id`` follows from them.
    scheduled_at: datetime
    attempt: int
    trigger: Trigger
    origin: Trigger
    execution_id: str
    #: When it was due.
    due_at: datetime
    #: The schedule version it is planned under (the job's when it was found).
    job_version: int
    #: Why it is taken for lost, in words (logged, and kept in the job's change log).
    why: str

    @property
    def record_key(self) -> tuple[str, datetime, int, str]:
        """The key its history record would have (``ports.RecordKey``)."""
        return (self.job_id, self.scheduled_at, self.attempt, self.execution_id)


@dataclass(frozen=True)
class Evidence:
    """What the reconciler knows besides a job and its records."""

    now: datetime
    #: An execution is not looked at before it is this long overdue.
    grace: timedelta
    #: How far the scans had got at the start of this run, and at the start of earlier runs (oldest first).
    scanned: Scanned
    earlier: Sequence[Scanned] = ()
    #: Executions the reconciler re-planned itself, by id, with when (a planning too: their rows are that recent).
    repaired: Mapping[str, datetime] = field(default_factory=dict)
    #: When a fire a change planned was first seen owed and missing (``sighting_key``).
    sightings: Mapping[str, datetime] = field(default_factory=dict)


@dataclass
class Findings:
    orphans: list[Orphan] = field(default_factory=list)
    #: When to read the job again: something is in flight, or a missing execution cannot be told from a late one yet.
    recheck_at: datetime | None = None
    #: First sightings of fires planned by a change (``Evidence.sightings``), to keep for the next run.
    sightings: dict[str, datetime] = field(default_factory=dict)

    def recheck(self, at: datetime) -> None:
        self.recheck_at = at if self.recheck_at is None else min(self.recheck_at, at)


def examine(job: Job, records: Sequence[ExecutionRecord], evidence: Evidence, *, full_page: bool) -> Findings:
    """The orphans of ``job``, given its newest ``records`` in history order (``full_page``: older ones may exist)."""
    findings = Findings()
    if job.state is JobState.CANCELLED:  # nothing is owed: its rows are dropped, its results ignored
        return findings
    _missed_fire(job, records, evidence, findings)
    _missed_retries(job, records, evidence, findings)
    _stuck_holds(job, records, evidence, findings, full_page=full_page)
    return findings


def owed_fire(job: Job, records: Sequence[ExecutionRecord]) -> tuple[datetime, ExecutionRecord | None] | None:
    """The fire an active job owes next, and the record whose completion planned it (None: the job row's change
    or submit did): the ``next_fire_at`` of its newest fire under the current schedule version, else the job row's
    ``next_run_at`` (``domain.jobs.with_runs``'s rule). None when the schedule has no fire left."""
    latest = next((r for r in records if r.trigger is Trigger.SCHEDULE and r.job_version == job.schedule_version),
                  None)
    if latest is not None:
        return (latest.next_fire_at, latest) if latest.next_fire_at is not None else None
    return (job.next_run_at, None) if job.next_run_at is not None else None


def last_fire_due(job: Job, start: datetime, end: datetime, most: int = 10_000) -> datetime | None:
    """The latest fire of an active job's current schedule (from the job row's ``next_run_at``, where its schedule
    version starts) whose execution is due in (``start``, ``end``]; None when there is none. A pure function of the
    job row: it tells, without a read, whether the job fired in a window."""
    if job.state is not JobState.ACTIVE or job.next_run_at is None:
        return None
    jitter = timedelta(seconds=job.spec.jitter_s or 0)
    instant = job.spec.schedule.next_fire_after(max(job.next_run_at - MILLISECOND, start - jitter))
    last = None
    for _ in range(most):
        if instant is None or instant > end:
            break
        if start < due_of(job, instant) <= end:
            last = instant
        instant = job.spec.schedule.next_fire_after(instant)
    return last


def sighting_key(job: Job, fire: datetime) -> str:
    return f"{job.job_id}|{job.schedule_version}|{to_epoch_ms(fire)}"


def _later(since: datetime, now: datetime) -> datetime:
    """When to look again at something in flight since ``since``: after a quarter of the time it has been in
    flight, at least a minute, at most ``MAX_RECHECK`` (a long run costs few reads)."""
    return now + min(MAX_RECHECK, max(timedelta(minutes=1), (now - since) / 4))


def _planned_by(repaired: Mapping[str, datetime], execution_id: str, planned: datetime) -> datetime:
    """The latest instant the execution's row can have been written: ``planned``, or the reconciler's own repair."""
    return max(planned, repaired.get(execution_id, planned))


def _missed_fire(job: Job, records: Sequence[ExecutionRecord], evidence: Evidence, findings: Findings) -> None:
    if job.state is not JobState.ACTIVE:
        return
    owed = owed_fire(job, records)
    if owed is None:
        return
    fire, source = owed
    due = due_of(job, fire)
    execution_id = execution_id_for(job.job_id, fire, 1, Trigger.SCHEDULE)
    if (due > evidence.now - evidence.grace or due < evidence.now - MAX_AGE or not fires_at(job.spec.schedule, fire)
            or any(r.execution_id == execution_id for r in records)):
        return
    if source is not None:  # written by the completion of ``source``'s fire, before its partition was done
        done_by = next((s.at for s in evidence.earlier if s.covers(source.scheduled_at, source.due_at + SETTLE)), None)
        if done_by is None:
            findings.recheck(evidence.now)  # not known done at an earlier run: ask again next run
            return
        planned, how = done_by, f"planned after the fire at {rfc3339(source.scheduled_at)}"
    else:  # written by the change (or submit) the job row holds, before the row itself
        key = sighting_key(job, fire)
        seen = evidence.sightings.get(key)
        if seen is None:
            findings.sightings[key] = evidence.scanned.at
            findings.recheck(evidence.now)
            return
        findings.sightings[key] = seen
        planned, how = seen + WRITE_SLACK, f"planned by the job's version {job.schedule_version}"
    planned = _planned_by(evidence.repaired, execution_id, planned)
    if not evidence.scanned.covers(fire, max(_latest_due(job, fire, source), planned + SETTLE + CLOCK_SKEW)):
        findings.recheck(evidence.now)
        return
    findings.orphans.append(Orphan(
        Reason.MISSED_FIRE, job.job_id, job.user_id, fire, 1, Trigger.SCHEDULE, Trigger.SCHEDULE, execution_id, due,
        job.schedule_version, f"fire due {rfc3339(due)} ({how}) has no row left and no record, and every partition "
                              f"its row could be in has been scanned"))


def _latest_due(job: Job, fire: datetime, source: ExecutionRecord | None) -> datetime:
    """The latest instant the fire's row can be keyed at: its due instant, unless a change of the job's settings (its
    jitter among them) landed after the row was planned, which may have planned it within another jitter window."""
    changed_since = job.version != job.schedule_version and (
        source is None or job.updated_at >= (source.published_at or source.due_at))
    return fire + timedelta(seconds=MAX_JITTER_S) if changed_since else due_of(job, fire)


def _missed_retries(job: Job, records: Sequence[ExecutionRecord], evidence: Evidence, findings: Findings) -> None:
    recorded = {(r.scheduled_at, r.attempt, r.execution_id) for r in records}
    for failed in records:
        if failed.status is ExecutionStatus.RUNNING and failed.attempt <= job.spec.retry.max_retries:
            findings.recheck(_later(failed.published_at or failed.due_at, evidence.now))  # it may fail, and retry
        if failed.status is not ExecutionStatus.FAILED or failed.retry_at is None:
            continue
        origin, attempt = origin_of(failed), failed.attempt + 1
        execution_id = execution_id_for(job.job_id, failed.scheduled_at, attempt, Trigger.RETRY, origin)
        due = failed.retry_at
        if (failed.scheduled_at, attempt, execution_id) in recorded or due < evidence.now - MAX_AGE:
            continue
        if due > evidence.now - evidence.grace:
            findings.recheck(due + evidence.grace)
            continue
        planned = _planned_by(evidence.repaired, execution_id, (failed.finished_at or due) + WRITE_SLACK)
        if not evidence.scanned.covers(due, max(due, planned + SETTLE + CLOCK_SKEW)):
            findings.recheck(evidence.now)
            continue
        findings.orphans.append(Orphan(
            Reason.MISSED_RETRY, job.job_id, job.user_id, failed.scheduled_at, attempt, Trigger.RETRY, origin,
            execution_id, due, job.schedule_version,
            f"retry {attempt} of the fire at {rfc3339(failed.scheduled_at)} due {rfc3339(due)} has no row left and no "
            f"record, and every partition its row could be in has been scanned"))


def _stuck_holds(
    job: Job, records: Sequence[ExecutionRecord], evidence: Evidence, findings: Findings, *, full_page: bool
) -> None:
    if job.state is not JobState.ACTIVE or job.spec.overlap not in (Overlap.BUFFER_ONE, Overlap.BUFFER_ALL):
        return
    version = job.schedule_version
    held = sorted((r for r in records if r.trigger is Trigger.SCHEDULE and r.attempt == 1 and r.published_at is None
                   and r.status is ExecutionStatus.SCHEDULED and r.job_version == version),
                  key=lambda r: r.scheduled_at)
    for hold in held[:1]:  # the oldest: the others wait behind it (buffer_all)
        previous = previous_fire(records, hold.scheduled_at, version, more=full_page)
        if isinstance(previous, datetime) or previous.state is PreviousState.HELD:
            return  # its previous is beyond the page read, or held itself
        if previous.state is PreviousState.RUNNING:
            findings.recheck(_later(hold.due_at, evidence.now))
            return
        ended = _ended_at(job, records, previous.at)
        if ended is None:
            return
        released_by = ended + HOLD_RECHECK[1]
        if released_by > evidence.now - evidence.grace:
            findings.recheck(released_by + evidence.grace)
            return
        execution_id = hold.execution_id
        planned = _planned_by(evidence.repaired, execution_id, released_by + WRITE_SLACK)
        if not evidence.scanned.covers(hold.scheduled_at, planned + SETTLE + CLOCK_SKEW):
            findings.recheck(evidence.now)
            return
        findings.orphans.append(Orphan(
            Reason.STUCK_HOLD, job.job_id, job.user_id, hold.scheduled_at, 1, Trigger.SCHEDULE, Trigger.SCHEDULE,
            execution_id, hold.due_at, version,
            f"fire held since {rfc3339(hold.due_at)} was not released, though the execution before it ended at "
            f"{rfc3339(ended)}"))


def _ended_at(job: Job, records: Sequence[ExecutionRecord], at: datetime | None) -> datetime | None:
    """When the schedule's execution of fire ``at`` ended: its latest attempt's end; a hold a change dropped, at
    the job row's last change; None when its records do not say (no record of it in the page)."""
    if at is None:
        return None
    mine = sorted((r for r in records if r.scheduled_at == at and origin_of(r) is Trigger.SCHEDULE),
                  key=lambda r: r.attempt, reverse=True)
    if not mine:
        return None
    latest = mine[0]
    if latest.finished_at is not None:
        return latest.finished_at
    if latest.status is ExecutionStatus.SCHEDULED and latest.job_version != job.schedule_version:
        return job.updated_at
    return None
