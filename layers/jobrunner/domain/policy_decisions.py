"""What a job's policies (``domain.policies``, the values) decide for one of its fires: which missed fires the
catch-up window drops, and what the overlap policy does with a fire whose previous execution has not reported;
and the ``error`` text of the SKIPPED record a dropped fire gets (``skip_note``), read back by ``skip_reason_of``.

Both are pure functions of the schedule, the fire, the clock and the job's records; the scan reads the
records (only for a job whose overlap policy is not ``allow_all``) and writes what they decide.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from jobrunner.domain.jobs import ExecutionStatus, Trigger, origin_of
from jobrunner.domain.policies import MISFIRE_GRACE, CatchUp, Overlap, SkipReason
from jobrunner.domain.schedules.base import MILLISECOND
from jobrunner.domain.time import rfc3339, utc

if TYPE_CHECKING:
    from collections.abc import Sequence

    from jobrunner.domain.jobs import ExecutionRecord
    from jobrunner.domain.schedules import Schedule


#: What the scan does with one fire of a job whose overlap policy is not ``allow_all``.
class Decision(StrEnum):
    RUN = "run"
    SKIP = "skip"
    HOLD = "hold"
    #: Send a cancel message for the previous execution, then run this fire.
    CANCEL_AND_RUN = "cancel_and_run"


class PreviousState(StrEnum):
    NONE = "none"  # no earlier fire of the schedule is on record (within the look-back)
    DONE = "done"  # it has reported (or was not run)
    RUNNING = "running"  # published, no result yet; or failed with its retry still to come
    HELD = "held"  # held by a buffer policy, not published yet


@dataclass(frozen=True)
class Previous:
    """The fire of the schedule before a fire, as its records say: what the overlap policy looks at."""

    state: PreviousState
    at: datetime | None = None
    #: Its latest attempt (the execution a cancel message names).
    execution_id: str | None = None
    attempt: int = 1


def skip_note(reason: SkipReason, detail: str) -> str:
    """The ``error`` text of a SKIPPED record: the reason, a colon, then words for a person."""
    return f"{reason.value}: {detail}"


def skip_reason_of(record: ExecutionRecord) -> SkipReason | None:
    """The reason a SKIPPED record gives (None for any other record, or an unknown reason)."""
    if record.status.value != "SKIPPED" or not record.error:
        return None
    head = record.error.split(":", 1)[0]
    return SkipReason(head) if head in SkipReason._value2member_map_ else None


#: How many of a job's records before a fire the overlap policy reads to find the fire before it, and how many
#: more reads it makes when skips name fires further back.
OVERLAP_LOOKBACK = 20
OVERLAP_HOPS = 3
_BLOCKER = re.compile(r"the fire at (\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)")


def overlap_note(policy: Overlap, previous: Previous) -> str:
    """The ``error`` of a fire the overlap policy skips: the policy, and the fire it waited on (read back by
    ``blocker_of``, so that the next fire finds that one without reading every skip in between)."""
    assert previous.at is not None
    if previous.state is PreviousState.HELD:
        what = (f"the buffer is full ({MAX_BUFFERED} fires held), the last for when" if policy is Overlap.BUFFER_ALL
                else "a fire is already held for when")
        return skip_note(SkipReason.OVERLAP, f"{policy.value}: {what} the fire at {rfc3339(previous.at)} is published")
    return skip_note(SkipReason.OVERLAP, f"{policy.value}: the previous execution had not reported: the fire at "
                                         f"{rfc3339(previous.at)}")


def blocker_of(record: ExecutionRecord) -> datetime | None:
    """The fire an overlap SKIPPED record names (``overlap_note``), or None."""
    if skip_reason_of(record) is not SkipReason.OVERLAP:
        return None
    match = _BLOCKER.search(record.error or "")
    return utc(datetime.fromisoformat(match.group(1).replace("Z", "+00:00"))) if match else None


def previous_fire(
    records: Sequence[ExecutionRecord], fire: datetime, version: int, more: bool = False
) -> Previous | datetime:
    """The fire before ``fire`` of the schedule's lineage and its state, from ``records`` (the job's records up to
    ``fire``, in history order: newest fire first). Fires that ran nothing are passed over: those recorded
    SKIPPED, and a fire held under another schedule version (a pause or a change of schedule since dropped it:
    ``version`` is the job's schedule version). A fire skipped by the overlap policy names the fire it waited
    on, and the walk passes over the fires of the skip's own schedule version down to that one: a fire of
    another version in between is looked at (a change of schedule whose write landed late has fires among the
    old version's skips: #31). When the fire a skip names is not in ``records`` and nothing on them decides,
    its instant is returned, for the caller to read its records and walk on from there; so is the oldest fire
    read when ``more`` records may lie before ``records`` (a full page) and the walk has passed over every one
    of them. Records of other lineages (a run now, a backfill) are not the schedule's and do not count."""
    by_fire: dict[datetime, list[ExecutionRecord]] = {}
    for record in records:
        if record.scheduled_at < fire and origin_of(record) is Trigger.SCHEDULE:
            by_fire.setdefault(record.scheduled_at, []).append(record)
    below: dict[int | None, datetime] = {}  # by schedule version: a skip of it named this fire, the fires after it pass
    for at in sorted(by_fire, reverse=True):
        mine = sorted(by_fire[at], key=lambda r: r.attempt, reverse=True)
        first = next((r for r in mine if r.attempt == 1), None)
        fire_version = (first or mine[-1]).job_version
        if fire_version in below and at > below[fire_version]:
            continue
        if first is not None and first.status is ExecutionStatus.SKIPPED:
            blocker = blocker_of(first)
            if blocker is not None:
                below[fire_version] = min(blocker, below.get(fire_version, blocker))
            continue
        if first is not None and _held(first) and first.job_version != version:
            continue
        return previous_of(mine, at, version)
    unread = [at for at in below.values() if at not in by_fire]
    if unread:  # a skip named a fire not on this page: read on from it
        return max(unread)
    if more and records:  # every record read was passed over: walk on before the oldest
        return min(r.scheduled_at for r in records)
    return Previous(PreviousState.NONE)


def running_after(records: Sequence[ExecutionRecord], fire: datetime, version: int) -> Previous | None:
    """An execution of the schedule still running whose fire comes after ``fire`` (the schedule was changed to
    fire earlier than it, or a fire in the past was submitted), among ``records``: it is the previous execution
    as much as one before ``fire``; None when there is none."""
    later = {r.scheduled_at for r in records if r.scheduled_at > fire and origin_of(r) is Trigger.SCHEDULE}
    for at in sorted(later, reverse=True):
        previous = previous_of(records, at, version)
        if previous.state is PreviousState.RUNNING:
            return previous
    return None


def started_since(
    records: Sequence[ExecutionRecord], fire: datetime, previous: Previous, version: int
) -> Previous | None:
    """An execution of the schedule still running, of a fire before ``fire`` other than ``previous`` (the fire before
    it), that was published after ``previous`` was (or at all, when ``previous`` was never published), among
    ``records``: it is the previous execution too, the latest published if several; None when there is none.
    Fires are published in the order of their instants, but not across a change of schedule whose write landed
    late: the new schedule's first fires go out late, after old ones that come later (#31, found by the model)."""
    firsts: dict[datetime, datetime] = {}  # a fire's first publication
    for record in records:
        if record.scheduled_at < fire and origin_of(record) is Trigger.SCHEDULE and record.published_at is not None:
            firsts[record.scheduled_at] = min(record.published_at, firsts.get(record.scheduled_at, record.published_at))
    since = firsts.get(previous.at) if previous.at is not None else None
    found: tuple[datetime, Previous] | None = None
    for at, published in firsts.items():
        if at == previous.at or (since is not None and published <= since):
            continue
        state = previous_of(records, at, version)
        if state.state is PreviousState.RUNNING and (found is None or published > found[0]):
            found = (published, state)
    return found[1] if found is not None else None


def _held(record: ExecutionRecord) -> bool:
    return record.status is ExecutionStatus.SCHEDULED and record.published_at is None


def previous_of(records: Sequence[ExecutionRecord], at: datetime, version: int) -> Previous:
    """The state of fire ``at`` from its own records (any order; those of other fires are ignored); a fire held
    under a schedule version other than ``version`` was dropped by a change, and counts as done."""
    mine = sorted((r for r in records if r.scheduled_at == at and origin_of(r) is Trigger.SCHEDULE),
                  key=lambda r: r.attempt, reverse=True)
    if not mine:
        return Previous(PreviousState.DONE, at)
    latest = mine[0]
    if latest.status is ExecutionStatus.SCHEDULED and latest.published_at is None:
        state = PreviousState.HELD if latest.job_version == version else PreviousState.DONE
        return Previous(state, at, latest.execution_id, latest.attempt)
    running = latest.status is ExecutionStatus.RUNNING or (
        latest.status is ExecutionStatus.FAILED and latest.retry_at is not None)
    return Previous(PreviousState.RUNNING if running else PreviousState.DONE, at, latest.execution_id, latest.attempt)


#: The most fires ``buffer_all`` holds at once; a fire beyond them is skipped (the buffer is full). It keeps the
#: walk back to the execution they wait on within ``OVERLAP_LOOKBACK`` records, also once a change of the job has
#: dropped them.
MAX_BUFFERED = 10


def held_fires(records: Sequence[ExecutionRecord], fire: datetime, version: int) -> int:
    """How many fires before ``fire`` are held under schedule version ``version``, among ``records``."""
    return sum(1 for r in records if r.scheduled_at < fire and r.trigger is Trigger.SCHEDULE and r.attempt == 1
               and _held(r) and r.job_version == version)


def decide(policy: Overlap, previous: Previous, held: int = 0) -> Decision:
    """What to do with a fire whose previous fire is in ``previous`` (Temporal's semantics), ``held`` fires of
    the job being held already: ``skip`` skips it while the previous runs; ``buffer_one`` holds it while the
    previous runs, and skips it while another is held; ``buffer_all`` holds every fire behind the one before it,
    up to ``MAX_BUFFERED`` (then skips); ``cancel_other`` asks the workers to cancel the previous execution and
    runs it."""
    busy = previous.state in (PreviousState.RUNNING, PreviousState.HELD)
    if policy is Overlap.ALLOW_ALL or not busy:
        return Decision.RUN
    if policy is Overlap.SKIP or (policy is Overlap.BUFFER_ONE and previous.state is PreviousState.HELD):
        return Decision.SKIP
    if policy is Overlap.BUFFER_ALL and held >= MAX_BUFFERED:
        return Decision.SKIP
    if policy in (Overlap.BUFFER_ONE, Overlap.BUFFER_ALL):
        return Decision.HOLD
    return Decision.CANCEL_AND_RUN if previous.state is PreviousState.RUNNING else Decision.RUN


#: A held fire is looked at again after a quarter of the time it has waited, between these bounds.
HOLD_RECHECK = (timedelta(seconds=5), timedelta(seconds=60))


def recheck_after(fire: datetime, now: datetime) -> timedelta:
    """When a held fire is looked at again: soon at first, then less and less often (a long run costs few reads)."""
    low, high = HOLD_RECHECK
    return min(high, max(low, (now - fire) / 4 // MILLISECOND * MILLISECOND))  # whole milliseconds, as instants


@dataclass(frozen=True)
class Dropped:
    """A missed fire the catch-up window drops, with every fire after it up to ``resume`` (None: to the end)."""

    resume: datetime | None


def catch_up(policy: CatchUp, schedule: Schedule, fire: datetime, due: datetime, now: datetime) -> Dropped | None:
    """None when the fire runs; else ``Dropped``, naming the fire the schedule resumes from (its earliest fire that
    the policy keeps, or its first fire after ``now`` when it keeps none): the fires from ``fire`` up to it are
    dropped. A fire is missed when ``now`` is more than ``MISFIRE_GRACE`` past ``due``, the latest it was due
    (the end of its jitter window, ``services.scan``); of the missed
    fires, those scheduled within ``window_s`` before ``now`` are kept, and of those only the latest ``most``
    (counting the fires up to ``now``). The default (replay every missed fire) never drops one, at no cost."""
    if policy.replays_all or now - due <= MISFIRE_GRACE:
        return None
    low = fire if policy.window_s is None else max(fire, now - timedelta(seconds=policy.window_s))
    kept: deque[datetime] = deque(maxlen=policy.most)  # the latest `most` fires from `low` up to now
    instant = schedule.next_fire_after(low - MILLISECOND)
    while instant is not None and instant <= now:
        kept.append(instant)
        instant = schedule.next_fire_after(instant)
    if kept and kept[0] <= fire:
        return None  # this fire is one the policy keeps
    return Dropped(kept[0] if kept else instant)


def catch_up_note(policy: CatchUp, fire: datetime, resume: datetime | None) -> str:
    rule = ", ".join(f"{k} {v}" for k, v in policy.to_dict().items())
    until = f"up to the fire at {rfc3339(resume)}, where the schedule resumes" if resume else "to its end"
    return skip_note(SkipReason.CATCH_UP, f"missed; outside the catch-up window ({rule}): dropped from this fire "
                                          f"{until}")
