"""The firing ledger: every fire a job's schedule called for in a range, and what became of it.

It is computed, never stored: from the job (its current schedule, state and jitter), its change log
(the schedules it had and when, its pauses and resumes, its cancel: ``timeline_of``) and its history
records of the range (``ledger``). A fire is one instant of the schedule in effect at that instant; its
outcome comes from the records of that instant first (what the scan wrote), then from the timeline (a
pause, a cancel, a change of schedule that came before it was published), then from the clock (still to
come, due now, older than the history kept). A past fire that none of them explains is ``missing``: the
ledger says so instead of guessing, so "did everything fire exactly once?" has a checked answer.

Records are the schedule lineage's (``Trigger.SCHEDULE`` and its retries and watchdogs), a backfill's
(``Trigger.BACKFILL``) and a run now's at the same instant; a run now is not a fire of the schedule.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.jobs import ExecutionStatus, JobState, Trigger, due_of, origin_of
from jobrunner.domain.policies import MISFIRE_GRACE, Overlap, SkipReason
from jobrunner.domain.policy_decisions import skip_reason_of
from jobrunner.domain.schedules import Cron, parse_instant, schedule_from_dict
from jobrunner.domain.schedules.base import MILLISECOND
from jobrunner.domain.time import rfc3339

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from jobrunner.domain.changes import JobChange
    from jobrunner.domain.jobs import ExecutionRecord, Job
    from jobrunner.domain.schedules import Schedule

#: The most fires one page of the ledger holds, and the widest range one request may cover.
MAX_FIRES_PER_PAGE = 500
MAX_RANGE = timedelta(days=31)


class FireOutcome(StrEnum):
    """What became of one fire."""

    #: Published within ``MISFIRE_GRACE`` of its due instant.
    PUBLISHED = "published"
    #: Missed (published more than ``MISFIRE_GRACE`` after its due instant: after an outage, a scan that
    #: died, or a resume with catch-up), then published.
    CAUGHT_UP = "caught_up"
    #: Not run: its job's previous execution had not reported, and the overlap policy says skip.
    SKIPPED = "skipped"
    #: Held by the overlap policy (``buffer_one``, ``buffer_all``) until the previous execution reports.
    HELD = "held"
    #: Missed, and outside the job's catch-up window: not run.
    DROPPED = "dropped"
    #: Not run: a date the job's calendar excludes.
    EXCLUDED = "excluded"
    #: Not published: the job was paused (and not resumed with catch-up) before its due instant.
    PAUSED = "paused"
    #: Not published: the job was cancelled before its due instant.
    CANCELLED = "cancelled"
    #: Not published: the job's schedule was changed before its due instant.
    REPLACED = "replaced"
    #: Not run by the schedule, but run since by a backfill.
    BACKFILLED = "backfilled"
    #: Lost (its row, or a retry's, or its held row, was gone), found by the reconciler and re-planned under its own
    #: execution id: published since, or due again. A bug report (the ``Reconciled`` alarm).
    REPAIRED = "repaired"
    #: Due, and not published yet (within ``MISFIRE_GRACE`` of its due instant).
    DUE = "due"
    #: Still to come.
    UPCOMING = "upcoming"
    #: Older than the history kept (the tenant's ``history_days``): what became of it is no longer known.
    EXPIRED = "expired"
    #: Past, and nothing explains it: no execution is recorded, and no pause, cancel or change came first.
    MISSING = "missing"


_SKIPS = {SkipReason.OVERLAP: FireOutcome.SKIPPED, SkipReason.CATCH_UP: FireOutcome.DROPPED,
          SkipReason.CALENDAR: FireOutcome.EXCLUDED}


@dataclass(frozen=True)
class Epoch:
    """A schedule the job had, from ``since`` until ``until`` (None: still in effect). ``schedule`` is None
    when the change log does not say which one it was (an entry written before it recorded schedules)."""

    schedule: Schedule | None
    since: datetime
    until: datetime | None = None


@dataclass(frozen=True)
class Pause:
    start: datetime
    end: datetime | None = None
    #: Resumed with catch-up: the fires since the pause were owed again.
    catch_up: bool = False


@dataclass(frozen=True)
class Repair:
    """An execution of a fire the reconciler found lost and re-planned (a ``repair`` entry of the change log)."""

    fire: datetime
    at: datetime
    reason: str
    attempt: int = 1


@dataclass(frozen=True)
class Timeline:
    """What the change log (and the job as it stands) says about a job over its life."""

    epochs: tuple[Epoch, ...]
    pauses: tuple[Pause, ...] = ()
    cancelled_at: datetime | None = None
    notes: tuple[str, ...] = ()
    repairs: tuple[Repair, ...] = ()


@dataclass(frozen=True)
class FireExecution:
    execution_id: str
    trigger: Trigger
    attempt: int
    status: ExecutionStatus
    published_at: datetime | None


@dataclass(frozen=True)
class Fire:
    """One fire and what became of it."""

    at: datetime
    #: When its execution was due (the fire, or within its jitter window).
    due_at: datetime
    outcome: FireOutcome
    #: Words for a person: why, or what (a skip's reason, the calendar that excluded it, ...).
    detail: str | None = None
    #: Published - due, for a fire the schedule published.
    lateness_ms: float | None = None
    #: What a daylight-saving change did to it (moved, merged, the first or second of a repeated time).
    dst: str | None = None
    #: Its executions, of every lineage (the schedule's, a backfill's, a run now at that instant).
    executions: tuple[FireExecution, ...] = ()


@dataclass(frozen=True)
class LedgerPage:
    fires: list[Fire]
    #: The last fire of this page, when more fires follow in the range (the next page starts after it).
    more_after: datetime | None
    notes: tuple[str, ...] = ()
    summary: dict[str, int] = field(default_factory=dict)

    @property
    def unaccounted(self) -> int:
        return self.summary.get(FireOutcome.MISSING.value, 0)


def timeline_of(job: Job, changes: Sequence[JobChange], complete: bool = True) -> Timeline:
    """The job's schedules, pauses and cancel, from its change log (any order); ``complete``: the log was read
    back to its first entry. Where the log lacks what the job itself shows (a log turned off, an entry that
    could not be written), the job's own fields stand in: its schedule, ``paused_at``, a cancel at its
    ``updated_at``."""
    entries = sorted(changes, key=lambda c: (c.changed_at, c.version))
    notes: list[str] = []
    if not complete:
        notes.append("the change log was read back to " + (rfc3339(entries[0].changed_at) if entries else "now")
                     + " only: earlier changes are not taken into account")
    epochs = _epochs(job, entries, notes)
    pauses, cancelled_at = _pauses_and_cancel(job, entries)
    return Timeline(tuple(epochs), tuple(pauses), cancelled_at, tuple(notes), tuple(_repairs(entries)))


def _repairs(entries: Sequence[JobChange]) -> list[Repair]:
    """The reconciler's repairs in the log (an entry whose fire this code cannot read is left out)."""
    repairs = []
    for change in entries:
        if change.action != "repair":
            continue
        try:
            fire = parse_instant(change.details.get("fire"), "fire")
        except InvalidField:
            continue
        repairs.append(Repair(fire, change.changed_at, str(change.details.get("reason", "")),
                              int(change.details.get("attempt", 1))))
    return repairs


