"""Whether a fire of a schedule goes out (``FireGate``): its job's calendar, catch-up window and overlap policy
decide; a fire they do not run is recorded SKIPPED, held for later, or goes out after a cancel of the one before."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING

from jobrunner.domain.calendars import exclusion_note
from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import ExecutionStatus, Trigger
from jobrunner.domain.messages import cancel_message, destination
from jobrunner.domain.placement import plan_execution
from jobrunner.domain.policies import Overlap, SkipReason
from jobrunner.domain.policy_decisions import (
    Decision,
    catch_up,
    catch_up_note,
    decide,
    overlap_note,
    recheck_after,
    skip_note,
)
from jobrunner.domain.publication import started_record
from jobrunner.domain.time import utc
from jobrunner.ports import OutboundMessage, Outcome, PublishError
from jobrunner.services.scan.history import FireHistory

if TYPE_CHECKING:
    from datetime import datetime

    from jobrunner.domain.calendars import Calendar
    from jobrunner.domain.jobs import ExecutionRecord, Job, ScheduledExecution
    from jobrunner.domain.policy_decisions import Previous
    from jobrunner.ports import CalendarStore, Clock, Publisher
    from jobrunner.services.retire import Retirement
    from jobrunner.services.scan.completions import Completer
    from jobrunner.services.scan.rules import ScanRules, ScanStores
    from jobrunner.services.scan.state import Partition

log = logging.getLogger(__name__)


class _Unset:
    """No value given (where None is one)."""


_UNSET = _Unset()


class FireGate:
    """Applies a job's calendar, catch-up window and overlap policy to the fires about to be published."""

    def __init__(
        self, store: ScanStores, publisher: Publisher, clock: Clock, rules: ScanRules, completer: Completer,
        *, calendars: CalendarStore, retirer: Retirement,
    ) -> None:
        self._store = store
        self._history = FireHistory(store)
        self._publisher = publisher
        self._clock = clock
        self._rules = rules
        self._completer = completer
        #: The tenants' calendars, read for the jobs that name one.
        self._calendars = calendars
        #: Deletes a job that asked for it once its last fire is skipped and nothing else runs (``services.retire``).
        self._retirer = retirer

    def admit(
        self, part: Partition, live: list[tuple[ScheduledExecution, Job]],
    ) -> list[tuple[ScheduledExecution, Job]]:
        """Of the rows about to be published, those their jobs' calendars and policies let run. A fire of the
        schedule that its job's calendar excludes, that its catch-up window drops, or that its overlap policy
        skips is recorded SKIPPED (the record says why) and completed instead of published; one its overlap
        policy holds is written again for later (``_hold``). A job with none of these costs nothing more; a
        calendar costs a read of it per scan (again after ``ScanRules.calendar_refresh``), an overlap policy
        a read of the job's records before the fire (``FireHistory.previous_of``)."""
        if all(job.spec.calendar is None and job.spec.overlap is Overlap.ALLOW_ALL and job.spec.catch_up.replays_all
               and not row.held for row, job in live):
            return live
        run: list[tuple[ScheduledExecution, Job]] = []
        for row, job in live:
            if row.trigger is not Trigger.SCHEDULE:
                run.append((row, job))
                continue
            try:
                decided = self._decide(part, row, job)
            except Unavailable as exc:
                part.retry_later([row], "reads for a fire's policies failed", exc, {"job_id": row.job_id})
                continue
            if decided:
                run.append((row, job))
        return run

    def _decide(self, part: Partition, row: ScheduledExecution, job: Job) -> bool:
        """Apply the job's calendar, catch-up window and overlap policy to one fire; True when it is to be
        published (after a cancel message for the execution before it, under ``cancel_other``)."""
        now = self._clock.now()
        previous: Previous | None = None
        own: ExecutionRecord | None = None
        holding = 0
        if job.spec.overlap is not Overlap.ALLOW_ALL:
            previous, own, holding = self._history.previous_of(job, row)
        elif part.replaying or job.spec.calendar is not None or not job.spec.catch_up.replays_all:
            # was this fire dealt with already? On a replay (as ``Publishing._already_ended`` asks); and for a job
            # whose calendar or catch-up window may have recorded it SKIPPED, on any copy of its row (one written
            # again because it landed late comes due in another partition, no replay): it stays SKIPPED, whatever
            # the calendar says now. One point read a fire, for such jobs only.
            own = self._store.get_record(row.job_id, row.scheduled_at, row.attempt, row.execution_id)
        if own is not None and own.published_at is not None:
            return True  # published before (a replay, a second copy of its row): again, as it was, same id
        if own is not None and own.status is ExecutionStatus.SKIPPED:  # not run before, for a reason: so it stays
            part.completions.plan_next(row, self._history.after_skipped(row, job, own))  # (a read may fail)
            part.report.replays_skipped += 1
            part.completions.add(row, job, ended=True)
            return False
        # Held before (the row says so; older held rows only by their record): its next fire was planned then,
        # never again, whatever releases it (its policy, or a change to allow_all), skips it or holds it again.
        held = row.held or (own is not None and own.status is ExecutionStatus.SCHEDULED)
        if held and (row.held or self._history.next_fire_dealt_with(row, job)):
            part.completions.plan_next(row, None)
        if self._excluded_by_calendar(part, row, job):
            return False
        if not held and self._dropped_by_catch_up(part, row, job, now, own):  # (a held one is not missed)
            return False
        if previous is None:
            return True
        return self._overlap_allows(part, row, job, previous, holding, held=held)

    def _excluded_by_calendar(self, part: Partition, row: ScheduledExecution, job: Job) -> bool:
        """Whether the job's calendar excludes the fire (then recorded SKIPPED, ``_skip``)."""
        if job.spec.calendar is None:
            return False
        calendar = self._calendar(part, job.user_id, job.spec.calendar)
        if calendar is None:  # deleted while a job named it (a race the API cannot rule out): not applied
            log.warning("job %s names calendar %s, which does not exist: not applied", job.job_id, job.spec.calendar)
            return False
        exclusion = calendar.excluding(row.scheduled_at)
        if exclusion is None:
            return False
        self._skip(part, row, job, skip_note(SkipReason.CALENDAR, exclusion_note(calendar, exclusion)))
        return True

    def _dropped_by_catch_up(
        self, part: Partition, row: ScheduledExecution, job: Job, now: datetime, own: ExecutionRecord | None,
    ) -> bool:
        """Whether the job's catch-up window drops the fire (then it and the fires after it up to the resume are
        recorded as one SKIPPED record, ``_skip``). A fire with a record of its own is not dropped: its
        execution was recorded going out (a write-ahead whose answer was lost, then retried late), and may have
        gone out; a SKIPPED record written over it would keep its publication (#31, found by the model's long
        search). It goes out again, under its id. One point read, on the drop's path only."""
        if job.spec.catch_up.replays_all:
            return False
        # Missed from the latest instant its jitter window may put it at (a row written late, e.g. by a resume, is
        # keyed later): a fire's row is planned when the fire before it goes out, which that fire's own offset in
        # its window may put after this one's due instant (a window wider than the period), with no outage at all.
        latest = row.scheduled_at + timedelta(seconds=job.spec.jitter_s or 0)
        dropped = catch_up(job.spec.catch_up, job.spec.schedule, row.scheduled_at, latest, now)
        if dropped is None:
            return False
        if own is None:
            own = self._store.get_record(row.job_id, row.scheduled_at, row.attempt, row.execution_id)
        if own is not None and own.status is not ExecutionStatus.SKIPPED:
            return False
        part.completions.plan_next(row, dropped.resume)
        self._skip(part, row, job, catch_up_note(job.spec.catch_up, row.scheduled_at, dropped.resume),
                   next_fire=dropped.resume)
        return True

    def _overlap_allows(
        self, part: Partition, row: ScheduledExecution, job: Job, previous: Previous, holding: int, *, held: bool,
    ) -> bool:
        """Whether the job's overlap policy lets the fire run now, given the execution before it: a skip is
        recorded, a hold written again for later, a cancel sent before this fire is published."""
        decision = decide(job.spec.overlap, previous, holding)
        if decision is Decision.SKIP:
            self._skip(part, row, job, overlap_note(job.spec.overlap, previous))
            return False
        if decision is Decision.HOLD:
            self._hold(part, row, job, first=not held)
            return False
        if decision is Decision.CANCEL_AND_RUN:
            return self._cancel_previous(part, row, job, previous)
        return True

    def _hold(self, part: Partition, row: ScheduledExecution, job: Job, *, first: bool) -> None:
        """Hold a fire until the execution before it reports: write it again, due after ``recheck_after``, under
        the same execution id. The first time, its record says it is held (status SCHEDULED) and the schedule's
        next fire is planned as usual; after that only the row moves on."""
        now = self._clock.now()
        again_at = utc(now + recheck_after(row.scheduled_at, now))
        again = replace(plan_execution(job, again_at, now, self._rules.segment_count, trigger=Trigger.SCHEDULE,
                                       scheduled_at=row.scheduled_at), job_version=row.job_version, held=True)
        again = part.own(again, again_at, now)
        record = replace(started_record(row, job, now), status=ExecutionStatus.SCHEDULED, published_at=None)
        try:
            if first:
                self._store.write_outcomes([Outcome(record, None)])
            self._store.write_scheduled([again])
        except Unavailable as exc:
            part.retry_later([row], "holding a fire failed", exc, {"job_id": row.job_id})
            return
        part.report.held += 1
        part.completions.add(row, job, ended=True)
        self._completer.place_written(part, [again], now)

    def _cancel_previous(self, part: Partition, row: ScheduledExecution, job: Job, previous: Previous) -> bool:
        """Under ``cancel_other``: ask the workers (on the job's topic) to cancel the execution before this fire;
        True once the broker has it (this fire is then published); if it cannot be sent, the row is retried."""
        assert previous.execution_id is not None and previous.at is not None
        key, value, headers = cancel_message(job, previous.execution_id, previous.at, previous.attempt,
                                             row.scheduled_at)
        message = OutboundMessage(topic=destination(job, self._rules.delivery_topic), key=key, value=value,
                                  headers=headers)
        try:
            self._publisher.publish([message], timeout_s=self._rules.publish_timeout.total_seconds())
        except PublishError as exc:
            part.retry_later([row], "cancel message failed", exc, {"job_id": row.job_id})
            return False
        part.report.cancels += 1
        return True

    def _calendar(self, part: Partition, user_id: str, name: str) -> Calendar | None:
        """The tenant's calendar ``name``, read once per scan and again once ``calendar_refresh`` has passed."""
        now = self._clock.now()
        cached = part.calendars.get((user_id, name))
        if cached is not None and now - cached[1] < self._rules.calendar_refresh:
            return cached[0]
        calendar = self._calendars.get(user_id, name)
        part.calendars[(user_id, name)] = (calendar, now)
        return calendar

    def _skip(self, part: Partition, row: ScheduledExecution, job: Job, note: str,
              next_fire: datetime | _Unset | None = _UNSET) -> None:
        """Record a fire a policy does not run as SKIPPED (``note`` says why), then complete it as a published
        one is (its next fire planned, or ``next_fire``; no watchdog). If the record cannot be written, the row
        is retried."""
        now = self._clock.now()
        record = replace(started_record(row, job, now), status=ExecutionStatus.SKIPPED, published_at=None,
                         finished_at=now, error=note)
        if not isinstance(next_fire, _Unset):
            record = replace(record, next_fire_at=next_fire)
        try:
            self._store.write_outcomes([Outcome(record, None)])
        except Unavailable as exc:
            part.retry_later([row], "skip record failed", exc, {"job_id": row.job_id})
            return
        part.report.skipped += 1
        part.completions.add(row, job, ended=True)
        if record.next_fire_at is None:  # its last fire: the job may be done
            self._retirer.consider(job)
