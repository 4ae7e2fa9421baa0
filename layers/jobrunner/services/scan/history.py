"""What a fire's policies read of its job's history (``FireGate``): the execution before the fire, and whether
the fire after a held or skipped one was dealt with. Reads only; the rules they feed are
``domain.policy_decisions``'."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from jobrunner.domain.jobs import Trigger, execution_id_for
from jobrunner.domain.policies import Overlap
from jobrunner.domain.policy_decisions import (
    OVERLAP_HOPS,
    OVERLAP_LOOKBACK,
    Previous,
    PreviousState,
    held_fires,
    previous_fire,
    running_after,
    started_since,
)
from jobrunner.domain.publication import next_fire

if TYPE_CHECKING:
    from jobrunner.domain.jobs import ExecutionRecord, Job, ScheduledExecution
    from jobrunner.ports import HistoryStore

_MS = timedelta(milliseconds=1)


class FireHistory:
    """Reads of a job's history for its fires' policies."""

    def __init__(self, store: HistoryStore) -> None:
        self._store = store

    def previous_of(self, job: Job, row: ScheduledExecution) -> tuple[Previous, ExecutionRecord | None, int]:
        """The fire of the schedule before ``row``'s and its state (``domain.policy_decisions.previous_fire``), the
        record of ``row``'s own fire if it has one, and (under buffer_all) how many fires before it are held. An
        execution of a later fire still running counts too (a schedule changed to fire earlier), and so does one
        published after the fire before was (a change of schedule that landed late: ``started_since``). One read
        of the job's newest records (which usually reach down to the fire); another from the fire when some are newer
        (a run now); another when a skip in between names a fire further back, or the page runs out (at most
        ``OVERLAP_HOPS`` more); under buffer_all, one more while fires are held."""
        fire = row.scheduled_at
        records = self._store.history_page(job.job_id, OVERLAP_LOOKBACK)  # the newest: usually down to the fire
        later = running_after(records, fire, job.schedule_version)
        if any(r.scheduled_at > fire for r in records):  # newer records (a run now, an earlier fire): read from it
            records = self._store.history_page(job.job_id, OVERLAP_LOOKBACK, before=(fire + _MS, 0, None))
        own = next((r for r in records if r.scheduled_at == fire and r.trigger is Trigger.SCHEDULE and r.attempt == 1),
                   None)
        found = previous_fire(records, fire, job.schedule_version, more=len(records) == OVERLAP_LOOKBACK)
        for _ in range(OVERLAP_HOPS):  # a skip named a fire further back, or the page ran out: walk on from there
            if not isinstance(found, datetime):
                break
            back = found + _MS
            page = self._store.history_page(job.job_id, OVERLAP_LOOKBACK, before=(back, 0, None))
            found = previous_fire(page, back, job.schedule_version, more=len(page) == OVERLAP_LOOKBACK)
        previous = later or (found if isinstance(found, Previous) else Previous(PreviousState.NONE))
        if previous.state not in (PreviousState.RUNNING, PreviousState.HELD):  # one published out of turn still runs?
            previous = started_since(records, fire, previous, job.schedule_version) or previous
        holding = 0
        if job.spec.overlap is Overlap.BUFFER_ALL and previous.state is PreviousState.HELD and previous.at is not None:
            # how long the queue is: the fires held up to the newest (one more read, while fires are held)
            back = previous.at + _MS
            queue = self._store.history_page(job.job_id, OVERLAP_LOOKBACK, before=(back, 0, None))
            holding = held_fires(queue, back, job.schedule_version)
        return previous, own, holding


    def next_fire_dealt_with(self, row: ScheduledExecution, job: Job) -> bool:
        """Whether the fire after ``row``'s has a record: asked of a row not held whose own record says held, which a
        scan wrote first when it held the fire, then its held copy, then the completion that plans the next fire.
        A scan that died in between left the row to replay and the next fire maybe unplanned (#31, found by the
        model's search): it is planned again unless it has been dealt with (a copy already written is the same
        execution). One read, on this path only (a replay, or a held row written before the ``held`` column)."""
        following = next_fire(row, job)
        if following is None:
            return True
        execution_id = execution_id_for(row.job_id, following, 1, Trigger.SCHEDULE)
        return self._store.get_record(row.job_id, following, 1, execution_id) is not None

    def after_skipped(self, row: ScheduledExecution, job: Job, own: ExecutionRecord) -> datetime | None:
        """What to plan after a copy of ``row`` whose fire is recorded SKIPPED (``own``): what its record says
        followed it (a catch-up window plans the latest missed fire, not the next one), unless that fire has a
        record under the same schedule version (dealt with: its own completion planned the rest). A copy that
        planned the next fire of the schedule instead started a second chain of fires beside the first, with ids
        of its own: a skip job with catch-up latest whose first row was written again had two fires out at once
        (found by the model's long search). A record of another schedule version at the same instant says
        nothing of this one: the schedule's next fire, as for any fire. One read, on this path only."""
        if own.job_version != row.job_version:
            return next_fire(row, job)
        following = own.next_fire_at
        if following is None:
            return None
        execution_id = execution_id_for(row.job_id, following, 1, Trigger.SCHEDULE)
        record = self._store.get_record(row.job_id, following, 1, execution_id)
        return None if record is not None and record.job_version == row.job_version else following
