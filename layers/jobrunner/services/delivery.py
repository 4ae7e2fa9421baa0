"""Delivery: call the target of each execution on ``job-deliveries`` and report the outcome as a worker would.

A job with a target (``domain.targets``) has its executions published to the delivery topic: the execution
message plus ``"target": {...}``. For each message of a batch the delivery renders the body, signs an HTTPS
request under the tenant's webhook secrets, calls the target once through the ``Deliverer`` port, judges the
answer by the domain's outcome rules, and publishes a result to ``job-results`` with the execution's result
token, exactly as a worker does: the results function then ends the execution (success, retry with backoff,
dead letter), so history, retries and the ledger work unchanged. A retryable failure is sent as FAILED (retried
under the job's policy, ``retry_after_s`` carrying a ``Retry-After``), a permanent one as FAILED with
``retryable: false`` (dead-lettered at once).

The calls of a batch run concurrently, at most ``DeliveryRules.concurrency`` at once and at most
``DeliveryRules.tenant_concurrency`` of one tenant, taken from the tenants in turn: a tenant's slow endpoint
holds its own deliveries, not the others'. A message that is not a delivery (no target, malformed) is counted
and skipped, never raised. A failure to read secrets or to publish the results raises, so the batch is
delivered again: a receiver dedups on ``webhook-id`` (the execution id), the results function ignores a
second result of an ended execution.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter, deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.jobs import Trigger
from jobrunner.domain.targets import (
    DeliveryContext,
    HttpsTarget,
    Outcome,
    Verdict,
    WebhookSecret,
    aws_error_outcome,
    connection_outcome,
    context_headers,
    http_outcome,
    lambda_outcome,
    refused_address_outcome,
    render_body,
    target_from_dict,
    timeout_outcome,
    webhook_request,
)
from jobrunner.domain.time import rfc3339
from jobrunner.ports import (
    AddressRefused,
    Answered,
    AwsRefused,
    ConnectionFailed,
    DeliveryCall,
    Invoked,
    OutboundMessage,
    Sent,
    TimedOut,
)
from jobrunner_client.protocol import parse_rfc3339

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from jobrunner.domain.targets import Target
    from jobrunner.ports import Clock, Deliverer, DeliveryResult, Publisher, WebhookSecrets

log = logging.getLogger(__name__)

#: What a message that is not a delivery counts as.
MALFORMED = "ignored_malformed"
NO_TARGET = "ignored_no_target"
#: What a delivery counts as, by its verdict.
COUNTED = {Verdict.SUCCESS: "delivered", Verdict.RETRYABLE: "failed_retryable",
           Verdict.PERMANENT: "failed_permanent"}


@dataclass(frozen=True)
class DeliveryRules:
    #: Where the outcomes are reported (``Settings.results_topic``).
    results_topic: str = "job-results"
    #: Calls in flight at once, per batch.
    concurrency: int = 16
    #: Calls of one tenant in flight at once, per batch.
    tenant_concurrency: int = 4


@dataclass(frozen=True)
class Delivery:
    """One execution to deliver, as its message on the delivery topic says."""

    target: Target
    context: DeliveryContext
    user_id: str
    payload: Any
    #: The execution message's result token, sent back with the outcome (``domain.receipts``).
    result_token: str | None = None


def delivery_of(value: bytes) -> Delivery | str:
    """The delivery a message's value describes, or why it is none (``MALFORMED``, ``NO_TARGET``)."""
    try:
        message = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return MALFORMED
    if not isinstance(message, dict):
        return MALFORMED
    if message.get("target") is None:
        return NO_TARGET
    execution_id, job_id, user_id = (message.get(name) for name in ("execution_id", "job_id", "user_id"))
    attempt, token = message.get("attempt"), message.get("result_token")
    if (not (isinstance(execution_id, str) and isinstance(job_id, str) and isinstance(user_id, str))
            or not (execution_id and job_id and user_id) or type(attempt) is not int or attempt < 1
            or not isinstance(token, str | None)):
        return MALFORMED
    try:
        target = target_from_dict(message["target"])
        scheduled_at = parse_rfc3339(message.get("scheduled_at"))
        trigger = Trigger(message.get("trigger", Trigger.SCHEDULE.value))
    except (InvalidField, ValueError):
        return MALFORMED
    context = DeliveryContext(execution_id=execution_id, job_id=job_id, scheduled_at=scheduled_at, attempt=attempt,
                              trigger=trigger)
    return Delivery(target, context, user_id, message.get("payload"), token)


def outcome_of(result: DeliveryResult, now: datetime) -> Outcome:
    """What a call's result means for its execution (``domain.targets.outcomes``), read at ``now``."""
    match result:
        case Answered(status=status, body=body, retry_after=retry_after):
            return http_outcome(status, body, retry_after=retry_after, now=now)
        case Invoked(function_error=function_error, payload=payload):
            return lambda_outcome(function_error, payload)
        case Sent():
            return Outcome(Verdict.SUCCESS)
        case TimedOut(after_s=after_s):
            return timeout_outcome(after_s)
        case ConnectionFailed(reason=reason):
            return connection_outcome(reason)
        case AddressRefused(host=host, reason=reason):
            return refused_address_outcome(host, reason)
        case AwsRefused(service=service, code=code, message=message, http_status=http_status):
            return aws_error_outcome(service, code, message, http_status)
    raise TypeError(f"not a delivery result: {result!r}")


