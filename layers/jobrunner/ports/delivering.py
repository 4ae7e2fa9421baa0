"""The delivery ports: calling a job's target, and the tenants' webhook signing secrets (issue 35).

What the delivery function does with them is told in ``services.delivery``; the rules an answer is judged by
are the domain's (``domain.targets.outcomes``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import timedelta

    from jobrunner.domain.targets import SigningSecret, Target

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
    """The tenants' webhook signing secrets (Standard Webhooks, ``domain.targets.signing``), and their rotation
    (``domain.targets.rotation``: the current secret, and the previous one during its grace).

    Contract:
    - ``signing_secrets(user_id)`` returns the texts (``whsec_<base64 key>``) of the tenant's secrets valid now,
      newest first: the current one, and the previous one while its grace lasts (a delivery is signed under
      each). A store may serve it from a cache kept for a bounded time (a rotation reaches it within that).
    - ``secrets_of(user_id)`` returns the same secrets whole (id, text, created, valid until), read afresh.
    - A tenant that has none gets one, created and kept on this first use of either (so every delivery is
      signed, and the tenant reads the secret it must verify with through the API); calls racing on a first use
      return the same.
    - ``rotate(user_id, grace)`` makes a new secret current and keeps the current one valid until now + grace
      (a grace of 0: dropped now); an older one still in its grace is dropped, so at most two are ever valid. A
      grace outside 0..``MAX_GRACE`` raises ``InvalidField`` naming ``grace_s``, before anything is read.
      ``end_rotation(user_id)`` drops the previous secret now. Each returns the secrets then kept, as
      ``secrets_of`` would (a tenant without any gets its first one).
    - Writes never lose a secret some caller was answered: two writes based on the same state cannot both land;
      the one that does not answers what the other left (racing rotations both answer the one rotation made).
    - A store that cannot be reached raises (the delivery batch, the request, is retried); it never returns an
      empty list.
    """

    @abstractmethod
    def signing_secrets(self, user_id: str) -> list[str]: ...

    @abstractmethod
    def secrets_of(self, user_id: str) -> list[SigningSecret]: ...

    @abstractmethod
    def rotate(self, user_id: str, grace: timedelta) -> list[SigningSecret]: ...

    @abstractmethod
    def end_rotation(self, user_id: str) -> list[SigningSecret]: ...
