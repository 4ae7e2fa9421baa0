"""Webhook signing secrets in AWS Secrets Manager: one secret per tenant.

The secret is named ``<prefix><tenant>`` (``Settings.webhook_secret_prefix``, ``jobrunner/webhooks/`` by default)
and holds a JSON list of ``{"id", "secret", "created_at"}``, newest first: one entry, or two while a rotation
lets receivers move to the new one (the API that creates and rotates them writes the same shape). A tenant
without a secret gets one on its first delivery, created here, so every delivery is signed and the tenant reads
through the API the secret it must verify with; two deliveries racing on that first use both return the one
created first. A tenant's secrets are kept for ``cache_s`` (a rotation reaches the deliveries within it).
"""

from __future__ import annotations

import json
import secrets
import threading
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from jobrunner.adapters.webhook_secrets import new_secret
from jobrunner.domain.time import rfc3339
from jobrunner.ports import WebhookSecrets

if TYPE_CHECKING:
    from datetime import datetime

    from jobrunner.ports import Clock

#: How long a tenant's secrets are reused before they are read again.
CACHE_S = 60.0


class SecretsManagerWebhookSecrets(WebhookSecrets):
    def __init__(self, prefix: str, client: Any, clock: Clock, cache_s: float = CACHE_S) -> None:
        self._prefix = prefix
        self._client = client
        self._clock = clock
        self._cache_for = timedelta(seconds=cache_s)
        self._lock = threading.Lock()
        self._cached: dict[str, tuple[datetime, list[str]]] = {}

    def secret_name(self, user_id: str) -> str:
        """The name of ``user_id``'s secret."""
        return self._prefix + user_id

    def signing_secrets(self, user_id: str) -> list[str]:
        now = self._clock.now()
        with self._lock:
            cached = self._cached.get(user_id)
        if cached is not None and now - cached[0] < self._cache_for:
            return list(cached[1])
        texts = self._read(user_id)
        if texts is None:
            texts = self._create(user_id)
        with self._lock:
            self._cached[user_id] = (now, texts)
        return list(texts)

    def _read(self, user_id: str) -> list[str] | None:
        """The tenant's secrets, newest first; None when it has no secret yet."""
        try:
            response = self._client.get_secret_value(SecretId=self.secret_name(user_id))
        except self._client.exceptions.ResourceNotFoundException:
            return None
        entries = json.loads(response["SecretString"])
        if not isinstance(entries, list) or not entries:
            raise ValueError(f"secret {self.secret_name(user_id)!r} holds no list of signing secrets")
        ordered = sorted(entries, key=lambda entry: str(entry["created_at"]), reverse=True)
        return [str(entry["secret"]) for entry in ordered]

    def _create(self, user_id: str) -> list[str]:
        """Create the tenant's first secret; if another delivery created it meanwhile, that one's."""
        entry = {"id": f"sec_{secrets.token_hex(8)}", "secret": new_secret(), "created_at": rfc3339(self._clock.now())}
        try:
            self._client.create_secret(Name=self.secret_name(user_id), SecretString=json.dumps([entry]),
                                       Description=f"webhook signing secrets of tenant {user_id}")
        except self._client.exceptions.ResourceExistsException:
            found = self._read(user_id)
            if found is None:
                raise
            return found
        return [entry["secret"]]