def result_message(delivery: Delivery, outcome: Outcome) -> dict[str, Any]:
    """The ``job-results`` message (``jobrunner_client.protocol.ResultMessage``) reporting ``outcome``."""
    context = delivery.context
    value: dict[str, Any] = {
        "execution_id": context.execution_id, "job_id": context.job_id,
        "status": "SUCCESS" if outcome.verdict is Verdict.SUCCESS else "FAILED",
        "scheduled_at": rfc3339(context.scheduled_at), "attempt": context.attempt,
    }
    if delivery.result_token is not None:
        value["result_token"] = delivery.result_token
    if outcome.verdict is not Verdict.SUCCESS:
        value["error"] = outcome.error
        value["retryable"] = outcome.verdict is Verdict.RETRYABLE
    if outcome.verdict is Verdict.RETRYABLE and outcome.retry_after is not None:
        value["retry_after_s"] = math.ceil(outcome.retry_after.total_seconds())
    return value


class DeliveryService:
    def __init__(self, deliverer: Deliverer, secrets: WebhookSecrets, publisher: Publisher, clock: Clock,
                 rules: DeliveryRules) -> None:
        self._deliverer = deliverer
        self._secrets = secrets
        self._publisher = publisher
        self._clock = clock
        self._rules = rules

    def deliver_batch(self, values: Sequence[bytes]) -> Counter[str]:
        """Deliver each message of a batch (the values of its records) and publish every outcome to the results
        topic in one call; returns how many messages ended how (``COUNTED``, ``MALFORMED``, ``NO_TARGET``).
        Raises when a tenant's secrets cannot be read or the results cannot be published (module docstring)."""
        counted: Counter[str] = Counter()
        deliveries: list[Delivery] = []
        for value in values:
            parsed = delivery_of(value)
            if isinstance(parsed, str):
                counted[parsed] += 1
            else:
                deliveries.append(parsed)
        if not deliveries:
            return counted
        secrets = self._signing_secrets(deliveries)
        outcomes = self._run_all(deliveries, secrets)
        messages = [OutboundMessage(topic=self._rules.results_topic, key=delivery.context.job_id,
                                    value=result_message(delivery, outcome), headers={})
                    for delivery, outcome in zip(deliveries, outcomes, strict=True)]
        self._publisher.publish(messages)
        counted.update(COUNTED[outcome.verdict] for outcome in outcomes)
        return counted

    def _signing_secrets(self, deliveries: Sequence[Delivery]) -> dict[str, list[WebhookSecret]]:
        """The signing secrets of each tenant with an HTTPS delivery in the batch, read once per batch."""
        tenants = dict.fromkeys(d.user_id for d in deliveries if isinstance(d.target, HttpsTarget))
        return {tenant: [WebhookSecret.parse(text) for text in self._secrets.signing_secrets(tenant)]
                for tenant in tenants}

    def _run_all(self, deliveries: Sequence[Delivery], secrets: dict[str, list[WebhookSecret]]) -> list[Outcome]:
        """Each delivery's outcome, in order; the calls run as the module docstring says (tenants in turn, each
        within its cap, all within the batch's)."""
        rules = self._rules
        waiting: dict[str, deque[int]] = {}
        for index, delivery in enumerate(deliveries):
            waiting.setdefault(delivery.user_id, deque()).append(index)
        outcomes: list[Outcome | None] = [None] * len(deliveries)
        running: dict[Future[Outcome], tuple[int, str]] = {}
        per_tenant: Counter[str] = Counter()
        with ThreadPoolExecutor(max_workers=min(rules.concurrency, len(deliveries)),
                                thread_name_prefix="delivery") as pool:
            while waiting or running:
                started = True
                while started and len(running) < rules.concurrency:
                    started = False
                    for tenant in list(waiting):  # one call of each tenant with room, in turn
                        if len(running) >= rules.concurrency:
                            break
                        if per_tenant[tenant] >= rules.tenant_concurrency:
                            continue
                        index = waiting[tenant].popleft()
                        if not waiting[tenant]:
                            del waiting[tenant]
                        future = pool.submit(self._deliver, deliveries[index], secrets.get(tenant, []))
                        running[future] = (index, tenant)
                        per_tenant[tenant] += 1
                        started = True
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    index, tenant = running.pop(future)
                    per_tenant[tenant] -= 1
                    outcomes[index] = future.result()
        return [outcome for outcome in outcomes if outcome is not None]

    def _deliver(self, delivery: Delivery, secrets: Sequence[WebhookSecret]) -> Outcome:
        """Call one delivery's target and judge the answer. An adapter that raises (against its contract) is a
        retryable failure of this delivery, never of the batch."""
        context = delivery.context
        try:
            result = self._deliverer.deliver(self._call(delivery, secrets))
        except Exception as error:  # one target's failure must not fail the others
            log.exception("delivery raised", extra={"job_id": context.job_id, "execution_id": context.execution_id})
            outcome = Outcome(Verdict.RETRYABLE, f"delivery failed: {type(error).__name__}")
        else:
            outcome = outcome_of(result, self._clock.now())
        log.info("delivery %s", COUNTED[outcome.verdict], extra={
            "job_id": context.job_id, "execution_id": context.execution_id, "attempt": context.attempt,
            "tenant": delivery.user_id, "error": outcome.error})
        return outcome

    def _call(self, delivery: Delivery, secrets: Sequence[WebhookSecret]) -> DeliveryCall:
        """The call of ``delivery``, rendered now (an HTTPS request signed with the time it is sent)."""
        target, context = delivery.target, delivery.context
        if isinstance(target, HttpsTarget):
            request = webhook_request(target, delivery.payload, context, secrets, self._clock.now())
            return DeliveryCall(target, request.body, request.headers, context.execution_id)
        return DeliveryCall(target, render_body(delivery.payload, context), context_headers(context),
                            context.execution_id)
