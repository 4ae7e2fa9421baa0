"""TenantQuotas in memory (unit tests, and the model of the DynamoDB adapter in the contract tests)."""

from __future__ import annotations

import threading
from collections import Counter

from jobrunner.ports import TenantQuotas


class MemoryTenantQuotas(TenantQuotas):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.admitted: Counter[tuple[str, int]] = Counter()

    def admit(self, tenant: str, window: int, limit: int) -> bool:
        with self._lock:
            if self.admitted[(tenant, window)] >= limit:
                return False
            self.admitted[(tenant, window)] += 1
            return True
