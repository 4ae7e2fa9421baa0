"""Standard Webhooks signatures (https://www.standardwebhooks.com), written from the specification.

A delivery is signed with HMAC-SHA256 over ``"{webhook-id}.{webhook-timestamp}.{body}"`` under each of its
tenant's current secrets; ``webhook-signature`` lists one ``v1,<base64>`` per secret, space-separated, so during a
rotation a receiver that knows either the old or the new secret verifies it. A secret is written
``whsec_<base64 of its key>``; keys are 24 to 64 random bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobrunner.domain.errors import InvalidField

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

SECRET_PREFIX = "whsec_"
#: Key lengths the specification recommends, in bytes.
MIN_KEY_BYTES = 24
MAX_KEY_BYTES = 64
#: The signature scheme this module writes: symmetric HMAC-SHA256.
SCHEME = "v1"


@dataclass(frozen=True)
class WebhookSecret:
    """A signing key. Its ``repr`` never shows the key (a secret must not reach a log by accident)."""

    key: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.key, bytes) or not MIN_KEY_BYTES <= len(self.key) <= MAX_KEY_BYTES:
            raise InvalidField("secret", f"must be {MIN_KEY_BYTES} to {MAX_KEY_BYTES} bytes")

    def __repr__(self) -> str:
        return "WebhookSecret(<hidden>)"

    @classmethod
    def parse(cls, text: str) -> WebhookSecret:
        """The secret written ``whsec_<base64>`` (padding optional); else ``InvalidField`` naming ``secret``."""
        if not isinstance(text, str) or not text.startswith(SECRET_PREFIX):
            raise InvalidField("secret", f"must start with {SECRET_PREFIX}")
        encoded = text.removeprefix(SECRET_PREFIX)
        try:
            key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
        except binascii.Error as error:
            raise InvalidField("secret", f"must be {SECRET_PREFIX} followed by base64") from error
        return cls(key)

    def text(self) -> str:
        """The secret as receivers configure it: ``whsec_<base64>``."""
        return SECRET_PREFIX + base64.b64encode(self.key).decode("ascii")


def signing_timestamp(instant: datetime) -> str:
    """``webhook-timestamp``: whole seconds since the epoch at ``instant`` (the send time, not the scheduled
    time: receivers refuse a timestamp far from their clock, and a catch-up replays old fires)."""
    return str(math.floor(instant.timestamp()))


def signature(secret: WebhookSecret, message_id: str, timestamp: str, body: bytes) -> str:
    """One ``v1,<base64 HMAC-SHA256>`` signature of ``body`` (the exact bytes sent) under ``secret``."""
    if not message_id or not timestamp.isdigit():
        raise ValueError("a signature needs a message id and a timestamp in whole seconds")
    signed = b".".join((message_id.encode(), timestamp.encode(), body))
    digest = hmac.new(secret.key, signed, hashlib.sha256).digest()
    return f"{SCHEME},{base64.b64encode(digest).decode('ascii')}"


def signature_header(secrets: Sequence[WebhookSecret], message_id: str, timestamp: str, body: bytes) -> str:
    """``webhook-signature``: one signature per secret, space-separated, in the order given (during a
    rotation: the new secret's first, then the old one's)."""
    if not secrets:
        raise ValueError("a delivery is signed with at least one secret")
    return " ".join(signature(secret, message_id, timestamp, body) for secret in secrets)
