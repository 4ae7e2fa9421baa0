"""Keeping each job's change log for the job use cases: an entry per change that landed, and its pages.

``KeptChangeLog`` writes and reads the log (``ports.ChangeLog``); ``NoChangeLog`` stands where the log is
turned off: nothing is written, every page is empty, and the ledger is told the log was not read to its end.

A submit writes no entry: its entry is the job row's (``domain.changes.submit_entry``). The first change that
moves a job past version 1 writes it (``keep_submit``) before its compare-and-set, and the reads here add it to
the log of a job still at version 1 (the one place that does): a job's log reads as it did when a submit wrote it.
A job stored before submitters were kept (``Job.created_by`` None) has the entry its submit wrote, and no other.
"""

from __future__ import annotations

import logging
import uuid
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from jobrunner.domain.changes import JobChange, submit_entry
from jobrunner.domain.errors import Unavailable
from jobrunner.domain.time import to_epoch_ms

if TYPE_CHECKING:
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
    - ``record`` adds an entry for a change that landed. Best effort: the change stands whether or not its
      entry could be written (a failure is logged; the entry is missing).
    - ``keep_submit(job)``, called with the job as read by a change about to move it past version 1, before
      its compare-and-set: writes the submit entry its row stands for (``domain.changes.submit_entry``), if it
      stands for one, else nothing. Best effort, as ``record``; written twice, it is one entry.
    - ``page(job_id, limit, before, job=)`` is a page of the job's entries, newest first (``ChangeLog.changes``);
      ``whole(job_id, job=)`` the job's whole log, newest first, and whether it was read back to its first entry.
      ``job`` is the job as just read (None: not found): the submit entry its row stands for is read as part of
      its log, once (whether ``keep_submit`` wrote it or not).
    - Reads that fail raise ``jobrunner.domain.errors.Unavailable``.
    """

    @abstractmethod
    def record(self, job: Job, action: str, actor: str | None, details: dict[str, Any]) -> None: ...

    @abstractmethod
    def keep_submit(self, job: Job) -> None: ...

    @abstractmethod
    def page(
        self, job_id: str, limit: int, before: tuple[datetime, str] | None = None, *, job: Job | None,
    ) -> list[JobChange]: ...

    @abstractmethod
    def whole(self, job_id: str, *, job: Job | None) -> tuple[list[JobChange], bool]: ...


class NoChangeLog(ChangeBook):
    """The log turned off: nothing kept, so nothing read (never read to its end: the job's own fields stand in)."""

    def record(self, job: Job, action: str, actor: str | None, details: dict[str, Any]) -> None:
        return None

    def keep_submit(self, job: Job) -> None:
        return None

    def page(
        self, job_id: str, limit: int, before: tuple[datetime, str] | None = None, *, job: Job | None,
    ) -> list[JobChange]:
        return []

    def whole(self, job_id: str, *, job: Job | None) -> tuple[list[JobChange], bool]:
        return [], False


class KeptChangeLog(ChangeBook):
    """The log kept in a ``ports.ChangeLog``, each entry stamped with the service's clock (a submit's with its
    job's creation)."""

    def __init__(self, changes: ChangeLog, clock: Clock) -> None:
        self._changes = changes
        self._clock = clock

    def record(self, job: Job, action: str, actor: str | None, details: dict[str, Any]) -> None:
        entry = JobChange(job_id=job.job_id, user_id=job.user_id, changed_at=self._clock.now(),
                          change_id=str(uuid.uuid4()), actor=actor or job.user_id, action=action, version=job.version,
                          details=details)
        self._write(entry)

    def keep_submit(self, job: Job) -> None:
        entry = submit_entry(job)
        if entry is not None:
            self._write(entry)

    def _write(self, entry: JobChange) -> None:
        try:
            self._changes.record(entry)
        except Unavailable as exc:
            log.warning("change log unavailable, %s of job %s by %s not logged: %s", entry.action, entry.job_id,
                        entry.actor, exc)

    def page(
        self, job_id: str, limit: int, before: tuple[datetime, str] | None = None, *, job: Job | None,
    ) -> list[JobChange]:
        """A page of the log as if it held the submit entry of a job at version 1 (``domain.changes.submit_entry``):
        the log's page with that entry in its place (its oldest, bar clocks apart), if it comes after ``before``."""
        entries = self._changes.changes(job_id, limit, before)
        derived = submit_entry(job) if job is not None else None
        if derived is None or not _after(derived, before) or _holds(entries, derived):
            return entries
        return sorted([*entries, derived], key=_newest_first)[:limit]

    def whole(self, job_id: str, *, job: Job | None) -> tuple[list[JobChange], bool]:
        """``LEDGER_PAGE`` entries a read, at most ``MAX_LEDGER_PAGES`` reads; with the submit entry of a job at
        version 1 when the log was read to its end (its oldest)."""
        entries: list[JobChange] = []
        before: tuple[datetime, str] | None = None
        for _ in range(MAX_LEDGER_PAGES):
            page = self._changes.changes(job_id, LEDGER_PAGE, before)
            entries += page
            if len(page) < LEDGER_PAGE:
                derived = submit_entry(job) if job is not None else None
                if derived is not None and not _holds(entries, derived):
                    entries = sorted([*entries, derived], key=_newest_first)
                return entries, True
            before = (page[-1].changed_at, page[-1].change_id)
        return entries, False


def _newest_first(entry: JobChange) -> tuple[int, str]:
    """The log's order (``ChangeLog.changes``): newest first, then by id."""
    return -to_epoch_ms(entry.changed_at), entry.change_id


def _after(entry: JobChange, before: tuple[datetime, str] | None) -> bool:
    """Whether ``entry`` comes after the cursor ``before`` in the log's order (any entry does, with none)."""
    return before is None or _newest_first(entry) > (-to_epoch_ms(before[0]), before[1])


def _holds(entries: list[JobChange], entry: JobChange) -> bool:
    """Whether ``entries`` hold ``entry`` (as written: one of the same id)."""
    return any(held.change_id == entry.change_id for held in entries)