def _epochs(job: Job, entries: Sequence[JobChange], notes: list[str]) -> list[Epoch]:
    """The schedule in effect from each submit or schedule patch on (None where the log does not hold it, with a
    note), the last one the job's own; the job's schedule from its creation when the log has none."""
    schedules = [c for c in entries if c.action == "submit" or (c.action == "patch" and "schedule" in c.details.get(
        "fields", ()))]
    epochs: list[Epoch] = []
    for index, change in enumerate(schedules):
        spec = change.details.get("schedule")
        last = index == len(schedules) - 1
        schedule = job.spec.schedule if last else _schedule_or_none(spec)
        since = job.created_at if change.action == "submit" else change.changed_at
        if epochs:
            epochs[-1] = Epoch(epochs[-1].schedule, epochs[-1].since, since)
        elif change.action != "submit":
            epochs.append(Epoch(None, job.created_at, since))
        epochs.append(Epoch(schedule, since))
        if schedule is None:
            notes.append(f"the schedule in effect from {rfc3339(since)} is not in the change log: only its "
                         "executions are listed")
    if not epochs:
        epochs.append(Epoch(job.spec.schedule, job.created_at))
    return epochs


def _pauses_and_cancel(job: Job, entries: Sequence[JobChange]) -> tuple[list[Pause], datetime | None]:
    """The pauses (with their resumes) and the cancel in the log, and those the job shows that the log lacks."""
    pauses: list[Pause] = []
    cancelled_at = None
    for change in entries:
        if change.action == "pause" and (not pauses or pauses[-1].end is not None):
            pauses.append(Pause(change.changed_at))
        elif change.action == "resume" and pauses and pauses[-1].end is None:
            pauses[-1] = Pause(pauses[-1].start, change.changed_at, bool(change.details.get("catch_up")))
        elif change.action == "cancel" and cancelled_at is None:
            cancelled_at = change.changed_at
    if job.state is JobState.PAUSED and (not pauses or pauses[-1].end is not None) and job.paused_at is not None:
        pauses.append(Pause(job.paused_at))
    if job.state is JobState.CANCELLED and cancelled_at is None:
        cancelled_at = job.updated_at
    return pauses, cancelled_at


