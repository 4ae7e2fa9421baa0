"""TenantQuotas in memory (unit tests, and the model of the DynamoDB adapter in the contract tests)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import TYPE_CHECKING

from jobrunner.domain.limits import QuotaChange, Standing, apply
from jobrunner.ports import TenantQuotas

if TYPE_CHECKING:
    from jobrunner.domain.limits import Limits


class MemoryTenantQuotas(TenantQuotas):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.admitted: Counter[tuple[str, int]] = Counter()
        self.standing: dict[str, Standing] = {}
        #: One-time fires counted per (tenant, minute).
        self.minutes: Counter[tuple[str, int]] = Counter()
        #: The keys counted, per tenant (``take(key=...)``; here they are never forgotten by time).
        self.keys: set[tuple[str, str]] = set()

    def admit(self, tenant: str, window: int, limit: int, count: int = 1) -> bool:
        with self._lock:
            if self.admitted[(tenant, window)] + count > limit:
                return False
            self.admitted[(tenant, window)] += count
            return True

    def take(self, tenant: str, change: QuotaChange, limits: Limits, now_minute: int,
             key: str | None = None) -> str | None:
        with self._lock:
            if key is not None and (tenant, key) in self.keys:
                return None
            before = self.standing.get(tenant, Standing())
            count = self.minutes[(tenant, change.add_minute)] if change.add_minute is not None else 0
            refused, after, count = apply(before, count, change, limits, now_minute)
            if refused is not None:
                return refused
            self.standing[tenant] = after
            if change.add_minute is not None:
                self.minutes[(tenant, change.add_minute)] = count
            self._drop(tenant, change.drop_minute)
            if key is not None:
                self.keys.add((tenant, key))
            return None

    def give_back(self, tenant: str, change: QuotaChange, key: str | None = None) -> None:
        undo = change.inverse()
        with self._lock:
            if key is not None:
                if (tenant, key) not in self.keys:
                    return
                self.keys.discard((tenant, key))
            before = self.standing.get(tenant, Standing())
            self.standing[tenant] = Standing(max(0, before.jobs + undo.jobs),
                                             max(0, before.per_minute + undo.per_minute), before.peak, before.until)
            if undo.add_minute is not None:  # the minute a move left: its one fire back
                self.minutes[(tenant, undo.add_minute)] += 1
            self._drop(tenant, undo.drop_minute, change.fires)

    def _drop(self, tenant: str, minute: int | None, fires: int = 1) -> None:
        if minute is not None and self.minutes[(tenant, minute)] >= fires:
            self.minutes[(tenant, minute)] -= fires
