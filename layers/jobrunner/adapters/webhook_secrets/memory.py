"""Webhook signing secrets kept in memory: tests and the local stack (``JOBRUNNER_WEBHOOK_SECRETS``)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from jobrunner.adapters.webhook_secrets import new_secret
from jobrunner.ports import WebhookSecrets

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


class MemoryWebhookSecrets(WebhookSecrets):
    """Each tenant's secrets, newest first, as given; a tenant without any gets one on first use."""

    def __init__(self, secrets: Mapping[str, Sequence[str]] | None = None) -> None:
        self._lock = threading.Lock()
        self.secrets: dict[str, list[str]] = {tenant: list(texts) for tenant, texts in (secrets or {}).items()
                                              if texts}

    def signing_secrets(self, user_id: str) -> list[str]:
        with self._lock:
            return list(self.secrets.setdefault(user_id, [new_secret()]))
