"""Keeping each job's change log for the job use cases: an entry per change that landed, and its pages.

``KeptChangeLog`` writes and reads the log (``ports.ChangeLog``); ``NoChangeLog`` stands where the log is
turned off: nothing is written, every page is empty, and the ledger is told the log was not read to its end."""

from __future__ import annotations

import logging
import uuid
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from jobrunner.domain.changes import JobChange
from jobrunner.domain.errors import Unavailable

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from jobrunner.domain.jobs import Job
    from jobrunner.ports import ChangeLog, Clock

log = logging.getLogger(__name__)

#: Entries the ledger reads per page of the log, and the most pages it reads.
LEDGER_PAGE = 500
MAX_LEDGER_PAGES = 10


class ChangeBook(ABC):
    """What the job use cases ask of the change log.

    Contract:
    - ``record`` adds an entry for a change that landed, ``record_many`` several written together. Best effort:
      the change stands whether or not its entry could be written (a failure is logged; the entry is missing).
    - ``page(job_id, limit, before)`` is a page of the job's entries, newest first (``ChangeLog.changes``).
    - ``whole(job_id)`` is the job's whole log, newest first, and whether it was read back to its first entry.
    - Reads that fail raise ``jobrunner.domain.errors.Unavailable``.
    """

    @abstractmethod
    def record(self, job: Job, action: str, actor: str | None, details: dict[str, Any]) -> None: ...

    @abstractmethod
    def record_many(self, changes: Sequence[tuple[Job, str, dict[str, Any]]], actor: str | None) -> None: ...

    @abstractmethod
    def page(self, job_id: str, limit: int, before: tuple[datetime, str] | None = None) -> list[JobChange]: ...

    @abstractmethod
    def whole(self, job_id: str) -> tuple[list[JobChange], bool]: ...


class NoChangeLog(ChangeBook):
    """The log turned off: nothing kept, so nothing read (never read to its end: the job's own fields stand in)."""

    def record(self, job: Job, action: str, actor: str | None, details: dict[str, Any]) -> None:
        return None

    def record_many(self, changes: Sequence[tuple[Job, str, dict[str, Any]]], actor: str | None) -> None:
        return None

    def page(self, job_id: str, limit: int, before: tuple[datetime, str] | None = None) -> list[JobChange]:
        return []

    def whole(self, job_id: str) -> tuple[list[JobChange], bool]:
        return [], False


class KeptChangeLog(ChangeBook):
    """The log kept in a ``ports.ChangeLog``, each entry stamped with the service's clock."""

    def __init__(self, changes: ChangeLog, clock: Clock) -> None:
        self._changes = changes
        self._clock = clock

    def record(self, job: Job, action: str, actor: str | None, details: dict[str, Any]) -> None:
        entry = JobChange(job_id=job.job_id, user_id=job.user_id, changed_at=self._clock.now(),
                          change_id=str(uuid.uuid4()), actor=actor or job.user_id, action=action, version=job.version,
                          details=details)
        try:
            self._changes.record(entry)
        except Unavailable as exc:
            log.warning("change log unavailable, %s of job %s by %s not logged: %s", action, job.job_id, actor, exc)

    def record_many(self, changes: Sequence[tuple[Job, str, dict[str, Any]]], actor: str | None) -> None:
        if not changes:
            return
        now = self._clock.now()
        entries = [JobChange(job_id=job.job_id, user_id=job.user_id, changed_at=now, change_id=str(uuid.uuid4()),
                             actor=actor or job.user_id, action=action, version=job.version, details=details)
                   for job, action, details in changes]
        try:
            self._changes.record_many(entries)
        except Unavailable as exc:
            log.warning("change log unavailable, %d changes by %s not logged: %s", len(entries), actor, exc)

    def page(self, job_id: str, limit: int, before: tuple[datetime, str] | None = None) -> list[JobChange]:
        return self._changes.changes(job_id, limit, before)

    def whole(self, job_id: str) -> tuple[list[JobChange], bool]:
        """``LEDGER_PAGE`` entries a read, at most ``MAX_LEDGER_PAGES`` reads."""
        entries: list[JobChange] = []
        before: tuple[datetime, str] | None = None
        for _ in range(MAX_LEDGER_PAGES):
            page = self._changes.changes(job_id, LEDGER_PAGE, before)
            entries += page
            if len(page) < LEDGER_PAGE:
                return entries, True
            before = (page[-1].changed_at, page[-1].change_id)
        return entries, False
