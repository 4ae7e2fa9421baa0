"""The delivery ports: calling a job's target, and the tenants' webhook signing secrets (issue 35).

What the delivery function does with them is told in ``services.delivery``; the rules an answer is judged by
are the domain's (``domain.targets.outcomes``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobrunner.domain.targets import Target

#: The most of an answer's body a deliverer keeps, in bytes (its excerpt in a history is shorter still).
MAX_ANSWER_BYTES = 4096


@dataclass(frozen=True)
class DeliveryCall:
    """One attempt's call of its target: what to send, ready (rendered and, for HTTPS, signed).

    ``headers`` are the HTTPS request's headers (the user's, the context's and the signature's); for SQS, the
    context (``jobrunner-*``) among them become the message's attributes. ``message_id`` is the execution id:
    ``webhook-id``, and a FIFO queue's deduplication id. ``traceparent`` is the execution's trace context (W3C),
    the parent of the call's span where the deliverer traces one (an HTTPS request also carries it as its
    ``traceparent`` header, which such a deliverer replaces with its span's)."""

    target: Target
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    message_id: str = ""
    traceparent: str | None = None


@dataclass(frozen=True)
class Answered:
    """An HTTPS target answered ``status`` (after the redirects a delivery may follow); ``body`` at most
    ``MAX_ANSWER_BYTES`` of its body; ``retry_after`` its ``Retry-After`` header as sent, if any."""

    status: int
    body: bytes = b""
    retry_after: str | None = None


@dataclass(frozen=True)
class Invoked:
    """A Lambda function ran: ``function_error`` is its ``FunctionError`` (``Unhandled``, ``Handled``), None when
    it returned; ``payload`` at most ``MAX_ANSWER_BYTES`` of what it returned."""

    function_error: str | None = None
    payload: bytes = b""


@dataclass(frozen=True)
class Sent:
    """An SQS queue took the message (``message_id``: the one SQS gave it)."""

    message_id: str = ""


@dataclass(frozen=True)
class TimedOut:
    """No whole answer within ``after_s`` seconds (the target's timeout): the call was abandoned."""

    after_s: float


@dataclass(frozen=True)
class ConnectionFailed:
    """No answer at all: the name did not resolve, the connection was refused or reset, TLS failed."""

    reason: str


@dataclass(frozen=True)
class AddressRefused:
    """``host`` resolved to (or is) an address no delivery may reach (``domain.targets.addresses``); ``reason``
    says which ("a loopback address"). Nothing was sent."""

    host: str
    reason: str


@dataclass(frozen=True)
class AwsRefused:
    """Lambda or SQS refused the call with error ``code`` (``TooManyRequestsException``...), its ``message``,
    and the HTTP status of the refusal when known."""

    service: str
    code: str
    message: str = ""
    http_status: int | None = None


#: What became of one call.
DeliveryResult = Answered | Invoked | Sent | TimedOut | ConnectionFailed | AddressRefused | AwsRefused


class Deliverer(ABC):
    """Calls a job's target once (HTTPS endpoint, Lambda function or SQS queue).

    Contract:
    - ``deliver(call)`` makes one attempt at ``call.target`` with ``call.body`` and returns what became of it as a
      ``DeliveryResult``; it never raises for anything the target, the network or the AWS service does.
    - It returns within a bounded time: an HTTPS call within the target's ``timeout_s`` (connect, redirects and
      reading together) plus at most a second; a Lambda or SQS call within its client's budget.
    - HTTPS: it connects only to an address the domain's address rules allow (every address the host resolves to
      is checked; one refused is ``AddressRefused`` and nothing is sent), keeps the certificate and name checks
      for the URL's host, follows redirects only where ``domain.targets.followable_redirect`` allows (another
      answer is returned as it is: a 3xx), and keeps at most ``MAX_ANSWER_BYTES`` of an answer's body.
    - Lambda: a synchronous invocation (``RequestResponse``) of the function with the body as its event.
      SQS: one message with the body; on a FIFO queue its group is the target's ``message_group_id`` and its
      deduplication id ``call.message_id``.
    - A kind of target it does not serve is a programming error (``TypeError``).
    """

    @abstractmethod
    def deliver(self, call: DeliveryCall) -> DeliveryResult: ...


class WebhookSecrets(ABC):
    """The tenants' webhook signing secrets (Standard Webhooks, ``domain.targets.signing``).

    Contract:
    - ``signing_secrets(user_id)`` returns the tenant's current secrets, newest first, each written
      ``whsec_<base64 key>``: one, or two during a rotation (a delivery is signed under each).
    - A tenant that has none gets one, created and kept on this first use (so every delivery is signed, and the
      tenant reads the secret it must verify with through the API); calls racing on a first use return the same.
    - A store that cannot be reached raises (the delivery batch is retried); it never returns an empty list.
    """

    @abstractmethod
    def signing_secrets(self, user_id: str) -> list[str]: ...
