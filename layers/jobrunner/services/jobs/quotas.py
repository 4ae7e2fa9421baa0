"""Counting a tenant's jobs against its limits, for the job use cases: the submission rate, and the standing
limits (jobs held, executions a minute) that a create, a change, a run now or a backfill takes or gives back.

``CountedQuotas`` counts on the tenants' counters (``ports.TenantQuotas``); ``NoQuotas`` stands where none
are configured, and counts nothing, so that every write goes ahead as it comes."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from jobrunner.domain.errors import LimitReached, Unavailable
from jobrunner.domain.jobs import JobState
from jobrunner.domain.limits import Limits, minute_of, refusal_reason

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from jobrunner.domain.jobs import Job
    from jobrunner.domain.limits import QuotaChange, TenantLimits
    from jobrunner.ports import Clock, TenantQuotas

log = logging.getLogger(__name__)


class QuotaBook(ABC):
    """What the job use cases ask of the tenants' counters.

    Contract:
    - ``standing`` is True when creates are counted against standing limits one at a time (a batch then goes
      through each submit's own steps).
    - ``admit`` counts submissions against the tenant's rate, all or none, and raises ``LimitReached`` (429)
      over it; nothing is written then.
    - ``counted`` runs a write with its ``QuotaChange`` counted (taken before, given back if it did not land)
      and returns what the write returned; a refusal raises ``LimitReached`` and writes nothing.
    - ``recount`` takes a repeated create's count again, idempotently under its job id; never refused.
    - A counter that cannot be reached never refuses: the write goes ahead uncounted, and is logged.
    """

    @property
    @abstractmethod
    def standing(self) -> bool: ...

    @abstractmethod
    def admit(self, user_id: str, now: datetime, count: int = 1) -> None: ...

    @abstractmethod
    def counted(self, user_id: str, change: QuotaChange, write: Callable[[], bool],
                landed: Callable[[], bool] | None = None, key: str | None = None) -> bool: ...

    @abstractmethod
    def recount(self, job: Job, created: Job) -> None: ...


class NoQuotas(QuotaBook):
    """No counters configured: no rate, no standing limit; every write goes ahead, counted nowhere."""

    @property
    def standing(self) -> bool:
        return False

    def admit(self, user_id: str, now: datetime, count: int = 1) -> None:
        return None

    def counted(self, user_id: str, change: QuotaChange, write: Callable[[], bool],
                landed: Callable[[], bool] | None = None, key: str | None = None) -> bool:
        return write()

    def recount(self, job: Job, created: Job) -> None:
        return None


class CountedQuotas(QuotaBook):
    """The tenants' limits (``domain.limits``) counted on their counters (``ports.TenantQuotas``)."""

    def __init__(self, quotas: TenantQuotas, limits: TenantLimits, clock: Clock) -> None:
        self._quotas = quotas
        self._limits = limits
        self._clock = clock

    @property
    def standing(self) -> bool:
        return self._limits.counts_jobs or self._limits.counts_minutes

    def admit(self, user_id: str, now: datetime, count: int = 1) -> None:
        """Count ``count`` submissions against the tenant's rate, all or none; over it, nothing is written
        (429). If the counter cannot be reached the submission goes ahead: the limit protects the service,
        and the stage's own throttle still bounds it; such admissions are logged."""
        rate = self._limits.of(user_id).submissions_per_second
        if rate is None:
            return
        if count > rate:
            raise LimitReached("submissions_per_second",
                               f"this tenant may submit at most {rate} jobs a second: send fewer at once",
                               retry_after_s=1)
        try:
            admitted = self._quotas.admit(user_id, int(now.timestamp()), rate, count=count)
        except Unavailable as exc:
            log.warning("quota counter unavailable, submission admitted uncounted: %s", exc)
            return
        if not admitted:
            raise LimitReached("submissions_per_second", f"this tenant may submit at most {rate} jobs a second",
                               retry_after_s=1)

    def counted(self, user_id: str, change: QuotaChange, write: Callable[[], bool],
                landed: Callable[[], bool] | None = None, key: str | None = None) -> bool:
        """Run ``write`` (True: it landed) with ``change`` counted against the tenant's standing limits:
        what grows is taken before the write (a refusal writes nothing: 429) and given back if the write
        does not land; what only gives back is given back once the write has landed. A write that raised may
        have landed all the same: ``landed`` settles that by reading (a repeat of the request finds it done and
        changes nothing, so what it took stands and what it frees is given back now); without it, or if that
        read fails too, it counts as not landed. Under ``key`` (a create with an idempotency key, by its job id)
        the count is idempotent: a repeat of the request that finds the job counts it again, once, should this
        one have given it back (``recount``). If the counter cannot be reached, the write goes ahead
        uncounted and is logged, as for the rate."""
        if change.empty:
            return write()
        grows = change.grows
        if grows:
            self._take(user_id, change, key)
        try:
            written = write()
        except BaseException:
            stands = _landed_anyway(landed)
            if grows and not stands:
                self._give_back(user_id, change, key)
            elif stands and not grows:  # a change that frees, landed though it answered an error (#31)
                self._take(user_id, change)
            raise
        if grows and not written:
            self._give_back(user_id, change, key)
        elif written and not grows:
            self._take(user_id, change)
        return written

    def recount(self, job: Job, created: Job) -> None:
        """Every idempotent path re-asserts its row, and a repeated create its count: the count the job took when
        ``created`` (as its first request built it) is taken again under its job id, which counts it once
        (``TenantQuotas.take``): a repair where the first request gave it back, unable to tell whether its write
        had landed (#31, found by the model: its settling read failed too). Never refused (the job stands);
        nothing for a job cancelled or deleted since, whose count was given back with it."""
        if job.state in (JobState.CANCELLED, JobState.DELETED):
            return
        change = self._limits.change(None, created)
        if change.empty:
            return
        try:
            self._quotas.take(job.user_id, change, Limits(), minute_of(self._clock.now()), key=job.job_id)
        except Unavailable as exc:
            log.warning("quota counter unavailable, a repeated create not counted again (%s): %s", change, exc)

    def _take(self, user_id: str, change: QuotaChange, key: str | None = None) -> None:
        limits = self._limits.of(user_id)
        now = self._clock.now()
        try:
            refused = self._quotas.take(user_id, change, limits, minute_of(now), key=key)
        except Unavailable as exc:
            log.warning("quota counter unavailable, change admitted uncounted (%s): %s", change, exc)
            return
        if refused is not None:
            current = change.add_minute == minute_of(now) and refused == "executions_per_minute"
            raise LimitReached(refused, refusal_reason(refused, limits, change),
                               retry_after_s=60 - now.second if current else 60)

    def _give_back(self, user_id: str, change: QuotaChange, key: str | None = None) -> None:
        try:
            self._quotas.give_back(user_id, change, key=key)
        except Unavailable as exc:
            log.warning("quota counter unavailable, a change that did not land stays counted (%s): %s", change, exc)


def _landed_anyway(landed: Callable[[], bool] | None) -> bool:
    """Whether a write that raised landed after all, as ``landed`` reads it (False when unknown)."""
    if landed is None:
        return False
    try:
        return landed()
    except Unavailable as exc:
        log.warning("could not tell whether a failed write landed; its count is given back: %s", exc)
        return False
