"""Builds what the delivery calls its targets with, and the tenants' webhook secrets (the API's too).

Beside ``wiring``, which hands these to the services it builds: each takes the container as ``Services`` (what it
reads of it), so this module imports nothing of ``wiring``. The adapters' modules are imported on first use, the
way ``DELIVERY_ADAPTER_MODULES`` says (``wiring.ADAPTER_MODULES`` lists them with the others).
"""

from __future__ import annotations

import functools
import importlib
import os
from typing import TYPE_CHECKING, Any, Protocol

from jobrunner.domain.targets import parse_allow_list

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import ModuleType

    from jobrunner.config import Settings
    from jobrunner.ports import Clock, Deliverer, WebhookSecrets

#: The module of each delivery adapter, by what it builds.
DELIVERY_ADAPTER_MODULES: Mapping[str, str] = {
    "deliverers": "jobrunner.adapters.deliverers.routing",
    "https_deliverer": "jobrunner.adapters.deliverers.https",
    "lambda_deliverer": "jobrunner.adapters.deliverers.lambda_",
    "sqs_deliverer": "jobrunner.adapters.deliverers.sqs",
    "webhook_secrets": "jobrunner.adapters.webhook_secrets.secretsmanager",
    "local_webhook_secrets": "jobrunner.adapters.webhook_secrets.memory",
}


class Services(Protocol):
    """What these builders read of the container (``wiring.Container``)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def clock(self) -> Clock: ...

    def boto3_client(self, service: str, *, budget: str | None = None, endpoint: str | None = None) -> Any: ...


def _adapter(kind: str) -> ModuleType:
    return importlib.import_module(DELIVERY_ADAPTER_MODULES[kind])


def build_deliverer(services: Services) -> Deliverer:
    """What calls the targets: an HTTPS, a Lambda and an SQS deliverer, each built on its first call (a batch of
    HTTPS targets creates no AWS client), HTTPS reaching the networks the settings allow-list and trusting the
    system's CAs (and the settings' ``target_ca_bundle``), Lambda and SQS called at the settings'
    ``target_aws_endpoint`` (the local stack's moto) or AWS's own."""
    settings = services.settings
    allowed = parse_allow_list(settings.target_address_allow)
    aws = settings.target_aws_endpoint
    deliverer: Deliverer = _adapter("deliverers").RoutingDeliverer(
        https=lambda: _adapter("https_deliverer").HttpsDeliverer(
            allowed=allowed, context=_adapter("https_deliverer").tls_trust(settings.target_ca_bundle)),
        lambda_=lambda: _adapter("lambda_deliverer").LambdaDeliverer(
            services.boto3_client("lambda", budget="lambda-targets", endpoint=aws)),
        sqs=lambda: _adapter("sqs_deliverer").SqsDeliverer(services.boto3_client("sqs", endpoint=aws)),
    )
    return deliverer


def build_webhook_secrets(services: Services) -> WebhookSecrets:
    """The tenants' signing secrets: in Secrets Manager in Lambda, or wherever the settings name its endpoint
    (the local stack's moto, so that its API and its delivery share them); else in memory. The settings'
    ``webhook_secrets`` are the first secrets of the tenants they name, in either."""
    settings = services.settings
    if not os.environ.get("AWS_LAMBDA_FUNCTION_NAME") and not settings.secrets_endpoint:
        local: WebhookSecrets = _adapter("local_webhook_secrets").MemoryWebhookSecrets(
            settings.webhook_secrets, clock=services.clock)
        return local
    kept: WebhookSecrets = _adapter("webhook_secrets").SecretsManagerWebhookSecrets(
        settings.webhook_secret_prefix, services.boto3_client("secretsmanager"), services.clock,
        cache_s=settings.webhook_secret_cache_s, seeds=settings.webhook_secrets)
    return kept


class DeliveryAdapters:
    """The container's deliverer and webhook secrets: those given (tests, the local stack), else built on first
    use (``build_deliverer``, ``build_webhook_secrets``), once."""

    def __init__(self, services: Services, *, deliverer: Deliverer | None = None,
                 webhook_secrets: WebhookSecrets | None = None) -> None:
        self._services = services
        self._deliverer = deliverer
        self._webhook_secrets = webhook_secrets

    @functools.cached_property
    def deliverer(self) -> Deliverer:
        return self._deliverer or build_deliverer(self._services)

    @functools.cached_property
    def webhook_secrets(self) -> WebhookSecrets:
        return self._webhook_secrets or build_webhook_secrets(self._services)
