"""Entry points of the results function: parsing ``job-results`` messages and applying an MSK batch."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from opentelemetry.trace import SpanKind

from jobrunner import wiring
from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.deliverers.memory import MemoryDeliverer
from jobrunner.adapters.deliverers.routing import RoutingDeliverer
from jobrunner.adapters.invokers.memory import RecordingInvoker
from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.adapters.webhook_secrets.memory import MemoryWebhookSecrets
from jobrunner.config import Settings
from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import ExecutionRecord, ExecutionStatus, Job, Trigger
from jobrunner.domain.messages import execution_message
from jobrunner.domain.placement import plan_execution
from jobrunner.domain.receipts import result_token
from jobrunner.domain.schedules import At
from jobrunner.domain.spec import JobSpec, RetryPolicy
from jobrunner.domain.targets import HttpsTarget
from jobrunner.entrypoints import parse_report, run_delivery, run_results
from jobrunner.ports import Answered, Completion, DeliveryCall
from jobrunner.services.results import WorkerReport
from jobrunner.wiring import Container
from tests.support.spans import ids, own, parent
from tests.support.worker_run import run_worker_once

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from jobrunner.ports import RecordKey

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
FIRE = datetime(2026, 11, 22, 10, 10, tzinfo=UTC)


# -- parse_report ------------------------------------------------------------------------------------------


def worker_result(message: dict[str, Any], fails: bool) -> bytes:
    """What our worker helper sends to ``job-results`` after running ``message``."""

    def handle(_: Any) -> None:
        if fails:
            raise ValueError("bad input")

    return run_worker_once(json.dumps(message).encode(), handle)


SCAN_MESSAGE = {
    "execution_id": "e-1", "job_id": "job-1", "user_id": "alice", "scheduled_at": "2026-11-22T10:10:00.000Z",
    "attempt": 2, "trigger": "RETRY", "payload": {"type": "x"},
}


@pytest.mark.parametrize("fails", [False, True], ids=["success", "failure"])
def test_parses_what_our_worker_sends(fails: bool) -> None:
    report = parse_report(worker_result(SCAN_MESSAGE, fails))
    assert report == WorkerReport(
        execution_id="e-1", job_id="job-1", success=not fails, error="ValueError: bad input" if fails else None,
        scheduled_at=FIRE, attempt=2,
    )


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"execution_id": "e-1", "job_id": "job-1", "status": "SUCCESS"}, WorkerReport("e-1", "job-1", True)),
        ({"execution_id": "e-1", "job_id": "job-1", "status": "FAILED"}, WorkerReport("e-1", "job-1", False)),
        ({"execution_id": "e-1", "job_id": "job-1", "status": "FAILED", "error": "exit 3"},
         WorkerReport("e-1", "job-1", False, "exit 3")),
        ({"execution_id": "e-1", "job_id": "job-1", "status": "success"}, WorkerReport("e-1", "job-1", True)),
        ({"execution_id": "e-1", "job_id": "job-1", "status": "SUCCESS", "extra": [1]},
         WorkerReport("e-1", "job-1", True)),
        ({"execution_id": "e-1", "job_id": "job-1", "status": "SUCCESS", "scheduled_at": "2026-11-22T11:10:00+01:00",
          "attempt": 1}, WorkerReport("e-1", "job-1", True, None, FIRE, 1)),
        ({"execution_id": "e-1", "job_id": "job-1", "status": "FAILED", "cancelled": True},
         WorkerReport("e-1", "job-1", False, cancelled=True)),
        ({"execution_id": "e-1", "job_id": "job-1", "status": "SUCCESS", "cancelled": True},
         WorkerReport("e-1", "job-1", True)),
        ({"execution_id": "e-1", "job_id": "job-1", "status": "FAILED", "retryable": False},
         WorkerReport("e-1", "job-1", False, retryable=False)),
        ({"execution_id": "e-1", "job_id": "job-1", "status": "FAILED", "retryable": "no"},
         WorkerReport("e-1", "job-1", False)),
        ({"execution_id": "e-1", "job_id": "job-1", "status": "SUCCESS", "retryable": False},
         WorkerReport("e-1", "job-1", True)),
        ({"execution_id": "e-1", "job_id": "job-1", "status": "FAILED", "retry_after_s": 30},
         WorkerReport("e-1", "job-1", False, retry_after=timedelta(seconds=30))),
        ({"execution_id": "e-1", "job_id": "job-1", "status": "FAILED", "retry_after_s": "30"},
         WorkerReport("e-1", "job-1", False)),
        ({"execution_id": "e-1", "job_id": "job-1", "status": "FAILED", "retry_after_s": -1},
         WorkerReport("e-1", "job-1", False)),
    ],
    ids=["success", "failure", "failure-with-error", "lowercase-status", "unknown-field", "offset-and-attempt",
         "cancelled", "cancelled-but-succeeded", "not-retryable", "retryable-not-a-bool", "not-retryable-success",
         "retry-after", "retry-after-text", "retry-after-negative"],
)
def test_parses_the_minimal_form_of_the_design(message: dict[str, Any], expected: WorkerReport) -> None:
    assert parse_report(json.dumps(message).encode()) == expected


def test_long_errors_are_cut() -> None:
    value = json.dumps({"execution_id": "e", "job_id": "j", "status": "FAILED", "error": "x" * 5000}).encode()
    report = parse_report(value)
    assert report is not None and report.error == "x" * 2000


MINIMAL = {"execution_id": "e-1", "job_id": "job-1", "status": "SUCCESS"}
WORKER_TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"


@pytest.mark.parametrize(("sent", "kept"), [(WORKER_TRACE, WORKER_TRACE), (WORKER_TRACE.upper(), WORKER_TRACE),
                                            ("00-not-a-trace", None), (42, None), (None, None)],
                         ids=["valid", "uppercase", "invalid", "number", "null"])
def test_a_valid_traceparent_of_the_worker_is_kept(sent: Any, kept: str | None) -> None:
    report = parse_report(json.dumps({**MINIMAL, "traceparent": sent}).encode())
    assert report is not None and report.traceparent == kept


@pytest.mark.parametrize(
    "value",
    [
        b"", b"not json", b"\xff\xfe", b"null", b"[]", b'"SUCCESS"', b"42",
        json.dumps({"job_id": "job-1", "status": "SUCCESS"}).encode(),
        json.dumps({"execution_id": "e-1", "status": "SUCCESS"}).encode(),
        json.dumps({"execution_id": "e-1", "job_id": "job-1"}).encode(),
        json.dumps({**MINIMAL, "status": "DONE"}).encode(),
        json.dumps({**MINIMAL, "status": "RUNNING"}).encode(),
        json.dumps({**MINIMAL, "scheduled_at": "yesterday"}).encode(),
        json.dumps({**MINIMAL, "scheduled_at": "2026-11-22T10:10:00"}).encode(),
        json.dumps({**MINIMAL, "attempt": "two"}).encode(),
        json.dumps({**MINIMAL, "attempt": [1]}).encode(),
        json.dumps({**MINIMAL, "scheduled_at": 1795000000000}).encode(),
        json.dumps({**MINIMAL, "execution_id": None}).encode(),
        json.dumps({**MINIMAL, "job_id": None}).encode(),
        json.dumps({**MINIMAL, "execution_id": ""}).encode(),
        json.dumps({**MINIMAL, "job_id": ""}).encode(),
        json.dumps({**MINIMAL, "execution_id": 42}).encode(),
        json.dumps({**MINIMAL, "job_id": ["job-1"]}).encode(),
        json.dumps({**MINIMAL, "status": ["SUCCESS"]}).encode(),
        json.dumps({**MINIMAL, "attempt": 0}).encode(),
        json.dumps({**MINIMAL, "attempt": -1}).encode(),
        json.dumps({**MINIMAL, "attempt": True}).encode(),
        json.dumps({**MINIMAL, "attempt": 1.5}).encode(),
        json.dumps({**MINIMAL, "attempt": 2.0}).encode(),
        json.dumps({**MINIMAL, "attempt": "2"}).encode(),
        json.dumps({**MINIMAL, "scheduled_at": {"at": "2026-11-22T10:10:00Z"}}).encode(),
    ],
    ids=[
        "empty", "not-json", "not-utf8", "null", "array", "string", "number", "no-execution-id", "no-job-id",
        "no-status", "unknown-status", "running-status", "bad-scheduled-at", "scheduled-at-without-offset",
        "bad-attempt", "attempt-array", "scheduled-at-number", "null-execution-id", "null-job-id",
        "empty-execution-id", "empty-job-id", "number-execution-id", "array-job-id", "array-status",
        "attempt-zero", "attempt-negative", "attempt-boolean", "attempt-fraction", "attempt-float",
        "attempt-string", "scheduled-at-object",
    ],
)
def test_rejects_what_is_not_a_result(value: bytes) -> None:
    # returns None (counted and skipped): a bad message must never raise and so block its partition
    assert parse_report(value) is None


# -- run_results ------------------------------------------------------------------------------------------


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def container(monkeypatch: pytest.MonkeyPatch, clock: ManualClock) -> Iterator[Container]:
    monkeypatch.setattr(wiring, "_container", None)  # the process-wide container is restored afterwards
    custom = Container(
        Settings.from_env({"JOBRUNNER_SEGMENTS": "4"}), store=MemoryJobStore(), publisher=MemoryPublisher(),
        leases=MemoryLeaseStore(), invoker=RecordingInvoker(), clock=clock,
    )
    wiring.install(custom)
    yield custom


def published(services: Container, max_retries: int = 0) -> tuple[Job, dict[str, Any]]:
    """A one-time job whose run the scan has published: its message (as a worker gets it) and a RUNNING record."""
    job = services.jobs.submit("alice", JobSpec(At(FIRE), {"n": 1}, retry=RetryPolicy(max_retries=max_retries)))[0]
    row = plan_execution(job, FIRE, FIRE, 4, trigger=Trigger.SCHEDULE)
    record = ExecutionRecord(
        job_id=job.job_id, scheduled_at=FIRE, attempt=1, execution_id=row.execution_id, user_id="alice",
        status=ExecutionStatus.RUNNING, trigger=Trigger.SCHEDULE, due_at=FIRE, published_at=FIRE,
    )
    services.store.write_started([record])
    services.store.settle_published([Completion(done=row, following=None)])
    token = result_token(services.result_key, tenant="alice", execution_id=row.execution_id, attempt=1)
    return job, execution_message(job, row, token)[1]


def msk_event(*partitions: list[bytes | None]) -> dict[str, Any]:
    """An MSK event-source batch: records grouped by topic-partition, values base64-encoded."""
    records: dict[str, list[dict[str, Any]]] = {}
    for number, values in enumerate(partitions):
        records[f"job-results-{number}"] = [
            {
                "topic": "job-results", "partition": number, "offset": offset, "timestamp": 1795000000000,
                "timestampType": "CREATE_TIME", "key": base64.b64encode(b"job").decode(), "headers": [],
                **({"value": base64.b64encode(value).decode()} if value is not None else {}),
            }
            for offset, value in enumerate(values)
        ]
    return {"eventSource": "aws:kafka", "eventSourceArn": "arn:aws:kafka:...", "records": records}


def test_run_results_applies_a_batch_and_counts_outcomes(container: Container, clock: ManualClock) -> None:
    # Given three published executions, one of them with a retry left
    succeeding, to_succeed = published(container)
    retried, to_retry = published(container, max_retries=1)
    _, to_dead_letter = published(container)
    clock.set(FIRE + timedelta(seconds=30))
    # When one MSK batch brings their results, a duplicate, strangers and garbage, over two partitions
    event = msk_event(
        [worker_result(to_succeed, False), worker_result(to_retry, True), b"garbage", None],
        [worker_result(to_dead_letter, True), worker_result(to_succeed, False),
         json.dumps({"execution_id": "nope", "job_id": succeeding.job_id, "status": "SUCCESS",
                     "result_token": result_token(container.result_key, tenant="alice", execution_id="nope",
                                                  attempt=1)}).encode()],
    )
    outcomes = run_results(event)
    # Then every record is accounted for
    assert outcomes == {"succeeded": 1, "retrying": 1, "dead_lettered": 1, "ignored_finished": 1,
                        "ignored_unknown": 1, "ignored_malformed": 2}
    store = container.store
    assert isinstance(store, MemoryJobStore)
    [record] = [r for r in store.records.values()
                if (r.job_id, r.scheduled_at, r.attempt) == (succeeding.job_id, FIRE, 1)]
    assert record.status is ExecutionStatus.SUCCESS
    retries = [r for r in store.rows.values() if r.trigger is Trigger.RETRY]
    assert [(r.job_id, r.attempt) for r in retries] == [(retried.job_id, 2)]
    publisher = container.publisher
    assert isinstance(publisher, MemoryPublisher)
    assert [(m.topic, m.value["execution_id"]) for m in publisher.sent] == [
        ("job-dlq", to_dead_letter["execution_id"])
    ]


def test_run_results_of_an_empty_batch(container: Container) -> None:
    assert run_results({"eventSource": "aws:kafka", "records": {}}) == {}
    assert run_results({}) == {}


class BrokenStore(MemoryJobStore):
    def get_record(
        self, job_id: str, scheduled_at: datetime, attempt: int, execution_id: str
    ) -> ExecutionRecord | None:
        raise Unavailable("database unavailable")

    def get_records(self, keys: Sequence[RecordKey]) -> dict[RecordKey, ExecutionRecord]:
        raise Unavailable("database unavailable")


def test_run_results_raises_when_the_store_fails_so_the_batch_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wiring, "_container", None)
    broken = Container(
        Settings.from_env({"JOBRUNNER_SEGMENTS": "4"}), store=BrokenStore(), publisher=MemoryPublisher(),
        leases=MemoryLeaseStore(), invoker=RecordingInvoker(), clock=ManualClock(NOW),
    )
    wiring.install(broken)
    message = {**SCAN_MESSAGE, "result_token": result_token(broken.result_key, tenant="alice",
                                                            execution_id=SCAN_MESSAGE["execution_id"], attempt=2)}
    event = msk_event([worker_result(message, False)])
    with pytest.raises(Unavailable):
        run_results(event)


def test_run_results_skips_a_poison_message_and_applies_the_rest(container: Container, clock: ManualClock) -> None:
    # A message that is JSON but not a result (here a numeric scheduled_at) must be counted and skipped:
    # raising would make the event source retry the same batch forever and block the partition.
    _, to_succeed = published(container)
    clock.set(FIRE + timedelta(seconds=30))
    poison = json.dumps({**MINIMAL, "scheduled_at": 1795000000000}).encode()
    assert run_results(msk_event([poison, worker_result(to_succeed, False)])) == {
        "ignored_malformed": 1, "succeeded": 1,
    }


# -- run_delivery -----------------------------------------------------------------------------------------


def test_run_delivery_delivers_a_batch_and_its_results_end_the_executions(
    monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> None:
    # Given two published executions of jobs with a target, one whose endpoint answers 404
    monkeypatch.setattr(wiring, "_container", None)
    deliverer = MemoryDeliverer()
    services = Container(
        Settings.from_env({"JOBRUNNER_SEGMENTS": "4"}), store=MemoryJobStore(), publisher=MemoryPublisher(),
        leases=MemoryLeaseStore(), invoker=RecordingInvoker(), clock=clock, deliverer=deliverer,
        webhook_secrets=MemoryWebhookSecrets(),
    )
    wiring.install(services)
    good, to_deliver = published(services, max_retries=3)
    gone, to_fail = published(services, max_retries=3)
    deliverer.script("https://hooks.example.com/gone", Answered(404, b"no such hook"))
    clock.set(FIRE + timedelta(seconds=1))
    # When the delivery function gets them (and a message that is no delivery), then the results function
    # gets what it published
    event = msk_event([json.dumps({**to_deliver, "target": {"https": {"url": "https://hooks.example.com/ok"}}})
                       .encode(), b"garbage"],
                      [json.dumps({**to_fail, "target": {"https": {"url": "https://hooks.example.com/gone"}}})
                       .encode()])
    assert run_delivery(event) == {"delivered": 1, "failed_permanent": 1, "ignored_malformed": 1}
    publisher = services.publisher
    assert isinstance(publisher, MemoryPublisher)
    results = [m.value for m in publisher.sent if m.topic == "job-results"]
    outcomes = run_results(msk_event([json.dumps(value).encode() for value in results]))
    # Then one succeeded, and the other is dead-lettered at once, its retries notwithstanding
    assert outcomes == {"succeeded": 1, "dead_lettered": 1}
    assert [m.value["error"] for m in publisher.sent if m.topic == "job-dlq"] == ["HTTP 404: no such hook"]
    assert {good.job_id, gone.job_id} == {value["job_id"] for value in results}


def test_run_delivery_makes_no_call_that_could_outlast_the_invocation(
    monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> None:
    monkeypatch.setattr(wiring, "_container", None)
    deliverer = MemoryDeliverer()
    services = Container(
        Settings.from_env({"JOBRUNNER_SEGMENTS": "4"}), store=MemoryJobStore(), publisher=MemoryPublisher(),
        leases=MemoryLeaseStore(), invoker=RecordingInvoker(), clock=clock, deliverer=deliverer,
        webhook_secrets=MemoryWebhookSecrets(),
    )
    wiring.install(services)
    _, message = published(services)
    event = msk_event([json.dumps({**message, "target": {"https": {"url": "https://hooks.example.com/"}}}).encode()])
    # 12 s left, 10 of them kept to publish: a call of up to 11 s (the 10 s default timeout) is not started
    assert run_delivery(event, remaining_ms=12_000) == {"not_attempted_out_of_time": 1}
    assert deliverer.calls == []


def test_a_delivery_continues_the_executions_trace_to_the_receiver_and_the_result(
    monkeypatch: pytest.MonkeyPatch, clock: ManualClock, spans: InMemorySpanExporter
) -> None:
    # Given an execution of a job with an HTTPS target, its record carrying the execution's trace context
    monkeypatch.setattr(wiring, "_container", None)
    receiver, publisher = MemoryDeliverer(), MemoryPublisher()
    services = Container(
        Settings.from_env({"JOBRUNNER_SEGMENTS": "4"}), store=MemoryJobStore(), publisher=publisher,
        leases=MemoryLeaseStore(), invoker=RecordingInvoker(), clock=clock, webhook_secrets=MemoryWebhookSecrets(),
        deliverer=RoutingDeliverer(https=lambda: receiver, lambda_=MemoryDeliverer, sqs=MemoryDeliverer),
    )
    wiring.install(services)
    _, message = published(services)
    event = msk_event([json.dumps({**message, "target": {"https": {"url": "https://hooks.example.com/"}}}).encode()])
    [record] = event["records"]["job-results-0"]
    record["headers"] = [{"traceparent": list(WORKER_TRACE.encode())}]
    clock.set(FIRE + timedelta(seconds=1))
    # When the delivery function delivers it, and the results function applies what it reported
    assert run_delivery(event) == {"delivered": 1}
    [result] = [m.value for m in publisher.sent if m.topic == "job-results"]
    assert run_results(msk_event([json.dumps(result).encode()])) == {"succeeded": 1}
    # Then the delivery's span is a CLIENT child of the execution's, the receiver is sent the delivery's span as
    # its traceparent, and applying the result continues the execution's trace too
    delivered, applied = spans.get_finished_spans()
    assert (delivered.name, delivered.kind, parent(delivered)) == ("deliver https", SpanKind.CLIENT,
                                                                    ids(WORKER_TRACE))
    [call] = receiver.calls
    assert ids(call.headers["traceparent"]) == own(delivered)
    assert (applied.name, parent(applied)) == ("apply result", ids(WORKER_TRACE))


def test_a_failed_call_ends_its_span_in_error(spans: InMemorySpanExporter) -> None:
    receiver = MemoryDeliverer()
    receiver.script("https://hooks.example.com/", Answered(503))
    routing = RoutingDeliverer(https=lambda: receiver, lambda_=MemoryDeliverer, sqs=MemoryDeliverer)
    routing.deliver(DeliveryCall(HttpsTarget("https://hooks.example.com/"), b"", {}, "e-1", WORKER_TRACE))
    [span] = spans.get_finished_spans()
    assert not span.status.is_ok and span.attributes == {"jobrunner.execution_id": "e-1", "jobrunner.target": "https"}


def test_without_tracing_the_call_sends_the_executions_trace_as_it_came() -> None:
    receiver = MemoryDeliverer()
    routing = RoutingDeliverer(https=lambda: receiver, lambda_=MemoryDeliverer, sqs=MemoryDeliverer)
    routing.deliver(DeliveryCall(HttpsTarget("https://hooks.example.com/"), b"", {"traceparent": WORKER_TRACE},
                                 "e-1", WORKER_TRACE))
    assert receiver.calls[0].headers == {"traceparent": WORKER_TRACE}


def test_lateness_sample_keeps_the_extremes_and_spreads_evenly() -> None:
    from jobrunner.entrypoints import _sample

    values = [float(v) for v in range(1000, 0, -1)]
    sample = _sample(values, 5)
    assert sample == [1.0, 251.0, 501.0, 750.0, 1000.0]
    assert _sample([3.0, 1.0], 5) == [3.0, 1.0]


def test_applying_a_result_continues_the_workers_trace(
    container: Container, clock: ManualClock, spans: InMemorySpanExporter
) -> None:
    _, to_succeed = published(container)
    clock.set(FIRE + timedelta(seconds=30))
    result = json.dumps({"execution_id": to_succeed["execution_id"], "job_id": to_succeed["job_id"],
                         "status": "SUCCESS", "traceparent": WORKER_TRACE,
                         "result_token": to_succeed["result_token"]}).encode()
    assert run_results(msk_event([result])) == {"succeeded": 1}
    [span] = spans.get_finished_spans()
    assert (span.name, span.kind, parent(span)) == ("apply result", SpanKind.CONSUMER, ids(WORKER_TRACE))
    assert dict(span.attributes or {}) == {"jobrunner.execution_id": to_succeed["execution_id"],
                                           "jobrunner.job_id": to_succeed["job_id"], "jobrunner.outcome": "succeeded"}


def test_the_result_token_our_worker_sends_back_is_read() -> None:
    report = parse_report(worker_result({**SCAN_MESSAGE, "result_token": "t" * 43}, False))
    assert report is not None and report.result_token == "t" * 43
    assert parse_report(json.dumps({**MINIMAL, "result_token": 7}).encode()) == WorkerReport("e-1", "job-1", True)


def test_run_results_refuses_and_counts_a_result_without_its_token(container: Container, clock: ManualClock) -> None:
    # Given a published execution, and a result for it built from the message's public fields only
    _, message = published(container)
    clock.set(FIRE + timedelta(seconds=30))
    forged = {k: message[k] for k in ("execution_id", "job_id", "scheduled_at", "attempt")}
    event = msk_event([json.dumps({**forged, "status": "SUCCESS"}).encode(),
                       json.dumps({**forged, "status": "FAILED", "result_token": "x" * 43}).encode()])
    # When the batch is applied, then both are refused, and the record is still RUNNING
    assert run_results(event) == {"refused_token": 2}
    store = container.store
    assert isinstance(store, MemoryJobStore)
    [record] = [r for r in store.records.values() if r.execution_id == message["execution_id"]]
    assert record.status is ExecutionStatus.RUNNING


# -- run_reconcile -----------------------------------------------------------------------------------------------


def _reconcile_handler() -> Any:
    """functions/reconcile/handler.py's ``handler``, as Lambda imports it."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "functions" / "reconcile" / "handler.py"
    spec = importlib.util.spec_from_file_location("reconcile_handler", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


def test_the_reconcile_function_counts_repairs_in_total_and_by_reason(
    container: Container, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from collections import Counter

    from devstack.lambda_context import LocalContext
    from jobrunner.services.reconcile import ReconcileReport

    # Given a run that repaired two lost fires and a lost retry, with 40 s left in the invocation
    deadlines: list[datetime | None] = []

    def run(deadline: datetime | None = None) -> ReconcileReport:
        deadlines.append(deadline)
        return ReconcileReport(started_at=NOW, jobs_walked=7, history_reads=2,
                               repaired=Counter({"missed_fire": 2, "missed_retry": 1}))

    monkeypatch.setattr(container.reconciler, "run", run)
    # When the function runs
    result = _reconcile_handler()({"time": "2026-11-22T10:00:00Z"}, LocalContext("jobrunner-reconcile", timeout_s=40))
    # Then it walked until 10 s before its end, and its metrics say 3 repairs, and how many of each reason
    assert result["repaired"] == {"missed_fire": 2, "missed_retry": 1}
    assert deadlines[0] is not None and NOW + timedelta(seconds=29) <= deadlines[0] <= NOW + timedelta(seconds=30)
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]

    def value(blob: dict[str, Any], name: str) -> float:
        raw = blob[name]
        return float(raw[0] if isinstance(raw, list) else raw)

    total = [b for b in blobs if "Reconciled" in b and "reason" not in b]
    assert [value(b, "Reconciled") for b in total] == [3.0]
    assert value(total[0], "ReconcileJobsWalked") == 7.0
    by_reason = {b["reason"]: value(b, "Reconciled") for b in blobs if "reason" in b}
    assert by_reason == {"missed_fire": 2.0, "missed_retry": 1.0, "stuck_hold": 0.0}
