"""A job's change log entry: who asked for what, when, and the job's version after it.

The services write one per request that changes a job (and the reconciler one per repair); the firing ledger
(``domain.ledger``) reads them back to know which schedule was in effect when. Stored by a ``ports.ChangeLog``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datetime import datetime


@dataclass(frozen=True)
class JobChange:
    """One entry of a job's change log: who asked for what, when, and the job's version after it."""

    job_id: str
    user_id: str
    changed_at: datetime
    change_id: str
    #: The principal that made the request (an IAM role, a Cognito identity, ...), else the tenant.
    actor: str
    #: submit, patch, pause, resume, cancel, run, backfill; repair (the reconciler re-planned a lost execution).
    action: str
    version: int
    details: dict[str, Any]
