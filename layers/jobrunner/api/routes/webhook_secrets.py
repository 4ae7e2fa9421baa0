"""/webhook-secrets: the tenant's webhook signing secrets: read, rotate, end a rotation (docs/targets.md)."""

from __future__ import annotations

from datetime import timedelta
from http import HTTPStatus
from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body

from jobrunner.api.routes.common import _tenant, documented
from jobrunner.api.schemas import RotationIn, WebhookSecretsOut
from jobrunner.domain.errors import NotFound
from jobrunner.wiring import container

if TYPE_CHECKING:
    from jobrunner.ports import WebhookSecrets

router = Router()

#: A secret is never kept by a browser's or a proxy's cache.
NOT_CACHED = {"Cache-Control": "no-store"}


#: The 404 of a stage that delivers to no HTTPS target: nothing is signed there, and no secret is kept.
_NO_WEBHOOKS = "not_found: this stage delivers to no HTTPS target (JOBRUNNER_TARGET_KINDS)"


def _kept() -> WebhookSecrets:
    """The tenants' secrets, on a stage whose jobs may name an HTTPS target."""
    services = container()
    if "https" not in services.settings.target_kinds:
        raise NotFound("webhook secrets: this stage delivers to no HTTPS target")
    return services.delivery_adapters.webhook_secrets


def _secrets(body: WebhookSecretsOut) -> Response[Any]:
    return Response(status_code=HTTPStatus.OK, content_type=content_types.APPLICATION_JSON,
                    body=body.model_dump_json(), headers=NOT_CACHED)


@router.get("/webhook-secrets", responses=documented({200: WebhookSecretsOut, 404: _NO_WEBHOOKS}),
            description="The tenant's webhook signing secrets valid now, newest first: the current one, and the "
                        "previous one during a rotation's grace. A tenant without one gets it created.")
def list_webhook_secrets() -> Response[Any]:
    return _secrets(WebhookSecretsOut.of(_kept().secrets_of(_tenant())))


@router.post("/webhook-secrets/rotate",
             responses=documented({200: (WebhookSecretsOut, "rotated"), 404: _NO_WEBHOOKS}),
             description="A new secret signs from now on; the current one keeps signing beside it for grace_s "
                         "(24 h unless given), and one still in an earlier rotation's grace stops now.")
def rotate_webhook_secret(body: Annotated[RotationIn | None, Body()] = None) -> Response[Any]:
    grace = timedelta(seconds=(body or RotationIn()).grace_s)
    return _secrets(WebhookSecretsOut.of(_kept().rotate(_tenant(), grace)))


@router.delete("/webhook-secrets/previous",
               responses=documented({200: (WebhookSecretsOut, "the rotation ended"), 404: _NO_WEBHOOKS}),
               description="End a rotation's grace now: the previous secret stops signing (a receiver that "
                           "still knows only it no longer verifies).")
def end_webhook_secret_rotation() -> Response[Any]:
    return _secrets(WebhookSecretsOut.of(_kept().end_rotation(_tenant())))
