"""Reading jobs as they stand: one, a page of a tenant's (filtered), and what an answer shows of each (the fires
it has left, its next fires, those its calendar excludes)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from jobrunner.domain.calendars import exclusion_note
from jobrunner.domain.errors import JobNotFound
from jobrunner.domain.jobs import RUN_RECORDS, JobState, JobStatus, with_runs
from jobrunner.domain.schedules import fires_left
from jobrunner.domain.selection import JobFilter

if TYPE_CHECKING:
    from datetime import datetime

    from jobrunner.domain.calendars import Calendar
    from jobrunner.domain.jobs import Job
    from jobrunner.ports import CalendarStore, Clock, Stores
    from jobrunner.services.jobs.models import JobRules

#: How many store pages one filtered list request may read before answering (with a cursor).
MAX_PAGES_PER_LIST = 20


class Queries:
    """A tenant's jobs, each with its run fields derived from its newest history records."""

    def __init__(self, store: Stores, clock: Clock, rules: JobRules, calendars: CalendarStore) -> None:
        self._store = store
        self._clock = clock
        self._rules = rules
        #: The tenants' calendars (``domain.calendars``): a job may name one of its tenant's.
        self._calendars = calendars

    def get(self, user_id: str, job_id: str) -> Job:
        """The job with its run fields, derived from its newest history records (``domain.jobs.with_runs``). A job
        deleted after its last fire is not found (its history and change log still are)."""
        job = self._store.get_job(user_id, job_id)
        if job is None or job.state is JobState.DELETED:
            raise JobNotFound(job_id)
        return self.with_runs([job])[0]

    def with_runs(self, jobs: list[Job]) -> list[Job]:
        records = self._store.latest_records([job.job_id for job in jobs], RUN_RECORDS) if jobs else {}
        return [self._next_run_kept(with_runs(job, records[job.job_id])) for job in jobs]

    def _next_run_kept(self, job: Job) -> Job:
        """A next run older than the tenant's history retention comes from the job row, not from a record
        (which has expired): the job has fired since. Its next run is then the schedule's next fire."""
        now = self._clock.now()
        kept = timedelta(days=self._rules.limits.of(job.user_id).history_days)
        if job.state is not JobState.ACTIVE or job.next_run_at is None or job.next_run_at >= now - kept:
            return job
        return job.with_changes(next_run_at=job.spec.schedule.next_fire_after(now))

    def list_jobs(
        self, user_id: str, limit: int, cursor: str | None, status: JobStatus | None = None,
        where: JobFilter | None = None,
    ) -> tuple[list[Job], str | None]:
        """A page of the tenant's jobs, optionally only those in ``status`` or matching ``where`` (read from
        the tenant's own partition only). A filtered page may hold fewer than ``limit`` jobs (even none) and
        still have a next cursor: keep following it until it is None."""
        where = where or JobFilter(status=status)
        if where.everything:  # (a deleted job is left out: a page may hold fewer than limit jobs)
            page, cursor = self._store.list_jobs(user_id, limit, cursor)
            return self.with_runs([job for job in page if job.state is not JobState.DELETED]), cursor
        found: list[Job] = []
        for _ in range(MAX_PAGES_PER_LIST):
            page, cursor = self._store.list_jobs(user_id, limit - len(found), cursor)
            found += [job for job in self.with_runs(page) if where.matches(job) and job.state is not JobState.DELETED]
            if cursor is None or len(found) >= limit:
                break
        return found, cursor

    @staticmethod
    def fires_left(job: Job) -> int | None:
        """How many fires the job has left from its next run (its end conditions), None when more than
        ``MAX_COUNT`` or no end; 0 for a job with no next run."""
        schedule = job.spec.schedule
        ends = any(getattr(schedule, name, None) is not None for name in ("end", "until", "count", "at"))
        if job.state is not JobState.ACTIVE or not ends:
            return None
        return fires_left(schedule, job.next_run_at)

    @staticmethod
    def preview(job: Job, count: int) -> list[datetime]:
        """The next ``count`` fire times of an active job, from its next run."""
        fires: list[datetime] = []
        instant = job.next_run_at
        while instant is not None and len(fires) < count and job.state is JobState.ACTIVE:
            fires.append(instant)
            instant = job.spec.schedule.next_fire_after(instant)
        return fires

    def excluded(self, job: Job, fires: list[datetime]) -> dict[datetime, str]:
        """Those of ``fires`` the job's calendar excludes (as it stands now), each with the reason in words.
        One read of the calendar, for a job that names one; none otherwise."""
        calendar = self.calendar_of(job)
        if calendar is None:
            return {}
        return {fire: exclusion_note(calendar, exclusion) for fire in fires
                if (exclusion := calendar.excluding(fire)) is not None}

    def calendar_of(self, job: Job) -> Calendar | None:
        """The calendar the job names, as it stands now (one read), or None."""
        if job.spec.calendar is None:
            return None
        return self._calendars.get(job.user_id, job.spec.calendar)
