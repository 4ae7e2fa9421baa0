"""A job's change log entry: who asked for what, when, and the job's version after it.

The services write one per request that changes a job (and the reconciler one per repair); the firing ledger
(``domain.ledger``) reads them back to know which schedule was in effect when. Stored by a ``ports.ChangeLog``.

A submit writes no entry: its entry is the job row's own (``submit_entry``), exact while the row is at version 1,
since every change that can alter the schedule or the state moves the version. The first change that moves it
past 1 writes that entry before its compare-and-set, and a reader of a job at version 1 adds it to what the log
holds (``services.jobs.changelog``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobrunner.domain.time import utc

if TYPE_CHECKING:
    from datetime import datetime

    from jobrunner.domain.jobs import Job

#: The action of a job's first entry: its submit.
SUBMIT = "submit"


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


def submit_entry(job: Job) -> JobChange | None:
    """The submit entry ``job``'s row stands for, if it stands for one: while it is at version 1, when it names
    who submitted it (a job stored before submitters were kept wrote an entry of its own). Version 1 at its
    creation (to the millisecond, as stored), by its submitter, with the schedule it was submitted with (the
    row's, at version 1); its id a function of the job's, so that each writer of it writes the same one row."""
    if job.version != 1 or job.created_by is None:
        return None
    return JobChange(job_id=job.job_id, user_id=job.user_id, changed_at=utc(job.created_at),
                     change_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"jobrunner:{job.job_id}|{SUBMIT}")),
                     actor=job.created_by, action=SUBMIT, version=1, details={"schedule": job.spec.schedule.to_dict()})
