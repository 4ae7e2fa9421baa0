"""Changing jobs: cancel, pause, resume, a PATCH, a run now, a backfill, and a bulk pause, resume or cancel.

Each change is a compare-and-set of the job's row on the version read, with its next run's row placed in
time for its scan before it is answered (docs/reliability.md, "the rules")."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from jobrunner.domain.errors import Conflict, InvalidField, JobNotFound, Unavailable
from jobrunner.domain.jobs import JobState, Trigger, execution_id_for
from jobrunner.domain.placement import placed_in_time
from jobrunner.domain.schedules import AT_PAST_TOLERANCE, anchor
from jobrunner.domain.time import rfc3339, to_epoch_ms
from jobrunner.services.jobs.models import Backfill, BulkResult
from jobrunner.services.jobs.writer import JobWriter

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from jobrunner.domain.jobs import Job, ScheduledExecution
    from jobrunner.domain.selection import JobFilter
    from jobrunner.domain.spec import SpecChange

log = logging.getLogger(__name__)

#: Compare-and-set attempts of one change before it answers 409 (each lost one re-reads the job).
MAX_UPDATE_ATTEMPTS = 5
#: How many fires at the pause's instant a resume with catch-up looks past when they went out before it.
RESUME_LOOKS = 10
#: Fields a change sets that the user did not name (derived from the ones named).
_DERIVED = frozenset({"next_run_at", "paused_at"})
#: The most fires one backfill request may run.
MAX_BACKFILL = 1000


class Commands(JobWriter):
    """What a tenant asks of a job it has: each change applies to the job as it stands when it lands."""

    def cancel(self, user_id: str, job_id: str, *, actor: str | None = None) -> Job:
        """Cancel: nothing further is published. Rows already planned carry an older version and are
        dropped by their scan, which reads the job just before publishing."""
        return self._save(user_id, job_id, self._cancelled, "cancel", actor)

    @staticmethod
    def _cancelled(job: Job, now: datetime) -> dict[str, Any] | None:
        if job.state is JobState.CANCELLED:
            return None
        return {"state": JobState.CANCELLED, "next_run_at": None}

    def pause(self, user_id: str, job_id: str, *, actor: str | None = None) -> Job:
        """Pause the schedule: no fire due from now on is published until resumed. Retries and timeouts of
        executions already published go on (a pause stops the schedule, not the work in flight)."""
        return self._save(user_id, job_id, self._paused, "pause", actor)

    def _paused(self, job: Job, now: datetime) -> dict[str, Any] | None:
        self._check_not_cancelled(job)
        if job.state is JobState.PAUSED:
            return None
        return {"state": JobState.PAUSED, "next_run_at": None, "paused_at": now}

    def resume(self, user_id: str, job_id: str, catch_up: bool = False, *, actor: str | None = None) -> Job:
        """Resume from the first fire after now; with ``catch_up``, from the first fire after the pause, so
        that the fires missed while paused run one after another."""
        return self._save(user_id, job_id, lambda job, now: self._resumed(job, now, catch_up), "resume", actor,
                          {"catch_up": True} if catch_up else None)

    def _resumed(self, job: Job, now: datetime, catch_up: bool) -> dict[str, Any] | None:
        self._check_not_cancelled(job)
        if job.state is JobState.ACTIVE:
            return None
        since = (job.paused_at or now) if catch_up else now
        first = job.spec.schedule.next_fire_after(since - timedelta(milliseconds=1) if catch_up else since)
        if catch_up:
            first = self._first_not_gone_out(job, first)
        if first is None:
            raise Conflict("the schedule has no fire left after now; nothing to resume")
        return {"state": JobState.ACTIVE, "next_run_at": first}

    def _first_not_gone_out(self, job: Job, fire: datetime | None) -> datetime | None:
        """From ``fire`` (the first at or after the pause), the first fire with no record: one at the pause's
        instant may have gone out before the pause landed (a scan's clock a little ahead of the API's), and is
        not missed (#31, found by the model: replayed, it ran twice, or a catch-up window recorded it SKIPPED
        over its record). A read per fire that went out; at most ``RESUME_LOOKS`` of them."""
        for _ in range(RESUME_LOOKS):
            if fire is None or self._store.get_record(
                    job.job_id, fire, 1, execution_id_for(job.job_id, fire, 1, Trigger.SCHEDULE)) is None:
                return fire
            fire = job.spec.schedule.next_fire_after(fire)
        return fire

    def run_now(self, user_id: str, job_id: str, *, actor: str | None = None) -> ScheduledExecution:
        """A manual run, due now, recorded in history with trigger MANUAL (allowed on paused jobs). A one-time
        job's row is first written again (``_outlive``), so that it expires after the run, not under it."""
        job = self._outlive(self._queries.get(user_id, job_id))
        self._check_not_cancelled(job)
        due = self._clock.now()
        rows: list[ScheduledExecution] = []

        def write(at: datetime) -> list[ScheduledExecution]:
            rows[:] = self._rows.write([self._rows.plan(job, due, at, Trigger.MANUAL)])
            return rows

        self._quotas.counted(user_id, self._rules.limits.run_now(due), lambda: self._rows.write_in_time(write))
        self._changes.record(job, "run", actor, {"execution_id": rows[0].execution_id})
        return rows[0]

    def backfill(
        self, user_id: str, job_id: str, start: datetime, end: datetime, dry_run: bool = False, *,
        actor: str | None = None,
    ) -> Backfill:
        """The fires the job's schedule had in [``start``, ``end``] (a past range), each run now as its own
        execution (trigger BACKFILL, its id a function of the job and the fire); with ``dry_run``, only listed. A
        fire already backfilled (its execution has a record: published, or ended) is not queued again, so asking
        again for a range runs nothing new (one read of the records per request). At most ``MAX_BACKFILL``
        fires a request. Allowed on a paused job, as a run now is."""
        job = self._queries.get(user_id, job_id)
        self._check_not_cancelled(job)
        now = self._clock.now()
        if end > now:
            raise InvalidField("to", "is in the future: a backfill runs past fires only")
        if start > end:
            raise InvalidField("from", "is after to")
        fires: list[datetime] = []
        instant = job.spec.schedule.next_fire_after(start - timedelta(milliseconds=1))
        while instant is not None and instant <= end:
            if len(fires) == MAX_BACKFILL:
                raise InvalidField("to", f"the range holds more than {MAX_BACKFILL} fires; ask for a shorter one")
            fires.append(instant)
            instant = job.spec.schedule.next_fire_after(instant)
        if dry_run or not fires:
            return Backfill(fires, [])
        keys = [(job_id, fire, 1, execution_id_for(job_id, fire, 1, Trigger.BACKFILL)) for fire in fires]
        run = self._store.get_records(keys)
        queued = [fire for fire, key in zip(fires, keys, strict=True) if key not in run]
        if not queued:
            return Backfill(fires, [])
        job = self._outlive(job)

        def write(at: datetime) -> list[ScheduledExecution]:
            return self._rows.write([self._rows.plan(job, at, at, Trigger.BACKFILL, scheduled_at=fire)
                                     for fire in queued])

        self._quotas.counted(user_id, self._rules.limits.run_now(now, len(queued)),
                             lambda: self._rows.write_in_time(write))
        self._changes.record(job, "backfill", actor, {"from": rfc3339(start), "to": rfc3339(end), "fires": len(queued)})
        return Backfill(fires, queued)

    def _outlive(self, job: Job) -> Job:
        """``job`` (as read), its row written again first if it is a one-time job whose row expires
        (``domain.expiry``): a new version whose ``updated_at`` is now, so that the instant its row expires
        counts from the run about to be asked (its execution needs the job until it ends). A compare-and-set
        like any change (a lost race re-reads, a few times, then 409); a cancelled job is left as it is (the
        caller refuses it). Costs one conditional write per run now or backfill of a one-time job, none for a
        recurring one."""
        if not self._rules.one_time_rows_expire or job.spec.schedule.recurring or job.state is JobState.CANCELLED:
            return job
        for _ in range(MAX_UPDATE_ATTEMPTS):
            now = self._clock.now()
            touched = job.with_changes(version=job.version + 1, updated_at=now)
            self._changes.keep_submit(job)  # the row moves past its version (``_save``)
            if self._compare_and_set(touched, [], job.version):
                return touched
            job = self._queries.get(job.user_id, job.job_id)
            if job.state is JobState.CANCELLED:
                return job
        raise Conflict(f"the job kept changing while this request was applied; its version is now {job.version}")

    def change(self, user_id: str, job_id: str, change: SpecChange, *, actor: str | None = None) -> Job:
        """Apply a PATCH; it takes effect from the next fire (a new schedule starts from now)."""
        return self._save(user_id, job_id, lambda job, now: self._changed(job, now, change), "patch", actor)

    def _changed(self, job: Job, now: datetime, change: SpecChange) -> dict[str, Any]:
        """The PATCH applied to the job's spec as read in this round of the compare-and-set loop: the fields named
        (checked with the spec's own rules and, for those that need the tenant, with ``JobChecks``), and, for a new
        schedule, the next run it plans."""
        self._check_not_cancelled(job)
        spec = change.applied_to(job.spec)
        if "topic" in change or "target" in change:
            spec = replace(spec, topic=self._checks.route(job.user_id, spec))
        if "payload" in change:
            self._checks.payload(job.user_id, spec.payload)
        if "payload" in change or "target" in change:
            self._checks.keywords(spec)
        if "calendar" in change or (spec.calendar is not None and "schedule" in change):
            self._checks.calendar(job.user_id, spec.calendar, spec.schedule.recurring)
        # a target given or removed moves the job from its topic or to one (``SpecChange.applied_to``)
        names = set(change.named) | ({"topic"} if "target" in change else set())
        named = {name: getattr(spec, name) for name in names}
        if "schedule" not in change:
            return named  # the planned rows and the next run stay as they are
        schedule = anchor(spec.schedule, now)
        next_run_at = schedule.first_fire(now)
        if next_run_at is None or next_run_at < now - AT_PAST_TOLERANCE:
            raise InvalidField("schedule", "never fires after now")
        return {**named, "schedule": schedule, "next_run_at": None if job.state is JobState.PAUSED else next_run_at}

    def bulk(
        self, user_id: str, action: str, where: JobFilter, limit: int, cursor: str | None, *,
        actor: str | None = None,
    ) -> tuple[BulkResult, str | None]:
        """Pause, resume or cancel a page of the tenant's jobs that ``where`` selects (at least one
        condition: never every job by accident); the next cursor continues with the following page. Each
        job is changed as its own request would change it: one that is already so is unchanged, one that
        cannot be (a cancelled job paused) is reported with the reason."""
        if where.everything:
            raise InvalidField("tag", "a bulk change needs a tag, a status or a kind to select jobs by")
        change = {"pause": self.pause, "resume": self.resume, "cancel": self.cancel}.get(action)
        if change is None:
            raise InvalidField("action", "must be pause, resume or cancel")
        jobs, cursor = self._queries.list_jobs(user_id, limit, cursor, where=where)
        result = BulkResult()
        for job in jobs:
            try:
                after = change(user_id, job.job_id, actor=actor)
            except (Conflict, JobNotFound) as exc:
                result.failed.append((job.job_id, str(exc)))
                continue
            (result.changed if after.version != job.version else result.unchanged).append(job.job_id)
        return result, cursor

    @staticmethod
    def _check_not_cancelled(job: Job) -> None:
        if job.state is JobState.CANCELLED:
            raise Conflict("the job is cancelled")

    def _save(
        self, user_id: str, job_id: str, decide: Callable[[Job, datetime], dict[str, Any] | None], action: str,
        actor: str | None, details: dict[str, Any] | None = None,
    ) -> Job:
        """Read the job, ``decide`` its changes (None: nothing to do), and write them as a new version, on
        condition that no other change landed since the read. A change of schedule or state also becomes
        the schedule version, with its next run planned under it; any other change plans nothing (see
        ``domain.jobs``). A lost race re-reads and decides again (a user's intent applies to the job as it
        now stands), a few times, then answers 409 with the current version. A job at version 1 has its submit
        entry written first (``ChangeBook.keep_submit``): once the row has moved on, nothing else holds it."""
        for _ in range(MAX_UPDATE_ATTEMPTS):
            job = self._queries.get(user_id, job_id)
            now = self._clock.now()
            changes = decide(job, now)
            if changes is None:  # nothing to change; a resume of an active job re-asserts its next run's row
                if action == "resume":
                    self._rows.reassert(job)
                return job
            version = job.version + 1
            replans = "schedule" in changes or "state" in changes
            # a change of schedule or state plans its fires from its next run (``Job.schedule_from``)
            updated = job.with_changes(version=version, schedule_version=version if replans else job.schedule_version,
                                       schedule_from=changes.get("next_run_at") if replans else job.schedule_from,
                                       updated_at=now, **changes)
            # the submit entry the row stands for at version 1 is written before the row moves past it (a change
            # that then loses its compare-and-set wrote the same entry its winner writes)
            self._changes.keep_submit(job)
            # a one-time job made recurring (a PATCH of its schedule) has its whole row written without expiry
            was_one_time = not job.spec.schedule.recurring and updated.spec.schedule.recurring
            if self._quotas.counted(user_id, self._rules.limits.change(job, updated),
                             lambda: self._write_update(updated, job.version, was_one_time),  # noqa: B023
                             landed=lambda: self._stands(updated)):  # noqa: B023 - called at once
                fields = sorted(set(changes) - _DERIVED) if action == "patch" else None
                logged = {**(details or {}), **({"fields": fields} if fields else {})}
                if fields and "schedule" in fields:  # the ledger reads the schedules a job had from its log
                    logged["schedule"] = updated.spec.schedule.to_dict()
                self._changes.record(updated, action, actor, logged)
                return updated
        current = self._queries.get(user_id, job_id)
        raise Conflict(f"the job kept changing while this request was applied; its version is now {current.version}")

    def _write_update(self, updated: Job, expected_version: int, was_one_time: bool = False) -> bool:
        """Compare-and-set ``updated`` with its next run's row placed as of the moment of writing; a row that
        landed too late for its scan is placed and written again under the same version (and only then is the
        change answered: verify, then commit). A change that keeps the schedule writes no row."""
        due = updated.next_run_at if updated.state is JobState.ACTIVE else None
        now = self._clock.now()
        rows = [] if due is None or updated.schedule_version != updated.version else [
            self._rows.plan(updated, due, now, Trigger.SCHEDULE)]
        if not self._compare_and_set(updated, rows, expected_version, was_one_time):
            return False
        if due is not None and rows:
            self._rows.wake(rows)
            if not placed_in_time(rows, now, self._clock.now()):
                self._rows.place(updated, due)
        return True

    def _compare_and_set(self, updated: Job, rows: list[ScheduledExecution], expected_version: int,
                         was_one_time: bool = False) -> bool:
        """``JobStore.update_job``; an outcome it could not learn (it raised: a timed-out compare-and-set may
        still land) is settled by reading (``JobStore.get_job_settled``), never by waiting: True when this very
        change is the job now (its version and instant), False when it did not land and never will. If even
        that read fails, ``Unavailable`` (503): the caller may send the request again."""
        try:
            return self._store.update_job(updated, rows, expected_version, was_one_time=was_one_time)
        except Unavailable as exc:
            log.warning("job %s: the outcome of a change is unknown (%s); settling it by reading", updated.job_id, exc)
            return self._stands(updated)

    def _stands(self, updated: Job) -> bool:
        """Whether this very change is the job now (its version and instant), read settled
        (``JobStore.get_job_settled``): a change whose compare-and-set timed out, or whose row could not be placed
        again after it landed, is judged by it (#31)."""
        settled = self._store.get_job_settled(updated.user_id, updated.job_id)
        return settled is not None and settled.version == updated.version and (
            to_epoch_ms(settled.updated_at) == to_epoch_ms(updated.updated_at)) and _same_content(settled, updated)


def _same_content(settled: Job, updated: Job) -> bool:
    """Whether the job read back holds what ``updated`` wrote, beyond its version and instant: another writer that
    moved the job to the same version in the same millisecond (the retirement of a job deleted after its last fire,
    racing a PATCH: found by the model-based test's long run) wrote another state or spec. Compared as stored (the
    schedule as its dict), so that a row read back from Cassandra compares equal to what was written."""
    return (settled.state is updated.state and settled.spec.payload == updated.spec.payload
            and settled.spec.topic == updated.spec.topic
            and settled.spec.schedule.to_dict() == updated.spec.schedule.to_dict())

