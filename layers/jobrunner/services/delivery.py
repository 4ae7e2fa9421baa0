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
``DeliveryRules.tenant_concurrency`` of one tenant, taken from the tenants in turn, and each outcome is published
as its call ends: a tenant's slow endpoint holds its own deliveries, not the others'. A call that could not end
within the function's time is not made, but reported as a retryable failure (in a batch with its slow calls,
those are the slow tenant's own).

Each tenant's calls also start at most ``DeliveryRules.rates.of(tenant)`` a second (``domain.targets.pacing``, a
sliding window): one over its rate waits its turn while the other tenants' calls go on, and one whose turn would
come too late to end within the function's time is not made but reported like any call out of time (a retryable
failure naming the rate: the job's next attempt makes it; nothing is lost). The window is kept by the service,
so in memory per delivery function instance, from batch to batch: Lambda gives the batches of one partition of
the delivery topic to one invocation at a time, so a tenant's deliveries across a stage start at most its rate x
the topic's partitions a second. Sharing one count through the quota table (``TenantQuotas.admit``) would make it
exact across instances, but at a conditional DynamoDB write, a round trip and one more failure to handle for
every delivery ($0.625 a million: as much as the delivery function's own Lambda time at 1 M deliveries a day,
four times it at 50 M, docs/scaling.md); the rate guards receivers and the stage against one tenant's bursts,
which a bound per instance does for nothing.

