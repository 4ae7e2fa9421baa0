"""The change log port: each job's audit trail."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from jobrunner.domain.changes import JobChange


class ChangeLog(ABC):
    """Each job's change log, an audit trail of the requests that changed it (Cassandra in production).

    Contract:
    - ``record`` stores an entry, ``record_many`` several; recording the same (job_id, changed_at,
      change_id) again overwrites it with the same values (a retried write is harmless). An entry expires
      after the retention its writer gives it (the tenant's history retention).
    - ``changes(job_id, limit, before)`` returns up to ``limit`` entries of the job, newest first; with
      ``before`` (an entry's (changed_at, change_id)), only those after it in that order (the next page).
    - Backend failures raise ``jobrunner.domain.errors.Unavailable``.
    """

    @abstractmethod
    def record(self, change: JobChange) -> None: ...

    @abstractmethod
    def record_many(self, changes: Sequence[JobChange]) -> None: ...

    @abstractmethod
    def changes(self, job_id: str, limit: int, before: tuple[datetime, str] | None = None) -> list[JobChange]: ...
