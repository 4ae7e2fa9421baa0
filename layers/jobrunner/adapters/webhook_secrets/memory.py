"""Webhook signing secrets kept in memory: unit tests, and a process with no Secrets Manager to reach."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from jobrunner.adapters.clocks.system import SystemClock
from jobrunner.adapters.webhook_secrets import KeptWebhookSecrets, Snapshot

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from jobrunner.domain.targets import TenantSecrets
    from jobrunner.ports import Clock


class MemoryWebhookSecrets(KeptWebhookSecrets):
    """Each tenant's secrets with a version counted up by each write; ``secrets`` seed the tenants they name."""

    def __init__(self, secrets: Mapping[str, Sequence[str]] | None = None, clock: Clock | None = None) -> None:
        super().__init__(clock or SystemClock(), secrets)
        self._lock = threading.Lock()
        self._by_tenant: dict[str, tuple[TenantSecrets, int]] = {}

    def _load(self, user_id: str, *, fresh: bool) -> Snapshot | None:
        with self._lock:
            found = self._by_tenant.get(user_id)
        return None if found is None else (found[0], str(found[1]))

    def _create(self, user_id: str, first: TenantSecrets) -> TenantSecrets:
        with self._lock:
            return self._by_tenant.setdefault(user_id, (first, 0))[0]

    def _replace(self, user_id: str, secrets: TenantSecrets, based_on: str) -> TenantSecrets:
        with self._lock:
            kept, version = self._by_tenant[user_id]
            if str(version) != based_on:
                return kept
            self._by_tenant[user_id] = (secrets, version + 1)
            return secrets
