"""DeliveryService: each execution on the delivery topic is delivered once, and its outcome reported to
``job-results`` as a worker's result, so the results function retries, dead-letters or ends it.

The stories run the deployment's service graph on memory adapters: a scan publishes an execution, the delivery
delivers it (the message with its ``target``, as the scan's routing will publish it), and the result it
publishes is applied by the results service exactly as the results function would apply it.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import TYPE_CHECKING, Any

import pytest
from standardwebhooks.webhooks import Webhook

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.deliverers.memory import MemoryDeliverer
from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.adapters.webhook_secrets.memory import MemoryWebhookSecrets
from jobrunner.domain.jobs import ExecutionStatus
from jobrunner.domain.limits import DeliveryRates
from jobrunner.domain.schedules import At
from jobrunner.domain.spec import JobSpec, RetryPolicy
from jobrunner.entrypoints import parse_report
from jobrunner.ports import (
    AddressRefused,
    Answered,
    AwsRefused,
    ConnectionFailed,
    DeliveryCall,
    DeliveryResult,
    Invoked,
    ScanRequest,
    TimedOut,
)
from jobrunner.services.delivery import MALFORMED, NO_TARGET, DeliveryRecord, DeliveryRules, DeliveryService
from tests.support.memory import memory_container
from tests.support.results import RESULT_KEY
from tests.support.waiting import waiting

if TYPE_CHECKING:
    from collections.abc import Sequence

    from jobrunner.domain.jobs import ExecutionRecord, ScheduledExecution
    from jobrunner.ports import OutboundMessage

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
FIRE = datetime(2026, 11, 22, 10, 10, tzinfo=UTC)
RETRY = RetryPolicy(max_retries=2, initial_delay_s=10, multiplier=2, max_delay_s=300)
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
URL = "https://hooks.example.com/jobs?team=payroll"
HTTPS = {"https": {"url": URL}}
FUNCTION = "arn:aws:lambda:eu-west-1:123456789012:function:nightly"
QUEUE = "https://sqs.eu-west-1.amazonaws.com/123456789012/reports.fifo"


@dataclass
class World:
    clock: ManualClock = field(default_factory=lambda: ManualClock(NOW))
    store: MemoryJobStore = field(default_factory=MemoryJobStore)
    publisher: MemoryPublisher = field(default_factory=MemoryPublisher)
    leases: MemoryLeaseStore = field(default_factory=MemoryLeaseStore)
    deliverer: MemoryDeliverer = field(default_factory=MemoryDeliverer)
    secrets: MemoryWebhookSecrets = field(default_factory=lambda: MemoryWebhookSecrets({"alice": [SECRET]}))

    def __post_init__(self) -> None:
        #: When the delivery was made (the scan's clock jumps to the end of its minute).
        self.at = NOW
        container = memory_container({"JOBRUNNER_SEGMENTS": "1", "JOBRUNNER_RESULT_KEY": RESULT_KEY},
                                     clock=self.clock, store=self.store, publisher=self.publisher,
                                     leases=self.leases, jitter=lambda: 0.5, deliverer=self.deliverer,
                                     webhook_secrets=self.secrets)
        self.jobs, self.scans, self.results = container.jobs, container.scans, container.results
        self.delivery = container.delivery

    def execution(self, target: dict[str, Any], payload: Any = None, retry: RetryPolicy = RETRY) -> bytes:
        """The delivery message of a one-time job's first execution (as published at its fire)."""
        job = self.jobs.submit("alice", JobSpec(At(FIRE), payload or {"report": "<jobrunner.attempt>"},
                                                retry=retry))[0]
        self.clock.set(FIRE - timedelta(seconds=30))
        sent = len(self.publisher.sent)
        self.scans.scan(ScanRequest(segment=0, bucket=FIRE))
        [message] = self.publisher.sent[sent:]
        self.job = job
        return json.dumps({**message.value, "target": target}).encode()

    def deliver(self, *values: bytes) -> Counter[str]:
        """Deliver a batch, then apply the results it published as the results function does."""
        sent = len(self.publisher.sent)
        counted = self.delivery.deliver_batch(values)
        self.reported = [m for m in self.publisher.sent[sent:] if m.topic == "job-results"]
        for message in self.reported:
            report = parse_report(json.dumps(message.value).encode())
            assert report is not None
            self.results.apply(report)
        return counted

    def record(self, attempt: int = 1) -> ExecutionRecord:
        [record] = [r for r in self.store.records.values() if (r.job_id, r.attempt) == (self.job.job_id, attempt)]
        return record

    def waiting(self) -> list[ScheduledExecution]:
        return waiting(self.store, self.leases)

    def dead_letters(self) -> list[OutboundMessage]:
        return [m for m in self.publisher.sent if m.topic == "job-dlq"]


