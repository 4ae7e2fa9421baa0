"""Webhook signing secrets in AWS Secrets Manager: one secret per tenant.

The secret is named ``<prefix><tenant>`` (``Settings.webhook_secret_prefix``, ``jobrunner/webhooks/`` by default)
and holds a JSON list of ``{"id", "secret", "created_at"}`` (and ``"valid_until"`` for a previous secret in its
grace), newest first (``domain.targets.rotation``). A tenant without a secret gets one on its first use, created
here; two first uses racing both return the one created first. ``signing_secrets`` reuses a tenant's secrets for
``cache_s`` (a rotation reaches the deliveries of other processes within it); the API's reads and writes go to
Secrets Manager every time.

Why the writes are safe without a lock: Secrets Manager has no compare-and-set on a secret's value, and reading
again after a write does not close the gap (a rotation may read, another write and verify, then the first
overwrite it: a secret answered to a caller is lost). But a version's id is the ``ClientRequestToken`` its writer
chose, and a token already used with another value is refused (``ResourceExistsException``). Every write here is
based on the version it read, and takes as its token a name derived from that version (``successor_token``): a
version has at most one successor, so of two writes based on the same read one lands and the other is refused,
reads what the first left and answers that. (Secrets Manager removes versions without a stage once a secret has
about 100; a write based on a version read that long ago is beyond this store's rotations by far.)
"""

from __future__ import annotations

import json
import threading
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from jobrunner.adapters.webhook_secrets import KeptWebhookSecrets, Snapshot
from jobrunner.domain.errors import Unavailable
from jobrunner.domain.targets import TenantSecrets

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime

    from jobrunner.ports import Clock

#: How long a tenant's secrets are reused for signing before they are read again.
CACHE_S = 60.0
#: The namespace of the versions' tokens (``successor_token``).
_TOKENS = uuid.UUID("5b0d6c3e-35a1-4b8e-9b1e-6f1d2a3c4e5f")


def successor_token(name: str, version: str) -> str:
    """The ``ClientRequestToken`` of the version written on top of ``version`` of secret ``name``: the same for
    every writer that read that version, so only one of them lands."""
    return str(uuid.uuid5(_TOKENS, f"{name}\n{version}"))


class SecretsManagerWebhookSecrets(KeptWebhookSecrets):
    def __init__(self, prefix: str, client: Any, clock: Clock, cache_s: float = CACHE_S,
                 seeds: Mapping[str, Sequence[str]] | None = None) -> None:
        super().__init__(clock, seeds)
        self._prefix = prefix
        self._client = client
        self._cache_for = timedelta(seconds=cache_s)
        self._lock = threading.Lock()
        self._cached: dict[str, tuple[datetime, Snapshot]] = {}

    def secret_name(self, user_id: str) -> str:
        """The name of ``user_id``'s secret."""
        return self._prefix + user_id

    def _load(self, user_id: str, *, fresh: bool) -> Snapshot | None:
        now = self._clock.now()
        with self._lock:
            cached = self._cached.get(user_id)
        if not fresh and cached is not None and now - cached[0] < self._cache_for:
            return cached[1]
        name = self.secret_name(user_id)
        try:
            response = self._call("get_secret_value", SecretId=name)
        except self._client.exceptions.ResourceNotFoundException:
            return None
        try:
            kept = TenantSecrets.from_list(json.loads(response["SecretString"]))
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"secret {name!r} holds no list of signing secrets") from error
        return self._remember(user_id, (kept, str(response["VersionId"])))

    def _create(self, user_id: str, first: TenantSecrets) -> TenantSecrets:
        try:
            response = self._call("create_secret", Name=self.secret_name(user_id), SecretString=json.dumps(
                first.to_list()), Description=f"webhook signing secrets of tenant {user_id}")
        except self._client.exceptions.ResourceExistsException:
            return self._settled(user_id)
        return self._remember(user_id, (first, str(response["VersionId"])))[0]

    def _replace(self, user_id: str, secrets: TenantSecrets, based_on: str) -> TenantSecrets:
        name = self.secret_name(user_id)
        try:
            response = self._call("put_secret_value", SecretId=name, SecretString=json.dumps(secrets.to_list()),
                                  ClientRequestToken=successor_token(name, based_on))
        except self._client.exceptions.ResourceExistsException:
            return self._settled(user_id)
        return self._remember(user_id, (secrets, str(response["VersionId"])))[0]

    def _call(self, operation: str, **arguments: Any) -> Any:
        """One call of the client; a failure other than the two this store acts on (no such secret, a name or
        token already taken) is ``Unavailable`` (the API answers 503; a delivery batch is retried)."""
        expected = (self._client.exceptions.ResourceNotFoundException, self._client.exceptions.ResourceExistsException)
        try:
            return getattr(self._client, operation)(**arguments)
        except expected:
            raise
        except (BotoCoreError, ClientError) as error:
            raise Unavailable(f"Secrets Manager: {type(error).__name__}: {error}") from error

    def _settled(self, user_id: str) -> TenantSecrets:
        """What another write left, after this one lost to it."""
        found = self._load(user_id, fresh=True)
        if found is None:
            raise LookupError(f"secret {self.secret_name(user_id)!r} was written by another caller, then deleted")
        return found[0]

    def _remember(self, user_id: str, found: Snapshot) -> Snapshot:
        with self._lock:
            self._cached[user_id] = (self._clock.now(), found)
        return found
