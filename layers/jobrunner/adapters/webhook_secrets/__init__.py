"""Implementations of the ``WebhookSecrets`` port (``jobrunner.ports.delivering``): Secrets Manager and memory.

The port's rules are this module's ``KeptWebhookSecrets``; each store implements only its three hooks.
"""

from __future__ import annotations

import secrets
from abc import abstractmethod
from typing import TYPE_CHECKING

from jobrunner.domain.targets import SigningSecret, TenantSecrets, WebhookSecret, check_grace
from jobrunner.ports import WebhookSecrets

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from datetime import datetime, timedelta

    from jobrunner.ports import Clock

#: The length of a key created for a tenant, in bytes (Standard Webhooks: 24 to 64).
NEW_KEY_BYTES = 32

#: What a store read: a tenant's secrets, and the version they were read at (what a write is based on).
Snapshot = tuple[TenantSecrets, str]


def new_secret() -> str:
    """A fresh signing secret, written ``whsec_<base64>``."""
    return WebhookSecret(secrets.token_bytes(NEW_KEY_BYTES)).text()


def new_signing_secret(now: datetime) -> SigningSecret:
    """A fresh secret created at ``now``, with an id of its own (``sec_<hex>``)."""
    return SigningSecret(f"sec_{secrets.token_hex(8)}", new_secret(), now)


class KeptWebhookSecrets(WebhookSecrets):
    """The port's rules over a store's hooks: ``_load`` (a tenant's secrets and their version, or None),
    ``_create`` (its first secrets, or those another caller created first) and ``_replace`` (secrets based on a
    version read: written, or, when another write landed on that version first, what that write left).

    ``seeds`` (tenant -> ``whsec_`` texts, newest first) are the first secrets of the tenants they name, instead
    of new ones: the tests and local stacks that fix a tenant's keys (``JOBRUNNER_WEBHOOK_SECRETS``).
    """

    def __init__(self, clock: Clock, seeds: Mapping[str, Sequence[str]] | None = None) -> None:
        self._clock = clock
        self._seeds = {tenant: list(texts) for tenant, texts in (seeds or {}).items() if texts}

    def signing_secrets(self, user_id: str) -> list[str]:
        now = self._clock.now()
        return [secret.text for secret in self._kept(user_id, fresh=False).valid_at(now).secrets]

    def secrets_of(self, user_id: str) -> list[SigningSecret]:
        return list(self._kept(user_id, fresh=True).valid_at(self._clock.now()).secrets)

    def rotate(self, user_id: str, grace: timedelta) -> list[SigningSecret]:
        check_grace(grace)
        return self._change(user_id, lambda kept, now: kept.valid_at(now).rotated(new_signing_secret(now), now, grace))

    def end_rotation(self, user_id: str) -> list[SigningSecret]:
        return self._change(user_id, lambda kept, now: kept.rotation_ended())

    def _change(self, user_id: str, change: Callable[[TenantSecrets, datetime], TenantSecrets]) -> list[SigningSecret]:
        now = self._clock.now()
        found = self._load(user_id, fresh=True)
        if found is None:
            kept = self._create(user_id, self._first(user_id, now))
        else:
            before, version = found
            changed = change(before, now)
            kept = before if changed == before else self._replace(user_id, changed, version)
        return list(kept.valid_at(now).secrets)

    def _kept(self, user_id: str, *, fresh: bool) -> TenantSecrets:
        found = self._load(user_id, fresh=fresh)
        return found[0] if found is not None else self._create(user_id, self._first(user_id, self._clock.now()))

    def _first(self, user_id: str, now: datetime) -> TenantSecrets:
        seeded = self._seeds.get(user_id)
        if not seeded:
            return TenantSecrets((new_signing_secret(now),))
        return TenantSecrets(tuple(SigningSecret(f"sec_{secrets.token_hex(8)}", text, now) for text in seeded))

    @abstractmethod
    def _load(self, user_id: str, *, fresh: bool) -> Snapshot | None:
        """The tenant's secrets and their version; None when it has none. ``fresh``: not from a cache."""

    @abstractmethod
    def _create(self, user_id: str, first: TenantSecrets) -> TenantSecrets:
        """Keep ``first`` as the tenant's secrets; if another caller created some meanwhile, those."""

    @abstractmethod
    def _replace(self, user_id: str, secrets: TenantSecrets, based_on: str) -> TenantSecrets:
        """Keep ``secrets`` in place of version ``based_on``; if another write landed on ``based_on`` first,
        write nothing and return what is kept now."""