@pytest.fixture
def world() -> World:
    return World()


def delivered(world: World, target: dict[str, Any], *results: DeliveryResult) -> World:
    """``world`` once the first execution of a job with ``target`` was delivered, the target answering
    ``results`` (none: success), 42 s after its fire."""
    value = world.execution(target)
    address = next(iter(target.values()))
    for result in results:
        world.deliverer.script(address.get("url") or address.get("function_arn") or address["queue_url"], result)
    world.clock.advance(timedelta(seconds=42))
    world.at = world.clock.now()
    world.deliver(value)
    return world


# -- every outcome rule, end to end ------------------------------------------------------------------------


def test_a_2xx_answer_ends_the_execution_in_success(world: World) -> None:
    delivered(world, HTTPS, Answered(204))
    assert world.record().status is ExecutionStatus.SUCCESS
    assert world.waiting() == [] and world.dead_letters() == []
    [result] = world.reported
    assert result.key == world.job.job_id
    assert result.value == {
        "execution_id": world.record().execution_id, "job_id": world.job.job_id, "status": "SUCCESS",
        "scheduled_at": "2026-11-22T10:10:00.000Z", "attempt": 1, "result_token": result.value["result_token"],
    }


def test_a_5xx_answer_is_retried_after_the_jobs_backoff_with_the_answer_in_the_history(world: World) -> None:
    delivered(world, HTTPS, Answered(503, b"<h1>Service\n  Unavailable</h1>"))
    record = world.record()
    assert (record.status, record.error) == (ExecutionStatus.FAILED, "HTTP 503: <h1>Service Unavailable</h1>")
    [retry] = world.waiting()
    assert (retry.attempt, retry.due_at) == (2, world.at + timedelta(seconds=7.5))  # base 10 s, jitter 0.5


@pytest.mark.parametrize(("retry_after", "wait_s"), [("60", 60), ("1", 7.5), ("3600", 300), ("soon", 7.5)])
def test_a_429_is_retried_no_sooner_than_its_retry_after_within_the_jobs_bounds(
    world: World, retry_after: str, wait_s: float
) -> None:
    delivered(world, HTTPS, Answered(429, b"slow down", retry_after))
    assert world.record().error == "HTTP 429: slow down"
    [retry] = world.waiting()
    assert retry.due_at == world.at + timedelta(seconds=wait_s)


def test_a_retry_after_date_is_read_as_the_wait_until_it(world: World) -> None:
    value = world.execution(HTTPS)
    world.clock.advance(timedelta(seconds=42))
    world.at = world.clock.now()
    when = world.at + timedelta(minutes=2)
    world.deliverer.script(URL, Answered(503, b"", format_datetime(when, usegmt=True)))
    world.deliver(value)
    [retry] = world.waiting()
    assert retry.due_at == when


@pytest.mark.parametrize("result", [Answered(404, b"no such hook"), Answered(301), Answered(401),
                                    AddressRefused("hooks.example.com (10.0.0.7)", "a private address")],
                         ids=["404", "3xx-not-followed", "401", "refused-address"])
def test_a_failure_that_would_recur_is_dead_lettered_at_once(world: World, result: DeliveryResult) -> None:
    delivered(world, HTTPS, result)
    assert world.record().status is ExecutionStatus.FAILED
    assert world.waiting() == []  # two retries were left
    [letter] = world.dead_letters()
    assert letter.value["error"] == world.record().error


def test_the_history_says_why_a_failure_was_not_retried(world: World) -> None:
    delivered(world, HTTPS, AddressRefused("hooks.example.com (10.0.0.7)", "a private address"))
    assert world.record().error == "address refused: hooks.example.com (10.0.0.7) is a private address"


