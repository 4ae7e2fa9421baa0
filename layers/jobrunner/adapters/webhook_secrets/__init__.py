"""Implementations of the ``WebhookSecrets`` port (``jobrunner.ports.delivering``): Secrets Manager and memory."""

from __future__ import annotations

import secrets

from jobrunner.domain.targets import WebhookSecret

#: The length of a key created for a tenant, in bytes (Standard Webhooks: 24 to 64).
NEW_KEY_BYTES = 32


def new_secret() -> str:
    """A fresh signing secret, written ``whsec_<base64>``."""
    return WebhookSecret(secrets.token_bytes(NEW_KEY_BYTES)).text()
