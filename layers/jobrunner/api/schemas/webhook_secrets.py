"""The bodies of the webhook secret routes: the tenant's signing secrets, and a rotation's grace."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field, StrictInt

from jobrunner.api.schemas.common import Strict
from jobrunner.domain.targets import DEFAULT_GRACE, MAX_GRACE
from jobrunner.domain.time import rfc3339

if TYPE_CHECKING:
    from jobrunner.domain.targets import SigningSecret


class RotationIn(Strict):
    """A rotation: how long the current secret keeps signing beside the new one."""

    grace_s: StrictInt = Field(int(DEFAULT_GRACE.total_seconds()), ge=0, le=int(MAX_GRACE.total_seconds()),
                               description="seconds the current secret stays valid beside the new one (0: it "
                                           "stops now), at most 7 days")


class WebhookSecretOut(BaseModel):
    id: str
    secret: str = Field(description="whsec_<base64 key>, as Standard Webhooks libraries take it")
    created_at: str
    current: bool = Field(description="the secret that signs from now on; else the previous one, in its grace")
    valid_until: str | None = Field(None, description="when the previous secret stops signing")

    @classmethod
    def of(cls, secret: SigningSecret, *, current: bool) -> WebhookSecretOut:
        return cls(id=secret.secret_id, secret=secret.text, created_at=rfc3339(secret.created_at), current=current,
                   valid_until=rfc3339(secret.valid_until) if secret.valid_until else None)


class WebhookSecretsOut(BaseModel):
    """The tenant's secrets valid now, newest first: every delivery is signed under each."""

    items: list[WebhookSecretOut]

    @classmethod
    def of(cls, secrets: list[SigningSecret]) -> WebhookSecretsOut:
        return cls(items=[WebhookSecretOut.of(secret, current=not i) for i, secret in enumerate(secrets)])