@pytest.mark.parametrize(("result", "error"), [
    (TimedOut(10), "timed out after 10 s"),
    (ConnectionFailed("ConnectionRefusedError: [Errno 111] Connection refused"),
     "connection failed: ConnectionRefusedError: [Errno 111] Connection refused"),
    (Answered(408), "HTTP 408"),
], ids=["timeout", "connection", "408"])
def test_no_answer_in_time_is_retried(world: World, result: DeliveryResult, error: str) -> None:
    delivered(world, HTTPS, result)
    assert world.record().error == error
    [retry] = world.waiting()
    assert retry.attempt == 2


def test_a_lambda_function_error_is_retried_like_a_workers_failure(world: World) -> None:
    delivered(world, {"lambda": {"function_arn": FUNCTION}},
              Invoked("Unhandled", b'{"errorMessage":"boom","errorType":"ValueError"}'))
    assert world.record().error == 'Lambda function error (Unhandled): {"errorMessage":"boom","errorType":"ValueError"}'
    [retry] = world.waiting()
    assert retry.attempt == 2


def test_a_lambda_function_that_returns_succeeds(world: World) -> None:
    delivered(world, {"lambda": {"function_arn": FUNCTION}})
    assert world.record().status is ExecutionStatus.SUCCESS


@pytest.mark.parametrize(("result", "retried"), [
    (AwsRefused("SQS", "AWS.SimpleQueueService.NonExistentQueue", "The queue does not exist", 400), False),
    (AwsRefused("SQS", "KmsAccessDenied", "no grant", 400), False),
    (AwsRefused("SQS", "RequestThrottled", "slow down", 403), True),
    (AwsRefused("SQS", "InternalError", "", 500), True),
], ids=["no-queue", "kms-denied", "throttled", "internal"])
def test_an_sqs_error_is_retried_only_when_it_says_later(world: World, result: AwsRefused, retried: bool) -> None:
    delivered(world, {"sqs": {"queue_url": QUEUE, "message_group_id": "reports"}}, result)
    assert (world.record().error or "").startswith(f"SQS {result.code}")
    assert (len(world.waiting()), len(world.dead_letters())) == ((1, 0) if retried else (0, 1))


def test_an_sqs_message_taken_succeeds(world: World) -> None:
    delivered(world, {"sqs": {"queue_url": QUEUE, "message_group_id": "reports"}})
    assert world.record().status is ExecutionStatus.SUCCESS


def test_a_retryable_failure_on_the_last_attempt_is_dead_lettered() -> None:
    world = World()
    value = world.execution(HTTPS, retry=RetryPolicy(max_retries=0))
    world.deliverer.script(URL, Answered(500))
    world.deliver(value)
    assert len(world.dead_letters()) == 1 and world.waiting() == []


# -- what is sent ------------------------------------------------------------------------------------------


def signed_call(secrets: MemoryWebhookSecrets, payload: Any = None) -> DeliveryCall:
    """The call a delivery makes of ``HTTPS`` for alice, now (a Standard Webhooks library checks the
    timestamp against the real clock)."""
    deliverer = MemoryDeliverer()
    service = DeliveryService(deliverer, secrets, MemoryPublisher(), ManualClock(datetime.now(UTC)), DeliveryRules())
    service.deliver_batch([json.dumps({
        "execution_id": "e-1", "job_id": "job-1", "user_id": "alice", "scheduled_at": "2026-11-22T10:10:00.000Z",
        "attempt": 2, "trigger": "RETRY", "payload": payload, "target": HTTPS, "result_token": "t"}).encode()])
    [call] = deliverer.calls
    return call


def test_an_https_call_is_signed_so_a_standard_webhooks_library_verifies_it() -> None:
    call = signed_call(MemoryWebhookSecrets({"alice": [SECRET]}), {"report": "daily", "try": "<jobrunner.attempt>"})
    assert Webhook(SECRET).verify(call.body, call.headers) == {"report": "daily", "try": 2}
    assert call.headers["webhook-id"] == call.message_id == "e-1"
    assert (call.headers["jobrunner-attempt"], call.headers["jobrunner-trigger"]) == ("2", "RETRY")
    assert call.headers["jobrunner-scheduled-time"] == "2026-11-22T10:10:00.000Z"


def test_during_a_rotation_a_call_verifies_under_either_secret() -> None:
    old = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY"
    call = signed_call(MemoryWebhookSecrets({"alice": [SECRET, old]}))
    for secret in (SECRET, old):
        Webhook(secret).verify(call.body, call.headers)


