"""Deleting the jobs that asked for it (``Job.delete_after_last``) once they are done (``domain.retire``).

The results function asks after each execution of such a job ends for good (a result, a timeout or a
dead letter with no retry left), and the scan after it records one of its fires SKIPPED: the last of its
executions to end finds the job done and deletes it. Nothing is asked for any other job.

Deleting a job marks it DELETED (a compare-and-set on its version, so a change that lands first keeps it),
then writes its row again to expire with its history (``JobStore.retire_job``): the API no longer finds it, and
a run now or a backfill requested just before (its row written, not yet published) still finds it and runs.

Cost, for such a job only: after each execution that ends, a read of its newest records; once, when it is
done, a conditional update and a write of its row, a change log entry (two for a job never changed: its
submit's too, ``ChangeBook.keep_submit``) and, where tenants' standing limits are counted, the count given
back. No write per execution.

``Retirer`` deletes them; ``NoRetirer`` stands where nothing is deleted (a service built without it).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Protocol

from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import RUN_RECORDS, JobState
from jobrunner.domain.limits import TenantLimits
from jobrunner.domain.retire import done_for_good
from jobrunner.ports import HistoryStore, JobStore

if TYPE_CHECKING:
    from jobrunner.domain.jobs import Job
    from jobrunner.ports import Clock
    from jobrunner.services.jobs.changelog import ChangeBook
    from jobrunner.services.jobs.quotas import QuotaBook

log = logging.getLogger(__name__)

#: Who the change log names for a delete nobody asked for at that moment (the job asked for it when made).
ACTOR = "jobrunner"

#: Why the change log says a job was deleted.
REASON = "its schedule has no fire left and its executions have ended (delete_after_last)"


class RetireStores(JobStore, HistoryStore, Protocol):
    """The store ports a delete uses: the job's newest records (read), then the job (retired)."""


class Retirement(ABC):
    """What the results function and the scan ask once an execution of a job ends for good.

    Contract: ``consider(job)`` (the job as just read) deletes it if it asked for it and is done, and returns
    True when this call deleted it. Never raises: a failure leaves the job for the next execution to end.
    """

    @abstractmethod
    def consider(self, job: Job) -> bool: ...


class NoRetirer(Retirement):
    """Nothing is deleted after its last fire: the job stays, done."""

    def consider(self, job: Job) -> bool:
        return False


class Retirer(Retirement):
    def __init__(self, store: RetireStores, clock: Clock, *, changes: ChangeBook, quotas: QuotaBook,
                 limits: TenantLimits | None = None) -> None:
        self._store = store
        self._clock = clock
        #: Where the delete is logged (``NoChangeLog``: nowhere).
        self._changes = changes
        #: Where what the job held against its tenant's standing limits is given back (``NoQuotas``: nowhere).
        self._quotas = quotas
        self._limits = limits or TenantLimits()

    def consider(self, job: Job) -> bool:
        """Delete ``job`` (as just read) if it asked for it and is done; True when this call deleted it. Only a
        job with ``delete_after_last`` costs anything. Failures are logged, never raised: the next execution of
        the job to end asks again (and a job left behind is only a job not deleted)."""
        if not job.spec.delete_after_last:
            return False
        try:
            records = self._store.latest_records([job.job_id], RUN_RECORDS)[job.job_id]
            if not done_for_good(job, records):
                return False
            now = self._clock.now()
            deleted = job.with_changes(state=JobState.DELETED, version=job.version + 1,
                                       schedule_version=job.version + 1, updated_at=now, next_run_at=None,
                                       schedule_from=None)
            ttl = self._limits.of(job.user_id).history_ttl_s
            self._changes.keep_submit(job)  # the row moves past version 1: its submit entry is written first
            # What the job held is given back once its delete has landed (a change that only gives back).
            if not self._quotas.counted(job.user_id, self._limits.change(job, None),
                                        lambda: self._store.retire_job(deleted, job.version, ttl)):
                return False
        except Unavailable as exc:
            log.warning("could not delete job %s after its last fire: %s", job.job_id, exc)
            return False
        log.info("job %s deleted after its last fire", job.job_id, extra={"job_id": job.job_id})
        self._changes.record(deleted, "delete", ACTOR, {"reason": REASON})
        return True
