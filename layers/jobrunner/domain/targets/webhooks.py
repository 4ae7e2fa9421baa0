"""The HTTPS request of one attempt: method, URL, headers (the user's, the context's, the signature's) and body.

Headers the delivery sets (``docs/targets.md``, "What a receiver gets"): ``webhook-id`` (the execution id: a
receiver dedups on it), ``webhook-timestamp`` and ``webhook-signature`` (Standard Webhooks), ``content-type``,
``user-agent``, and the context as ``jobrunner-job-id``, ``jobrunner-scheduled-time``, ``jobrunner-attempt`` and
``jobrunner-trigger``. A target's own headers cannot take these names (``model.RESERVED_HEADERS``). When the
execution carries a trace context, ``traceparent`` (W3C) sends it on, so a receiver's span joins the execution's
trace; it replaces a target's own header of that name, which could only name a trace of no use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobrunner.domain.targets.signing import signature_header, signing_timestamp
from jobrunner.domain.targets.templates import render_body
from jobrunner_client.protocol import TRACEPARENT_HEADER

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from jobrunner.domain.targets.model import HttpsTarget
    from jobrunner.domain.targets.signing import WebhookSecret
    from jobrunner.domain.targets.templates import DeliveryContext

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
JOB_ID_HEADER = "jobrunner-job-id"
SCHEDULED_TIME_HEADER = "jobrunner-scheduled-time"
ATTEMPT_HEADER = "jobrunner-attempt"
TRIGGER_HEADER = "jobrunner-trigger"
USER_AGENT = "jobrunner-webhooks/1"
#: Methods whose request carries the payload; the others send an empty (still signed) body.
METHODS_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


@dataclass(frozen=True)
class WebhookRequest:
    """One HTTPS call, ready to send: ``body`` is exactly the bytes the signature covers."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes


def context_headers(context: DeliveryContext) -> dict[str, str]:
    """The context of an attempt as headers (also what an SQS message's attributes carry)."""
    values = context.values()
    return {
        JOB_ID_HEADER: str(values["job-id"]),
        SCHEDULED_TIME_HEADER: str(values["scheduled-time"]),
        ATTEMPT_HEADER: str(values["attempt"]),
        TRIGGER_HEADER: str(values["trigger"]),
    }


def webhook_request(target: HttpsTarget, payload: Any, context: DeliveryContext,
                    secrets: Sequence[WebhookSecret], sent_at: datetime,
                    traceparent: str | None = None) -> WebhookRequest:
    """The signed request of the attempt ``context`` to ``target``, sent at ``sent_at``, under the tenant's
    current ``secrets`` (two during a rotation), carrying ``traceparent`` (the attempt's trace context) if any."""
    body = render_body(payload, context) if target.method in METHODS_WITH_BODY else b""
    timestamp = signing_timestamp(sent_at)
    headers = {name.lower(): value for name, value in target.headers.items()}
    if body:
        headers["content-type"] = "application/json"
    headers["user-agent"] = USER_AGENT
    headers.update(context_headers(context))
    if traceparent is not None:
        headers[TRACEPARENT_HEADER] = traceparent
    headers[ID_HEADER] = context.execution_id
    headers[TIMESTAMP_HEADER] = timestamp
    headers[SIGNATURE_HEADER] = signature_header(secrets, context.execution_id, timestamp, body)
    return WebhookRequest(target.method, target.url, headers, body)