def test_a_tenant_without_a_secret_gets_one_and_is_signed_with_it() -> None:
    secrets = MemoryWebhookSecrets()
    call = signed_call(secrets)
    [secret] = secrets.signing_secrets("alice")
    Webhook(secret).verify(call.body, call.headers)


def test_lambda_and_sqs_calls_carry_the_rendered_payload_and_the_context(world: World) -> None:
    world.deliver(world.execution({"sqs": {"queue_url": QUEUE, "message_group_id": "reports"}}))
    [call] = world.deliverer.calls
    assert json.loads(call.body) == {"report": 1}
    assert call.message_id == world.record().execution_id
    assert {name for name in call.headers} == {"jobrunner-job-id", "jobrunner-scheduled-time", "jobrunner-attempt",
                                                "jobrunner-trigger"}


# -- what is not a delivery, and what fails --------------------------------------------------------------


@pytest.mark.parametrize(("value", "counted"), [
    (b"not json", MALFORMED), (b"[]", MALFORMED), (b"", MALFORMED),
    (json.dumps({"execution_id": "e", "job_id": "j", "user_id": "u", "scheduled_at": "2026-11-22T10:10:00Z",
                 "attempt": 1, "payload": {}}).encode(), NO_TARGET),
    (json.dumps({"execution_id": "e", "job_id": "j", "user_id": "u", "scheduled_at": "2026-11-22T10:10:00Z",
                 "attempt": 1, "target": {"https": {"url": "http://plain.example.com"}}}).encode(), MALFORMED),
    (json.dumps({"execution_id": "e", "job_id": "j", "user_id": "u", "scheduled_at": "yesterday",
                 "attempt": 1, "target": HTTPS}).encode(), MALFORMED),
    (json.dumps({"execution_id": "e", "job_id": "j", "user_id": "u", "scheduled_at": "2026-11-22T10:10:00Z",
                 "attempt": "1", "target": HTTPS}).encode(), MALFORMED),
], ids=["not-json", "not-an-object", "empty", "no-target", "bad-target", "bad-time", "bad-attempt"])
def test_a_message_that_is_no_delivery_is_counted_and_skipped(world: World, value: bytes, counted: str) -> None:
    good = world.execution(HTTPS)
    assert world.deliver(value, good) == Counter({counted: 1, "delivered": 1})
    assert len(world.deliverer.calls) == 1 and len(world.reported) == 1


def test_a_deliverer_that_raises_fails_its_delivery_only(world: World) -> None:
    def explode(call: DeliveryCall) -> None:
        raise RuntimeError("a bug in an adapter")

    world.deliverer.before = explode
    assert world.deliver(world.execution(HTTPS)) == Counter({"failed_retryable": 1})
    assert world.record().error == "delivery failed: RuntimeError"


def test_results_not_published_fail_the_batch_so_it_is_delivered_again(world: World) -> None:
    value = world.execution(HTTPS)
    world.publisher.fail_next = 1
    with pytest.raises(Exception, match="not acknowledged"):
        world.delivery.deliver_batch([value])


# -- one tenant's slow endpoint cannot hold the others ----------------------------------------------------


def test_a_tenants_slow_calls_take_at_most_its_share_and_the_others_go_through() -> None:
    # Given a batch of 6 deliveries of a tenant whose endpoint hangs, then 3 of another tenant, with room for
    # 4 calls at once and 2 of one tenant
    deliverer = MemoryDeliverer()
    released = threading.Event()
    in_flight: Counter[str] = Counter()
    most: Counter[str] = Counter()
    lock = threading.Lock()
    fast_done = threading.Semaphore(0)

    def hold(call: DeliveryCall) -> None:
        tenant = "slow" if "slow" in call.body.decode() else "fast"
        with lock:
            in_flight[tenant] += 1
            most[tenant] = max(most[tenant], in_flight[tenant])
        if tenant == "slow":
            assert released.wait(timeout=10)
        with lock:
            in_flight[tenant] -= 1
        if tenant == "fast":
            fast_done.release()

    deliverer.before = hold
    fast_reported = threading.Event()

    class Watched(MemoryPublisher):
        def publish(self, messages: Sequence[OutboundMessage], timeout_s: float | None = None) -> None:
            super().publish(messages, timeout_s)
            if sum(m.value["execution_id"].startswith("fast") for m in self.sent) == 3:
                fast_reported.set()

    publisher = Watched()
    service = DeliveryService(deliverer, MemoryWebhookSecrets(), publisher, ManualClock(FIRE),
                              DeliveryRules(concurrency=4, tenant_concurrency=2))

    def message(tenant: str, n: int) -> bytes:
        return json.dumps({"execution_id": f"{tenant}-{n}", "job_id": f"job-{tenant}", "user_id": tenant,
                           "scheduled_at": "2026-11-22T10:10:00Z", "attempt": 1, "payload": {"t": tenant},
                           "target": HTTPS}).encode()

    batch = [message("slow", n) for n in range(6)] + [message("fast", n) for n in range(3)]
    outcome: list[Counter[str]] = []
    runner = threading.Thread(target=lambda: outcome.append(service.deliver_batch(batch)))
    runner.start()
    # When the slow tenant's calls hang, the other tenant's are all made meanwhile
    for _ in range(3):
        assert fast_done.acquire(timeout=10)
    # and their outcomes are published while the slow ones still hang
    assert fast_reported.wait(timeout=10)
    assert not released.is_set()
    released.set()
    runner.join(timeout=10)
    # Then no tenant had more than its share in flight, and every delivery was made and reported
    assert most["slow"] == 2 and most["fast"] <= 2
    assert outcome == [Counter({"delivered": 9})]
    assert len(publisher.sent) == 9