def _schedule_or_none(spec: Any) -> Schedule | None:
    if not isinstance(spec, dict):
        return None
    try:
        return schedule_from_dict(spec)
    except (InvalidField, ValueError, KeyError):  # a spec this code no longer reads is "not known", not an error
        return None


def fires_between(timeline: Timeline, start: datetime, end: datetime, limit: int, now: datetime) -> list[datetime]:
    """The first ``limit`` fires in [``start``, ``end``] of the schedule in effect at each instant, in order. A
    cancelled job's schedule calls for nothing after its cancel (bar a fire its cancel may have stopped in
    flight, within ``MISFIRE_GRACE``), and a paused one for nothing after now until it is resumed."""
    if timeline.cancelled_at is not None:
        end = min(end, timeline.cancelled_at + MISFIRE_GRACE)
    if timeline.pauses and timeline.pauses[-1].end is None:
        end = min(end, max(now, timeline.pauses[-1].start))
    streams = []
    for epoch in timeline.epochs:
        if epoch.schedule is None:
            continue
        low = max(start, epoch.since)
        high = end if epoch.until is None else min(end, epoch.until - MILLISECOND)
        if low <= high:
            streams.append(itertools.islice(_fires(epoch.schedule, low, high), limit))
    return sorted(set(itertools.chain.from_iterable(streams)))[:limit]


def _fires(schedule: Schedule, low: datetime, high: datetime) -> Iterator[datetime]:
    instant = schedule.next_fire_after(low - MILLISECOND)
    while instant is not None and instant <= high:
        yield instant
        instant = schedule.next_fire_after(instant)


