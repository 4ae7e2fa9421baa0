"""The quota port: what each tenant was admitted to do."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobrunner.domain.limits import Limits, QuotaChange


class TenantQuotas(ABC):
    """Counters of what each tenant was admitted to do, per fixed window (DynamoDB in production).

    Contract:
    - ``admit(tenant, window, limit, count=1)`` counts ``count`` admissions of ``tenant`` in ``window`` (any
      integer naming the window, e.g. an epoch second) and returns True when at most ``limit - count`` had
      been counted in that window; otherwise it counts nothing and returns False. However many callers
      race, no window ever admits more than ``limit`` (one conditional write per call).
    - Tenants and windows are independent; a window's counter may be forgotten once it has passed.
    - Backend failures raise ``jobrunner.domain.errors.Unavailable``; an admission that raised may or
      may not have been counted.
    - ``take(tenant, change, limits, now_minute)`` applies ``change`` (``domain.limits.QuotaChange``) to
      the tenant's standing counts as ``domain.limits.apply`` rules, atomically: it returns None when
      applied, or the name of the limit the change would pass, and then changes nothing. Racing takes
      of one tenant are applied one after the other, so together they never pass a limit either. A
      change that only gives back is never refused; its ``drop_minute`` is given back on a best-effort
      basis (a failure there leaves the minute counted too high, which can only refuse more).
    - ``give_back(tenant, change)`` undoes a ``change`` taken before (its write failed): unchecked.
    - With a ``key`` (a job's create, under its job id), ``take`` and ``give_back`` are idempotent: a take under
      a key already counted changes nothing and returns None; a give-back under a key not counted (never taken,
      or given back already) changes nothing, and one that gives back forgets the key, which a later take counts
      again. So a request that could not tell whether its write landed gives back, and a repeat of it that finds
      its job counts it again, once (#31). A key is remembered for a day, as an idempotency key.
    """

    @abstractmethod
    def admit(self, tenant: str, window: int, limit: int, count: int = 1) -> bool: ...

    @abstractmethod
    def take(self, tenant: str, change: QuotaChange, limits: Limits, now_minute: int,
             key: str | None = None) -> str | None: ...

    @abstractmethod
    def give_back(self, tenant: str, change: QuotaChange, key: str | None = None) -> None: ...