def test_a_call_that_could_not_end_before_the_deadline_is_not_made_and_is_retried(world: World) -> None:
    # Given a batch with 5 s left, and an endpoint whose timeout is 10 s
    value = world.execution({"https": {"url": URL, "timeout_s": 10}})
    deadline = world.clock.now() + timedelta(seconds=5)
    # When it is delivered
    counted = world.delivery.deliver_batch([value], deadline)
    # Then no call is made, and the execution fails, to be retried
    assert counted == Counter({"not_attempted_out_of_time": 1}) and world.deliverer.calls == []
    [result] = [m for m in world.publisher.sent if m.topic == "job-results"]
    assert (result.value["status"], result.value["retryable"]) == ("FAILED", True)
    assert "ran out of time" in result.value["error"]


def test_a_call_that_can_end_before_the_deadline_is_made(world: World) -> None:
    value = world.execution({"https": {"url": URL, "timeout_s": 3}})
    assert world.delivery.deliver_batch([value], world.clock.now() + timedelta(seconds=5)) == Counter(
        {"delivered": 1})


# -- each tenant's delivery rate ---------------------------------------------------------------------------


def tenant_message(tenant: str, n: int, target: dict[str, Any] = HTTPS) -> bytes:
    return json.dumps({"execution_id": f"{tenant}-{n}", "job_id": f"job-{tenant}-{n}", "user_id": tenant,
                       "scheduled_at": "2026-11-22T10:10:00Z", "attempt": 1, "payload": {"t": tenant},
                       "target": target}).encode()


@dataclass
class Paced:
    """A delivery service on a manual clock, each call recorded with its tenant and the instant it was made."""

    rates: dict[str, int]
    default: int | None = None
    concurrency: int = 16
    clock: ManualClock = field(default_factory=lambda: ManualClock(FIRE))
    publisher: MemoryPublisher = field(default_factory=MemoryPublisher)
    made: list[tuple[str, datetime]] = field(default_factory=list)

    def __post_init__(self) -> None:
        deliverer = MemoryDeliverer()
        lock = threading.Lock()

        def record(call: DeliveryCall) -> None:
            with lock:
                self.made.append((json.loads(call.body)["t"], self.clock.now()))

        deliverer.before = record
        rules = DeliveryRules(concurrency=self.concurrency, tenant_concurrency=4,
                              rates=DeliveryRates(self.default, self.rates))
        self.service = DeliveryService(deliverer, MemoryWebhookSecrets(), self.publisher, self.clock, rules)

    def seconds(self, tenant: str) -> list[float]:
        """When each call of ``tenant`` was made, in seconds from the fire."""
        return sorted((at - FIRE).total_seconds() for who, at in self.made if who == tenant)


