"""What the use cases that write a job (submissions and commands) are built with."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobrunner.ports import Clock, Stores
    from jobrunner.services.jobs.changelog import ChangeBook
    from jobrunner.services.jobs.checks import JobChecks
    from jobrunner.services.jobs.models import JobRules
    from jobrunner.services.jobs.queries import Queries
    from jobrunner.services.jobs.quotas import QuotaBook
    from jobrunner.services.jobs.rows import RowWriter


class JobWriter:
    """The collaborators a use case that writes jobs holds: every one required (a null object where a port is
    not configured: ``NoQuotas``, ``NoChangeLog``)."""

    def __init__(self, store: Stores, clock: Clock, rules: JobRules, *, checks: JobChecks, rows: RowWriter,
                 queries: Queries, quotas: QuotaBook, changes: ChangeBook) -> None:
        self._store = store
        self._clock = clock
        self._rules = rules
        #: The checks of the fields that need the tenant (topic, payload, calendar).
        self._checks = checks
        #: Places rows in time for their scan and wakes it.
        self._rows = rows
        self._queries = queries
        #: Counts what a write takes or frees of the tenant's limits (rate and standing).
        self._quotas = quotas
        #: Each job's change log: who asked for each change that landed.
        self._changes = changes