def ledger(
    job: Job, timeline: Timeline, records: Sequence[ExecutionRecord], *, start: datetime, end: datetime,
    now: datetime, kept_since: datetime, limit: int,
    excluded_by: Callable[[datetime], str | None] = lambda _fire: None,
    earlier: Sequence[ExecutionRecord] = (),
) -> LedgerPage:
    """A page of the ledger: the first ``limit`` fires in [``start``, ``end``] and what became of each.

    ``records``: the job's history records with ``scheduled_at`` in the page's range (any order); a fire of
    the schedule lineage recorded in the range but not called for by the timeline (a fire of a schedule the
    log does not know) is listed too. ``kept_since``: the oldest instant whose history is still kept.
    ``excluded_by(fire)``: why the job's calendar excludes a fire not run yet (None: it does not). ``earlier``:
    records before the range, for a catch-up window's drop that began before it (one SKIPPED record stands for
    the fires it dropped, up to the fire it names as its record's next fire)."""
    planned = fires_between(timeline, start, end, limit + 1, now)
    more = len(planned) > limit
    planned = planned[:limit]
    page_end = planned[-1] if more else end
    by_fire: dict[datetime, list[ExecutionRecord]] = {}
    for record in records:
        if start <= record.scheduled_at <= page_end:
            by_fire.setdefault(record.scheduled_at, []).append(record)
    recorded = {at for at, mine in by_fire.items() if any(origin_of(r) is Trigger.SCHEDULE for r in mine)}
    instants = sorted(set(planned) | recorded)
    drops = sorted((r for r in (*earlier, *records) if r.trigger is Trigger.SCHEDULE
                    and skip_reason_of(r) is SkipReason.CATCH_UP), key=lambda r: r.scheduled_at)
    fires = [_fire(job, timeline, at, by_fire.get(at, []), now, kept_since, excluded_by, drops) for at in instants]
    summary = Counter(f.outcome.value for f in fires)
    return LedgerPage(fires, planned[-1] if more else None, timeline.notes, dict(summary))


def _fire(
    job: Job, timeline: Timeline, at: datetime, records: list[ExecutionRecord], now: datetime, kept_since: datetime,
    excluded_by: Callable[[datetime], str | None], drops: Sequence[ExecutionRecord] = (),
) -> Fire:
    records.sort(key=lambda r: (r.trigger is not Trigger.SCHEDULE, -r.attempt, r.execution_id))
    executions = tuple(FireExecution(r.execution_id, r.trigger, r.attempt, r.status, r.published_at)
                       for r in records)
    due = due_of(job, at)
    epoch = _epoch_at(timeline, at)
    dst = epoch.schedule.clock_change_note(at) if isinstance(epoch.schedule, Cron) else None
    fire = _from_records(job, at, due, records)
    if fire is not None:
        outcome, detail, lateness = _repaired(timeline, at, *fire)
        return Fire(at, due, outcome, detail, lateness, dst, executions)
    drop = next((d for d in reversed(drops) if d.scheduled_at < at
                 and (d.next_fire_at is None or at < d.next_fire_at)), None)
    if drop is not None:  # dropped with the missed fire whose record stands for the whole run of them
        return Fire(at, due, FireOutcome.DROPPED,
                    f"{drop.error} (recorded on the fire at {rfc3339(drop.scheduled_at)})", None, dst, executions)
    outcome, detail = _unrecorded(timeline, epoch, at, due, now, kept_since, excluded_by)
    if any(r.trigger is Trigger.BACKFILL for r in records) and outcome is FireOutcome.MISSING:
        outcome, detail = FireOutcome.BACKFILLED, "not published by the schedule; run since by a backfill"
    outcome, detail, _ = _repaired(timeline, at, outcome, detail, None)
    return Fire(at, due, outcome, detail, None, dst, executions)


#: The outcomes a repair of the fire stands in for: those of a fire the schedule meant to run (the others say why it
#: did not run, which stays the news).
_REPAIRABLE = (FireOutcome.PUBLISHED, FireOutcome.CAUGHT_UP, FireOutcome.HELD, FireOutcome.DUE, FireOutcome.MISSING)