def test_a_tenant_over_its_rate_is_paced_and_does_not_slow_another_tenant() -> None:
    # Given a batch of 7 deliveries of a tenant paced at 2 a second, beside 6 of a tenant without a rate
    paced = Paced(rates={"busy": 2})
    batch = [tenant_message("busy", n) for n in range(7)] + [tenant_message("calm", n) for n in range(6)]
    # When it is delivered
    counted = paced.service.deliver_batch(batch)
    # Then the paced tenant's calls start 2 a second, and the other tenant's all start at once
    assert paced.seconds("busy") == [0, 0, 1, 1, 2, 2, 3]
    assert paced.seconds("calm") == [0] * 6
    # and every delivery is made and reported
    assert counted == Counter({"delivered": 13}) and len(paced.publisher.sent) == 13


def test_the_rate_holds_across_the_batches_of_one_instance() -> None:
    # Given a tenant paced at 3 a second whose first batch of 3 started at once
    paced = Paced(rates={}, default=3)
    paced.service.deliver_batch([tenant_message("a", n) for n in range(3)])
    # When its next batch comes within the same second
    paced.clock.advance(timedelta(milliseconds=400))
    paced.service.deliver_batch([tenant_message("a", n) for n in range(3, 7)])
    # Then the next batch's calls wait for the first batch's second to pass
    assert paced.seconds("a") == [0, 0, 0, 1, 1, 1, 2]


def test_a_delivery_the_rate_leaves_no_time_for_is_not_made_and_is_retried() -> None:
    # Given 4 deliveries of a tenant paced at 1 a second, endpoint timeout 10 s, and 13.5 s left in the batch
    paced = Paced(rates={"a": 1})
    target = {"https": {"url": URL, "timeout_s": 10}}
    deadline = FIRE + timedelta(seconds=13.5)
    # When they are delivered, beside another tenant's
    counted = paced.service.deliver_batch([tenant_message("a", n, target) for n in range(4)]
                                          + [tenant_message("b", 0, target)], deadline)
    # Then the calls that can end in time are made at the rate, and the others are not made: each is
    # reported as a retryable failure naming the rate, so none is lost
    assert paced.seconds("a") == [0, 1, 2] and paced.seconds("b") == [0]
    assert counted == Counter({"delivered": 4, "not_attempted_out_of_time": 1})
    [refused] = [m.value for m in paced.publisher.sent if m.value["status"] == "FAILED"]
    assert refused["execution_id"] == "a-3" and refused["retryable"] is True
    assert "paced at 1 a second" in refused["error"]
    assert len(paced.publisher.sent) == 5


def test_a_tenants_own_rate_overrides_the_stages() -> None:
    paced = Paced(rates={"gold": 5}, default=1)
    paced.service.deliver_batch([tenant_message("gold", n) for n in range(5)]
                                + [tenant_message("basic", n) for n in range(2)])
    assert paced.seconds("gold") == [0] * 5 and paced.seconds("basic") == [0, 1]


# -- the execution's trace, carried on ---------------------------------------------------------------------

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize("target", [HTTPS, {"lambda": {"function_arn": FUNCTION}}])
def test_a_delivery_carries_its_records_trace_to_the_call_and_the_result(world: World, target: dict[str, Any]) -> None:
    # Given an execution's record with the trace context the scan put in its header
    value = world.execution(target)
    # When it is delivered
    world.delivery.deliver_batch([DeliveryRecord(value, TRACE)])
    # Then the call continues that trace, an HTTPS request sending it as its traceparent header
    [call] = world.deliverer.calls
    assert call.traceparent == TRACE
    assert call.headers.get("traceparent") == (TRACE if "https" in target else None)
    # and so does the result, which the results function's span continues
    [result] = [m for m in world.publisher.sent if m.topic == "job-results"]
    assert result.value["traceparent"] == TRACE
    report = parse_report(json.dumps(result.value).encode())
    assert report is not None and report.traceparent == TRACE


def test_the_trace_replaces_a_targets_own_traceparent_header(world: World) -> None:
    target = {"https": {"url": URL, "headers": {"Traceparent": "00-stale"}}}
    world.delivery.deliver_batch([DeliveryRecord(world.execution(target), TRACE)])
    [call] = world.deliverer.calls
    assert call.headers["traceparent"] == TRACE and "Traceparent" not in call.headers


def test_a_record_without_a_valid_trace_sends_none(world: World) -> None:
    world.delivery.deliver_batch([DeliveryRecord(world.execution(HTTPS), "not a traceparent")])
    [call] = world.deliverer.calls
    assert call.traceparent is None and "traceparent" not in call.headers
    [result] = [m for m in world.publisher.sent if m.topic == "job-results"]
    assert "traceparent" not in result.value
