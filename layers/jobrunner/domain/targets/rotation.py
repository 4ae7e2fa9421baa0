"""A tenant's webhook signing secrets over time: which are valid at an instant, and what a rotation leaves.

A tenant has one current secret and, for a grace after a rotation, the previous one: every delivery is signed
under both, so each receiver moves to the new secret at its own pace within the grace. A rotation while a
previous secret is still in its grace drops that one, so at most two are ever valid; ending the rotation drops
the previous one at once. ``docs/targets.md`` tells the steps for users.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.schedules import parse_instant
from jobrunner.domain.time import rfc3339

if TYPE_CHECKING:
    from collections.abc import Iterable

#: How long the previous secret stays valid after a rotation, unless the caller says otherwise.
DEFAULT_GRACE = timedelta(hours=24)
#: The longest grace a caller may ask for: a leaked secret must not stay valid for long.
MAX_GRACE = timedelta(days=7)


def check_grace(grace: timedelta) -> timedelta:
    """``grace`` if it is within 0 and ``MAX_GRACE``; else ``InvalidField`` naming ``grace_s``."""
    if not timedelta(0) <= grace <= MAX_GRACE:
        raise InvalidField("grace_s", f"must be 0 to {int(MAX_GRACE.total_seconds())} seconds")
    return grace


@dataclass(frozen=True)
class SigningSecret:
    """One of a tenant's secrets: ``text`` written ``whsec_<base64>`` (never in its ``repr``).

    ``valid_until`` is when a previous secret stops signing; None for the current one (and for an older one kept
    without an end, as written before rotations had a grace)."""

    secret_id: str
    text: str = field(repr=False)
    created_at: datetime
    valid_until: datetime | None = None

    def valid_at(self, now: datetime) -> bool:
        return self.valid_until is None or now < self.valid_until

    def to_dict(self) -> dict[str, str]:
        """The stored shape: ``{"id", "secret", "created_at"}``, and ``"valid_until"`` when it has one."""
        out = {"id": self.secret_id, "secret": self.text, "created_at": rfc3339(self.created_at)}
        if self.valid_until is not None:
            out["valid_until"] = rfc3339(self.valid_until)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SigningSecret:
        until = data.get("valid_until")
        return cls(str(data["id"]), str(data["secret"]), parse_instant(data["created_at"], "created_at"),
                   parse_instant(until, "valid_until") if until else None)


@dataclass(frozen=True)
class TenantSecrets:
    """A tenant's secrets, newest first: the first is the current one, the others previous ones."""

    secrets: tuple[SigningSecret, ...]

    def __post_init__(self) -> None:
        if not self.secrets:
            raise ValueError("a tenant's secrets hold at least the current one")

    @classmethod
    def of(cls, secrets: Iterable[SigningSecret]) -> TenantSecrets:
        """``secrets`` in any order, put newest first (secrets created at the same instant keep their order)."""
        return cls(tuple(sorted(secrets, key=lambda secret: secret.created_at, reverse=True)))

    @property
    def current(self) -> SigningSecret:
        return self.secrets[0]

    def valid_at(self, now: datetime) -> TenantSecrets:
        """The current secret and the previous ones still valid at ``now`` (a previous one past its grace is
        neither used nor shown)."""
        return TenantSecrets((self.current, *(s for s in self.secrets[1:] if s.valid_at(now))))

    def rotated(self, new: SigningSecret, now: datetime, grace: timedelta) -> TenantSecrets:
        """``new`` becomes current; the current one stays valid until ``now + grace`` (none: dropped now); any
        older one is dropped."""
        check_grace(grace)
        if not grace:
            return TenantSecrets((new,))
        return TenantSecrets((new, replace(self.current, valid_until=now + grace)))

    def rotation_ended(self) -> TenantSecrets:
        """Only the current secret: the previous ones stop signing now."""
        return TenantSecrets((self.current,))

    def to_list(self) -> list[dict[str, str]]:
        return [secret.to_dict() for secret in self.secrets]

    @classmethod
    def from_list(cls, data: object) -> TenantSecrets:
        """The stored shape (``SigningSecret.to_dict`` of each); ``ValueError`` when it is not a list of them."""
        if not isinstance(data, list) or not data or not all(isinstance(entry, dict) for entry in data):
            raise ValueError("not a list of signing secrets")
        return cls.of(SigningSecret.from_dict(entry) for entry in data)