def _repaired(
    timeline: Timeline, at: datetime, outcome: FireOutcome, detail: str | None, lateness: float | None
) -> tuple[FireOutcome, str | None, float | None]:
    """A fire the reconciler repaired is shown as such, with what became of it since."""
    repairs = [r for r in timeline.repairs if r.fire == at]
    if not repairs or outcome not in _REPAIRABLE:
        return outcome, detail, lateness
    what = "; ".join(f"{'attempt ' + str(r.attempt) if r.attempt > 1 else 'its execution'} found lost "
                     f"({r.reason}) and re-planned at {rfc3339(r.at)}" for r in repairs)
    since = {FireOutcome.PUBLISHED: "published", FireOutcome.CAUGHT_UP: "published", FireOutcome.HELD: "held",
             FireOutcome.DUE: "due", FireOutcome.MISSING: "not published yet"}[outcome]
    if lateness is not None:
        since += f" {_seconds(lateness)} after its due instant"
    return FireOutcome.REPAIRED, f"{what}; {since}", lateness


def _from_records(
    job: Job, at: datetime, due: datetime, records: list[ExecutionRecord]
) -> tuple[FireOutcome, str | None, float | None] | None:
    """The outcome the schedule lineage's first attempt records (None: it has none, or only a hold a change of
    the job made stale: what stopped it is the timeline's to say)."""
    first = next((r for r in records if r.trigger is Trigger.SCHEDULE and r.attempt == 1), None)
    if first is None:
        return None
    stale_hold = first.published_at is None and first.status is not ExecutionStatus.SKIPPED and (
        first.job_version != job.schedule_version or job.state is not JobState.ACTIVE)
    if stale_hold:
        return None
    if first.status is ExecutionStatus.SKIPPED:
        reason = skip_reason_of(first)
        return _SKIPS.get(reason, FireOutcome.SKIPPED) if reason else FireOutcome.SKIPPED, first.error, None
    if first.published_at is None:
        return FireOutcome.HELD, "held by the overlap policy until the previous execution reports", None
    intended = min(due, first.due_at)
    lateness = (first.published_at - intended).total_seconds() * 1000
    if first.published_at - intended > MISFIRE_GRACE:
        why = ("held by the overlap policy until the previous execution reported, or missed"
               if job.spec.overlap in (Overlap.BUFFER_ONE, Overlap.BUFFER_ALL) else "missed")
        return FireOutcome.CAUGHT_UP, f"{why}; published {_seconds(lateness)} after its due instant", lateness
    return FireOutcome.PUBLISHED, None, lateness


def _unrecorded(
    timeline: Timeline, epoch: Epoch, at: datetime, due: datetime, now: datetime, kept_since: datetime,
    excluded_by: Callable[[datetime], str | None],
) -> tuple[FireOutcome, str | None]:
    """The outcome of a fire with no record of the schedule's: what stopped it, or where it stands."""
    # A change that landed before the fire's publish (due + grace: a publish lags its due instant) stopped it.
    reach = due + MISFIRE_GRACE
    if timeline.cancelled_at is not None and timeline.cancelled_at <= reach:
        return FireOutcome.CANCELLED, f"the job was cancelled at {rfc3339(timeline.cancelled_at)}"
    for pause in timeline.pauses:
        if pause.start <= reach and (pause.end is None or at < pause.end) and not pause.catch_up:
            return FireOutcome.PAUSED, f"the job was paused at {rfc3339(pause.start)}" + (
                f" and resumed at {rfc3339(pause.end)}" if pause.end else "")
    if epoch.until is not None and epoch.until <= reach:
        return FireOutcome.REPLACED, f"the schedule was changed at {rfc3339(epoch.until)}"
    if at > now:
        calendar = excluded_by(at)
        return (FireOutcome.UPCOMING, f"will be {calendar}" if calendar else None)
    if now < reach:
        return FireOutcome.DUE, None
    if at < kept_since:
        return FireOutcome.EXPIRED, f"older than the history kept (from {rfc3339(kept_since)})"
    return FireOutcome.MISSING, "no execution is recorded, and no pause, cancel or change came before it"


def _epoch_at(timeline: Timeline, at: datetime) -> Epoch:
    for epoch in reversed(timeline.epochs):
        if epoch.since <= at:
            return epoch
    return timeline.epochs[0]


def _seconds(milliseconds: float) -> str:
    return f"{milliseconds / 1000:.1f} s"