A record's ``traceparent`` header (the execution's span, ``domain.tracing``) is carried on: in the call (the
deliverer's span is its child, and an HTTPS request sends it as its ``traceparent`` header) and in the result,
so the results function's span joins the same trace, as with a worker.

A message that is not a delivery (no target, malformed) is counted
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
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.jobs import Trigger
from jobrunner.domain.limits import DeliveryRates
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
from jobrunner.domain.targets.pacing import TenantPace
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
from jobrunner_client.protocol import parse_rfc3339, parse_traceparent

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from jobrunner.domain.targets import Target
    from jobrunner.ports import Clock, Deliverer, DeliveryResult, Publisher, WebhookSecrets

log = logging.getLogger(__name__)

#: What a message that is not a delivery counts as.
MALFORMED = "ignored_malformed"
NO_TARGET = "ignored_no_target"
#: What a delivery counts as, by its verdict.
COUNTED = {Verdict.SUCCESS: "delivered", Verdict.RETRYABLE: "failed_retryable",
           Verdict.PERMANENT: "failed_permanent"}
#: A delivery not attempted because its call could not end within the batch's time: retried as a failure.
OUT_OF_TIME = "not_attempted_out_of_time"
OUT_OF_TIME_OUTCOME = Outcome(Verdict.RETRYABLE, "not delivered: the delivery batch ran out of time "
                                                 "(the tenant's other deliveries were slow)")


def over_rate_outcome(per_second: int) -> Outcome:
    """A delivery not attempted because the tenant's rate left it no start in time (``OUT_OF_TIME``)."""
    return Outcome(Verdict.RETRYABLE, f"not delivered: the delivery batch ran out of time (the tenant's "
                                      f"deliveries are paced at {per_second} a second)")


@dataclass(frozen=True)
class DeliveryRules:
    #: Where the outcomes are reported (``Settings.results_topic``).
    results_topic: str = "job-results"
    #: Calls in flight at once, per batch.
    concurrency: int = 16
    #: Calls of one tenant in flight at once, per batch.
    tenant_concurrency: int = 4
    #: The longest a Lambda or SQS call may take, in seconds (their clients' budgets, ``wiring.CLIENT_BUDGETS``).
    aws_call_s: float = 31.0
    #: Deliveries of each tenant started a second, per instance (``Settings.delivery_rates``); default: no rate.
    rates: DeliveryRates = field(default_factory=DeliveryRates)


@dataclass(frozen=True)
class Delivery:
    """One execution to deliver, as its message on the delivery topic says."""

    target: Target
    context: DeliveryContext
    user_id: str
    payload: Any
    #: The execution message's result token, sent back with the outcome (``domain.receipts``).
    result_token: str | None = None
    #: The execution's trace context (its message's ``traceparent`` header), continued by the call and the result.
    traceparent: str | None = None


@dataclass(frozen=True)
class DeliveryRecord:
    """A record of the delivery topic: its value, and its ``traceparent`` header (the execution's span) if any."""

    value: bytes
    traceparent: str | None = None


def delivery_of(value: bytes, traceparent: str | None = None) -> Delivery | str:
    """The delivery a message's value describes (continuing the trace ``traceparent``, when valid), or why it is
    none (``MALFORMED``, ``NO_TARGET``)."""
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
    return Delivery(target, context, user_id, message.get("payload"), token, parse_traceparent(traceparent))


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
    if delivery.traceparent is not None:  # the results function's span joins the execution's trace
        value["traceparent"] = delivery.traceparent
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
        #: The tenants' recent starts, kept from batch to batch: the rate holds across them.
        self._pace = TenantPace()

    def deliver_batch(self, records: Sequence[bytes | DeliveryRecord], deadline: datetime | None = None,
                      ) -> Counter[str]:
        """Deliver each message of a batch (its records, or their values alone), publishing the outcomes to the results
        topic as the calls end; returns how many messages ended how (``COUNTED``, ``OUT_OF_TIME``, ``MALFORMED``,
        ``NO_TARGET``). A call that could not end by ``deadline`` (the function's own time, less what publishing
        needs) is not made: reported as a retryable failure, so the job's next attempt makes it. Raises when a
        tenant's secrets cannot be read or outcomes cannot be published (module docstring)."""
        counted: Counter[str] = Counter()
        deliveries: list[Delivery] = []
        for record in records:
            parsed = (delivery_of(record.value, record.traceparent) if isinstance(record, DeliveryRecord)
                      else delivery_of(record))
            if isinstance(parsed, str):
                counted[parsed] += 1
            else:
                deliveries.append(parsed)
        if not deliveries:
            return counted
        secrets = self._signing_secrets(deliveries)
        for ended in self._run_all(deliveries, secrets, deadline):
            self._publisher.publish([OutboundMessage(topic=self._rules.results_topic, key=delivery.context.job_id,
                                                     value=result_message(delivery, outcome), headers={})
                                     for delivery, outcome, _ in ended])
            counted.update(name for _, _, name in ended)
        return counted

    def _signing_secrets(self, deliveries: Sequence[Delivery]) -> dict[str, list[WebhookSecret]]:
        """The signing secrets of each tenant with an HTTPS delivery in the batch, read once per batch."""
        tenants = dict.fromkeys(d.user_id for d in deliveries if isinstance(d.target, HttpsTarget))
        return {tenant: [WebhookSecret.parse(text) for text in self._secrets.signing_secrets(tenant)]
                for tenant in tenants}

    def _run_all(self, deliveries: Sequence[Delivery], secrets: dict[str, list[WebhookSecret]],
                 deadline: datetime | None) -> Iterator[list[tuple[Delivery, Outcome, str]]]:
        """Each delivery with its outcome and what it counts as, in groups as they end; the calls run as the
        module docstring says (tenants in turn, each within its cap and its rate, all within the batch's), and
        one that could not end by ``deadline`` is not started (``OUT_OF_TIME``)."""
        rules = self._rules
        waiting: dict[str, deque[Delivery]] = {}
        for delivery in deliveries:
            waiting.setdefault(delivery.user_id, deque()).append(delivery)
        running: dict[Future[Outcome], Delivery] = {}
        per_tenant: Counter[str] = Counter()
        self._pace.forget_idle(self._clock.now())
        with ThreadPoolExecutor(max_workers=min(rules.concurrency, len(deliveries)),
                                thread_name_prefix="delivery") as pool:
            while waiting or running:
                ended: list[tuple[Delivery, Outcome, str]] = []
                paced_until: datetime | None = None  # the first start a tenant's rate holds back
                started = True
                while started and len(running) < rules.concurrency:
                    started, paced_until = False, None
                    for tenant in list(waiting):  # one call of each tenant with room, in turn
                        if len(running) >= rules.concurrency:
                            break
                        if per_tenant[tenant] >= rules.tenant_concurrency:
                            continue
                        delivery = waiting[tenant][0]
                        turn = self._turn(delivery, deadline)
                        if isinstance(turn, datetime):  # its turn comes later; the other tenants' go meanwhile
                            paced_until = turn if paced_until is None else min(paced_until, turn)
                            continue
                        waiting[tenant].popleft()
                        if not waiting[tenant]:
                            del waiting[tenant]
                        started = True
                        if turn is not None:
                            ended.append((delivery, turn, OUT_OF_TIME))
                            continue
                        running[pool.submit(self._deliver, delivery, secrets.get(tenant, []))] = delivery
                        per_tenant[tenant] += 1
                done = self._wait(running, paced_until)
                for future in done:
                    delivery = running.pop(future)
                    per_tenant[delivery.user_id] -= 1
                    outcome = future.result()
                    ended.append((delivery, outcome, COUNTED[outcome.verdict]))
                if ended:
                    yield ended

    def _turn(self, delivery: Delivery, deadline: datetime | None) -> datetime | Outcome | None:
        """Whether ``delivery`` starts now (None: counted as started), later (when its tenant's rate lets it), or
        never (the outcome of a call that could not end by ``deadline``)."""
        tenant, now = delivery.user_id, self._clock.now()
        rate = self._rules.rates.of(tenant)
        start = self._pace.next_start(tenant, rate, now)
        if deadline is not None and start + self._bound(delivery) > deadline:
            return OUT_OF_TIME_OUTCOME if now + self._bound(delivery) > deadline else over_rate_outcome(rate or 0)
        if start > now:
            return start
        self._pace.started(tenant, rate, now)
        return None

    def _wait(self, running: dict[Future[Outcome], Delivery], paced_until: datetime | None) -> set[Future[Outcome]]:
        """The calls that ended, waiting for one to end or, when a tenant's rate holds one back, until its turn
        (on the clock when no call runs, so a test's clock jumps there)."""
        if not running:
            if paced_until is not None:
                self._clock.sleep_until(paced_until)
            return set()
        timeout = None if paced_until is None else max(0.0, (paced_until - self._clock.now()).total_seconds())
        done, _ = wait(running, timeout=timeout, return_when=FIRST_COMPLETED)
        return done

    def _bound(self, delivery: Delivery) -> timedelta:
        """The longest a call of ``delivery`` may take (``Deliverer``'s contract)."""
        target = delivery.target
        if isinstance(target, HttpsTarget):
            return timedelta(seconds=target.timeout_s + 1)
        return timedelta(seconds=self._rules.aws_call_s)

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
            request = webhook_request(target, delivery.payload, context, secrets, self._clock.now(),
                                      delivery.traceparent)
            return DeliveryCall(target, request.body, request.headers, context.execution_id, delivery.traceparent)
        return DeliveryCall(target, render_body(delivery.payload, context), context_headers(context),
                            context.execution_id, delivery.traceparent)
