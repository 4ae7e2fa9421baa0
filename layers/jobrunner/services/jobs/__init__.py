"""Submitting, reading and managing jobs: a use case per module, and ``JobService``, their one face.

- ``submit``: a job or a batch (``Submissions``); ``commands``: cancel, pause, resume, PATCH, run now,
  backfill, bulk (``Commands``); ``queries``: a job, a page of jobs, what an answer shows of each
  (``Queries``); ``ledger``: a job's firing ledger, history and change log (``Ledger``).
- Their collaborators, each required: ``checks`` (a job's fields), ``rows`` (its rows written in time for
  their scans), ``quotas`` (the tenant's limits counted: ``CountedQuotas``, or ``NoQuotas``) and ``changelog``
  (the change log kept: ``KeptChangeLog``, or ``NoChangeLog``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobrunner.services.jobs.changelog import ChangeBook, KeptChangeLog, NoChangeLog
from jobrunner.services.jobs.checks import JobChecks, NoCalendars
from jobrunner.services.jobs.commands import Commands
from jobrunner.services.jobs.ledger import Ledger
from jobrunner.services.jobs.models import Backfill, BulkResult, JobRules
from jobrunner.services.jobs.queries import MAX_PAGES_PER_LIST, Queries
from jobrunner.services.jobs.quotas import CountedQuotas, NoQuotas, QuotaBook
from jobrunner.services.jobs.rows import RowWriter
from jobrunner.services.jobs.submit import MAX_BATCH, Submissions

if TYPE_CHECKING:
    from jobrunner.ports import CalendarStore, ChangeLog, Clock, Stores, TenantQuotas
    from jobrunner.services.wake import ScanWaker

__all__ = [
    "MAX_BATCH", "MAX_PAGES_PER_LIST", "Backfill", "BulkResult", "ChangeBook", "Commands", "CountedQuotas",
    "JobChecks", "JobRules", "JobService", "KeptChangeLog", "Ledger", "NoCalendars",
    "NoChangeLog", "NoQuotas", "Queries", "QuotaBook", "RowWriter", "Submissions",
]


class JobService:
    """The job use cases composed on one store, clock and rules; each of its calls is the use case's own.

    A port left out is a part of the deployment that is not there: no ``quotas``, nothing is counted
    (``NoQuotas``); no ``changes``, no change log is kept (``NoChangeLog``); no ``calendars``, no tenant has one
    (``NoCalendars``); no ``waker``, no scan is woken (``services.wake``)."""

    def __init__(self, store: Stores, clock: Clock, rules: JobRules, waker: ScanWaker | None = None,
                 quotas: TenantQuotas | None = None, changes: ChangeLog | None = None,
                 calendars: CalendarStore | None = None) -> None:
        counts: QuotaBook = NoQuotas() if quotas is None else CountedQuotas(quotas, rules.limits, clock)
        log: ChangeBook = NoChangeLog() if changes is None else KeptChangeLog(changes, clock)
        kept: CalendarStore = NoCalendars() if calendars is None else calendars
        checks = JobChecks(rules, kept)
        rows = RowWriter(store, clock, rules.segment_count, waker)
        self.queries = Queries(store, clock, rules, kept)
        self.ledger = Ledger(store, clock, rules, self.queries, log)
        self.submissions = Submissions(store, clock, rules, checks=checks, rows=rows, queries=self.queries,
                                       quotas=counts, changes=log)
        self.commands = Commands(store, clock, rules, checks=checks, rows=rows, queries=self.queries,
                                 quotas=counts, changes=log)
        self.submit = self.submissions.submit
        self.submit_many = self.submissions.submit_many
        self.payload_limit = checks.payload_limit
        self.get = self.queries.get
        self.list_jobs = self.queries.list_jobs
        self.fires_left = self.queries.fires_left
        self.preview = self.queries.preview
        self.excluded = self.queries.excluded
        self.fires = self.ledger.fires
        self.executions = self.ledger.executions
        self.changes = self.ledger.changes
        self.cancel = self.commands.cancel
        self.pause = self.commands.pause
        self.resume = self.commands.resume
        self.change = self.commands.change
        self.run_now = self.commands.run_now
        self.backfill = self.commands.backfill
        self.bulk = self.commands.bulk
