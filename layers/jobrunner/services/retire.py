"""Deleting the jobs that asked for it (``Job.delete_after_last``) once they are done (``domain.retire``).

The results function asks after each execution of such a job ends for good (a result, a timeout or a
dead letter with no retry left), and the scan after it records one of its fires SKIPPED: the last of its
executions to end finds the job done and deletes it. Nothing is asked for any other job.

Deleting a job marks it DELETED (a compare-and-set on its version, so a change that lands first keeps it),
then writes its row again to expire with its history (``JobStore.retire_job``): the API no longer finds it, and
a run now or a backfill requested just before (its row written, not yet published) still finds it and runs.

Cost, for such a job only: after each execution that ends, a read of its newest records; once, when it is
done, a conditional update and a write of its row, a change log entry and, where tenants' standing limits
are counted, the count given back. No write per execution.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Protocol

from jobrunner.domain.changes import JobChange
from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import RUN_RECORDS, JobState
from jobrunner.domain.limits import TenantLimits, minute_of
from jobrunner.domain.retire import done_for_good
from jobrunner.ports import HistoryStore, JobStore

if TYPE_CHECKING:
    from jobrunner.domain.jobs import Job
    from jobrunner.ports import ChangeLog, Clock, TenantQuotas

log = logging.getLogger(__name__)

#: Who the change log names for a delete nobody asked for at that moment (the job asked for it when made).
ACTOR = "jobrunner"


class RetireStores(JobStore, HistoryStore, Protocol):
    """The store ports a delete uses: the job's newest records (read), then the job (retired)."""


class Retirer:
    def __init__(self, store: RetireStores, clock: Clock, changes: ChangeLog | None = None,
                 quotas: TenantQuotas | None = None, limits: TenantLimits | None = None) -> None:
        self._store = store
        self._clock = clock
        self._changes = changes
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
                                       schedule_version=job.version + 1, updated_at=now, next_run_at=None)
            if not self._store.retire_job(deleted, job.version, self._limits.of(job.user_id).history_ttl_s):
                return False
        except Unavailable as exc:
            log.warning("could not delete job %s after its last fire: %s", job.job_id, exc)
            return False
        log.info("job %s deleted after its last fire", job.job_id, extra={"job_id": job.job_id})
        self._give_back(job)
        self._log(deleted)
        return True

    def _give_back(self, job: Job) -> None:
        """What ``job`` (as it was before its delete) held against its tenant's standing limits, given back."""
        change = self._limits.change(job, None)
        if self._quotas is None or change.empty:
            return
        try:
            self._quotas.take(job.user_id, change, self._limits.of(job.user_id), minute_of(self._clock.now()))
        except Unavailable as exc:
            log.warning("quota counter unavailable, the deleted job %s stays counted: %s", job.job_id, exc)

    def _log(self, job: Job) -> None:
        if self._changes is None:
            return
        entry = JobChange(job_id=job.job_id, user_id=job.user_id, changed_at=self._clock.now(),
                          change_id=str(uuid.uuid4()), actor=ACTOR, action="delete", version=job.version,
                          details={"reason": "its schedule has no fire left and its executions have ended "
                                             "(delete_after_last)"})
        try:
            self._changes.record(entry)
        except Unavailable as exc:
            log.warning("change log unavailable, the delete of job %s is not logged: %s", job.job_id, exc)
