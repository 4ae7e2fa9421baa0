"""Targets: delivering a job's executions to an HTTPS endpoint, a Lambda function or an SQS queue (issue 35).

The pure rules, one concern per module; the delivery function (a later slice) performs the calls with them:

- ``model``: the three targets, parsed from their JSON shape and checked.
- ``urls``: an HTTPS target's URL, the address a host names literally, which redirects may be followed.
- ``addresses``: which resolved addresses a delivery may connect to (no private, loopback, metadata...).
- ``templates``: the body, the payload with the attempt's context keywords substituted.
- ``signing``: Standard Webhooks secrets and signatures.
- ``rotation``: a tenant's secrets over time: which are valid at an instant, what a rotation leaves.
- ``webhooks``: the signed HTTPS request of one attempt.
- ``outcomes``: what an answer means (success, retryable, permanent) and how long a retry waits.

``docs/targets.md`` tells the rules for users.
"""

from jobrunner.domain.targets.addresses import carried_ipv4, parse_allow_list, refusal
from jobrunner.domain.targets.model import (
    HttpsTarget,
    LambdaTarget,
    SqsTarget,
    Target,
    target_from_dict,
)
from jobrunner.domain.targets.outcomes import (
    Outcome,
    Verdict,
    aws_error_outcome,
    connection_outcome,
    excerpt,
    http_outcome,
    lambda_outcome,
    parse_retry_after,
    refused_address_outcome,
    timeout_outcome,
)
from jobrunner.domain.targets.rotation import (
    DEFAULT_GRACE,
    MAX_GRACE,
    SigningSecret,
    TenantSecrets,
    check_grace,
)
from jobrunner.domain.targets.signing import WebhookSecret, signature, signature_header, signing_timestamp
from jobrunner.domain.targets.templates import DeliveryContext, render_body, render_payload, unknown_keywords
from jobrunner.domain.targets.urls import check_https_url, followable_redirect, literal_address
from jobrunner.domain.targets.webhooks import WebhookRequest, context_headers, webhook_request

__all__ = [
    "DEFAULT_GRACE",
    "MAX_GRACE",
    "DeliveryContext",
    "HttpsTarget",
    "LambdaTarget",
    "Outcome",
    "SigningSecret",
    "SqsTarget",
    "Target",
    "TenantSecrets",
    "Verdict",
    "WebhookRequest",
    "WebhookSecret",
    "aws_error_outcome",
    "carried_ipv4",
    "check_grace",
    "check_https_url",
    "connection_outcome",
    "context_headers",
    "excerpt",
    "followable_redirect",
    "http_outcome",
    "lambda_outcome",
    "literal_address",
    "parse_allow_list",
    "parse_retry_after",
    "refusal",
    "refused_address_outcome",
    "render_body",
    "render_payload",
    "signature",
    "signature_header",
    "signing_timestamp",
    "target_from_dict",
    "timeout_outcome",
    "unknown_keywords",
    "webhook_request",
]
