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
    from jobrunner.ports import CalendarStore, Clock, Stores
    from jobrunner.services.wake import Waker

__all__ = [
    "MAX_BATCH", "MAX_PAGES_PER_LIST", "Backfill", "BulkResult", "ChangeBook", "Commands", "CountedQuotas",
    "JobChecks", "JobRules", "JobService", "KeptChangeLog", "Ledger", "NoCalendars",
    "NoChangeLog", "NoQuotas", "Queries", "QuotaBook", "RowWriter", "Submissions",
]


class JobService:
    """The job use cases composed on one store, clock and rules; each of its calls is the use case's own.

    A part of the deployment that is not there has its null: no quota counters, nothing is counted
    (``NoQuotas``); no change log, none is kept (``NoChangeLog``); no calendars, no tenant has one
    (``NoCalendars``); no wakes, no scan is woken (``services.wake.NoWaker``)."""

    def __init__(self, store: Stores, clock: Clock, rules: JobRules, *, waker: Waker, quotas: QuotaBook,
                 changes: ChangeBook, calendars: CalendarStore) -> None:
        checks = JobChecks(rules, calendars)
        rows = RowWriter(store, clock, rules.segment_count, waker)
        self.queries = Queries(store, clock, rules, calendars)
        self.ledger = Ledger(store, clock, rules, self.queries, changes)
        self.submissions = Submissions(store, clock, rules, checks=checks, rows=rows, queries=self.queries,
                                       quotas=quotas, changes=changes)
        self.commands = Commands(store, clock, rules, checks=checks, rows=rows, queries=self.queries,
                                 quotas=quotas, changes=changes)
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
