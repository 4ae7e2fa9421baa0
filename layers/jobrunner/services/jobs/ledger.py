"""A job's past, a page at a time: its firing ledger (``domain.ledger``), its history and its change log; of a
job deleted after its last fire too, while its records and entries are kept."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from jobrunner.domain.calendars import exclusion_note
from jobrunner.domain.errors import InvalidField, JobNotFound
from jobrunner.domain.ledger import MAX_FIRES_PER_PAGE, MAX_RANGE, LedgerPage, fires_between, ledger, timeline_of
from jobrunner.services.jobs.changelog import LEDGER_PAGE, MAX_LEDGER_PAGES

if TYPE_CHECKING:
    from datetime import datetime

    from jobrunner.domain.changes import JobChange
    from jobrunner.domain.jobs import ExecutionRecord
    from jobrunner.ports import Clock, Stores
    from jobrunner.services.jobs.changelog import ChangeBook
    from jobrunner.services.jobs.models import JobRules
    from jobrunner.services.jobs.queries import Queries

#: Records read before a ledger's range, for a job with a catch-up window (a drop may have begun before it).
LEDGER_EARLIER = 20


class Ledger:
    """The pages of a job's past; another tenant's job is "not found"."""

    def __init__(self, store: Stores, clock: Clock, rules: JobRules, queries: Queries, changes: ChangeBook) -> None:
        self._store = store
        self._clock = clock
        self._rules = rules
        self._queries = queries
        self._changes = changes

    def fires(
        self, user_id: str, job_id: str, start: datetime, end: datetime, limit: int = 100,
        after: datetime | None = None,
    ) -> LedgerPage:
        """A page of the job's firing ledger (``domain.ledger``): the fires its schedule called for in
        [``start``, ``end``] (after ``after``, the last fire of the page before), each with what became of it.

        Reads: the job (and its newest records, as every read of a job), its change log newest first down
        to its first entry (``LEDGER_PAGE`` entries a read), and its history records of the page's range
        (``LEDGER_PAGE`` a read), each at most ``MAX_LEDGER_PAGES`` reads."""
        if limit < 1 or limit > MAX_FIRES_PER_PAGE:
            raise InvalidField("limit", f"must be between 1 and {MAX_FIRES_PER_PAGE}")
        if end < start:
            raise InvalidField("to", "is before from")
        if end - start > MAX_RANGE:
            raise InvalidField("to", f"the range may span at most {MAX_RANGE.days} days; page through a longer one")
        if after is not None and not start <= after <= end:
            raise InvalidField("cursor", "is not a cursor of this range")
        job = self._queries.get(user_id, job_id)  # tenancy check: another tenant's job is "not found"
        now = self._clock.now()
        low = after + timedelta(milliseconds=1) if after is not None else start
        timeline = timeline_of(job, *self._changes.whole(job_id, job=job))
        planned = fires_between(timeline, low, end, limit + 1, now)
        high = planned[limit] if len(planned) > limit else end
        records = self._records_between(job_id, low, high)
        # a catch-up window's drop that began before the range stands for fires in it: the records just before
        earlier = (self._store.history_page(job_id, LEDGER_EARLIER, (low, 0, None))
                   if not job.spec.catch_up.replays_all else [])
        kept = timedelta(days=self._rules.limits.of(user_id).history_days)
        calendar = self._queries.calendar_of(job)

        def excluded_by(fire: datetime) -> str | None:
            exclusion = calendar.excluding(fire) if calendar is not None else None
            return exclusion_note(calendar, exclusion) if calendar is not None and exclusion is not None else None

        return ledger(job, timeline, records, start=low, end=end, now=now, kept_since=now - kept, limit=limit,
                      excluded_by=excluded_by, earlier=earlier)

    def _records_between(self, job_id: str, low: datetime, high: datetime) -> list[ExecutionRecord]:
        """The job's history records with ``scheduled_at`` in [``low``, ``high``], newest first."""
        found: list[ExecutionRecord] = []
        before: tuple[datetime, int, str | None] = (high + timedelta(milliseconds=1), 0, None)
        for _ in range(MAX_LEDGER_PAGES):
            page = self._store.history_page(job_id, LEDGER_PAGE, before)
            found += [r for r in page if r.scheduled_at >= low]
            if len(page) < LEDGER_PAGE or page[-1].scheduled_at < low:
                break
            last = page[-1]
            before = (last.scheduled_at, last.attempt, last.execution_id)
        return found

    def executions(
        self, user_id: str, job_id: str, limit: int = 50, before: tuple[datetime, int, str | None] | None = None
    ) -> list[ExecutionRecord]:
        """A page of the job's history (``HistoryStore.history_page``: ``before`` names the last record of the page
        before); of a job deleted after its last fire too (``delete_after_last``), while its records are kept:
        each names its tenant."""
        if self._store.get_job(user_id, job_id) is None:
            newest = self._store.history_page(job_id, 1)
            if not newest or newest[0].user_id != user_id:  # another tenant's job is "not found"
                raise JobNotFound(job_id)
        return self._store.history_page(job_id, limit, before)

    def changes(
        self, user_id: str, job_id: str, limit: int = 50, before: tuple[datetime, str] | None = None
    ) -> list[JobChange]:
        """A page of the job's change log, newest first (``ChangeLog.changes``); of a job deleted after its last
        fire too, while its entries are kept."""
        job = self._store.get_job(user_id, job_id)
        if job is None:
            newest = self._changes.page(job_id, 1, job=None)
            if not newest or newest[0].user_id != user_id:  # another tenant's job is "not found"
                raise JobNotFound(job_id)
        return self._changes.page(job_id, limit, before, job=job)
