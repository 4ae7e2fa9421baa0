"""The worker helper: consume -> run the handler of the payload's type -> report, committing only after flush.

Kafka is replaced by two small fakes that write every call into one shared log, so the order of
sends, flushes and commits can be asserted.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from jobrunner import telemetry
from jobrunner_client.worker import Execution, Worker, untraced
from tests.support.spans import ids, own, parent

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from jobrunner_client.worker import SpanHook


@dataclass(frozen=True)
class Message:
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)


class FakeConsumer:
    """Hands out the given batches one poll at a time; once they are gone, runs ``when_drained``."""

    def __init__(self, batches: list[list[bytes | Message | None]], log: list[str]) -> None:
        self._batches = list(batches)
        self._log = log
        self.when_drained: Callable[[], None] = lambda: None

    def poll(self, timeout_ms: int = 0) -> dict[tuple[str, int], list[Message]]:
        self._log.append("poll")
        if not self._batches:
            self.when_drained()
            return {}
        return {("jobs", 0): [v if isinstance(v, Message) else Message(v) for v in self._batches.pop(0)]}

    def commit(self) -> None:
        self._log.append("commit")

    def close(self) -> None:
        self._log.append("consumer.close")


class FakeProducer:
    def __init__(self, log: list[str]) -> None:
        self._log = log
        self.sent: list[tuple[str, bytes, dict[str, Any]]] = []

    def send(self, topic: str, key: bytes, value: bytes) -> None:
        self._log.append("send")
        self.sent.append((topic, key, json.loads(value)))

    def flush(self) -> None:
        self._log.append("flush")

    def close(self) -> None:
        self._log.append("producer.close")


def execution(execution_id: str = "e-1", payload: Any = None, job_id: str = "job-1", attempt: int = 1,
              trigger: str | None = "SCHEDULE") -> bytes:
    """A ``jobs`` message as the scan publishes it."""
    value: dict[str, Any] = {
        "execution_id": execution_id, "job_id": job_id, "user_id": "alice",
        "scheduled_at": "2026-11-22T10:10:00.000Z", "attempt": attempt,
        "payload": {"type": "send-report"} if payload is None else payload,
    }
    if trigger is not None:
        value["trigger"] = trigger
    return json.dumps(value).encode()


@dataclass
class Harness:
    worker: Worker
    producer: FakeProducer
    log: list[str]

    def results(self) -> list[dict[str, Any]]:
        return [value for _, _, value in self.producer.sent]


def harness(*batches: list[bytes | Message | None], results_topic: str = "job-results",
            span: SpanHook = telemetry.span) -> Harness:
    """A worker over fake Kafka clients, tracing as the local stack does (``jobrunner.telemetry``) unless
    ``span`` says otherwise."""
    log: list[str] = []
    consumer = FakeConsumer(list(batches), log)
    producer = FakeProducer(log)
    worker = Worker(consumer=consumer, producer=producer, results_topic=results_topic, span=span)
    consumer.when_drained = worker.stopping.set
    return Harness(worker, producer, log)


def test_routes_each_execution_to_the_handler_of_its_type() -> None:
    h = harness([execution("e-1", {"type": "send-report", "to": "ops"}), execution("e-2", {"type": "resize"})])
    seen: dict[str, list[Execution]] = {"send-report": [], "resize": []}
    h.worker.handler("send-report")(seen["send-report"].append)
    h.worker.handler("resize")(seen["resize"].append)
    h.worker.run(install_signal_handlers=False)
    assert seen["send-report"] == [Execution(
        execution_id="e-1", job_id="job-1", user_id="alice", scheduled_at="2026-11-22T10:10:00.000Z", attempt=1,
        trigger="SCHEDULE", payload={"type": "send-report", "to": "ops"},
    )]
    assert [e.execution_id for e in seen["resize"]] == ["e-2"]
    assert h.worker.processed == 2


def test_the_default_handler_takes_every_other_type_and_untyped_payloads() -> None:
    payloads: list[Any] = [{"type": "other"}, {"no": "type"}, [1, 2], "text", None, 7]
    h = harness([execution(f"e-{i}", p if p is not None else {}) for i, p in enumerate(payloads)])
    typed: list[str] = []
    default: list[str] = []
    h.worker.handler("send-report")(lambda e: typed.append(e.execution_id))
    h.worker.handler()(lambda e: default.append(e.execution_id))
    h.worker.run(install_signal_handlers=False)
    assert (typed, default) == ([], [f"e-{i}" for i in range(len(payloads))])


def test_success_and_failure_are_reported_to_job_results() -> None:
    h = harness([execution("e-ok", {"type": "ok"}, attempt=2), execution("e-bad", {"type": "bad"}, job_id="job-2")])
    h.worker.handler("ok")(lambda e: None)

    def bad(e: Execution) -> None:
        raise ValueError("no rows for 2026-11-22")

    h.worker.handler("bad")(bad)
    h.worker.run(install_signal_handlers=False)
    assert h.producer.sent == [
        ("job-results", b"job-1", {"execution_id": "e-ok", "job_id": "job-1",
                                   "scheduled_at": "2026-11-22T10:10:00.000Z", "attempt": 2, "status": "SUCCESS"}),
        ("job-results", b"job-2", {"execution_id": "e-bad", "job_id": "job-2",
                                   "scheduled_at": "2026-11-22T10:10:00.000Z", "attempt": 1, "status": "FAILED",
                                   "error": "ValueError: no rows for 2026-11-22"}),
    ]


def test_long_errors_are_cut_to_2000_characters() -> None:
    h = harness([execution()])

    def noisy(e: Execution) -> None:
        raise RuntimeError("x" * 5000)

    h.worker.handler("send-report")(noisy)
    h.worker.run(install_signal_handlers=False)
    [result] = h.results()
    assert result["status"] == "FAILED" and len(result["error"]) == 2000
    assert result["error"].startswith("RuntimeError: xxx")


def test_results_go_to_the_configured_topic() -> None:
    h = harness([execution()], results_topic="payroll-results")
    h.worker.handler()(lambda e: None)
    h.worker.run(install_signal_handlers=False)
    assert [topic for topic, _, _ in h.producer.sent] == ["payroll-results"]


def test_an_execution_seen_before_is_not_run_again_but_reported_again() -> None:
    # Given the same execution delivered twice in one batch and once more in the next (a redelivery)
    h = harness([execution("e-1"), execution("e-1")], [execution("e-1"), execution("e-2")])
    ran: list[str] = []
    h.worker.handler("send-report")(lambda e: ran.append(e.execution_id))
    h.worker.run(install_signal_handlers=False)
    # Then it ran once, and each copy was reported, with the first run's result (the first report may
    # have been lost with the crash that caused the redelivery)
    assert ran == ["e-1", "e-2"]
    assert [r["execution_id"] for r in h.results()] == ["e-1", "e-1", "e-1", "e-2"]
    first, *again = h.producer.sent[:3]
    assert first == ("job-results", b"job-1", {"execution_id": "e-1", "job_id": "job-1",
                                              "scheduled_at": "2026-11-22T10:10:00.000Z", "attempt": 1,
                                              "status": "SUCCESS"})
    assert again == [first, first]
    assert h.worker.processed == 2
    # and the reports sent again are flushed before their offsets are committed, like the first
    assert h.log == [
        "poll", "send", "send", "flush", "commit",
        "poll", "send", "send", "flush", "commit",
        "poll", "flush", "consumer.close", "producer.close",
    ]


def test_a_failed_execution_is_not_run_again_either_and_its_failure_is_reported_again() -> None:
    h = harness([execution("e-1")], [execution("e-1")])
    calls: list[str] = []

    def failing(e: Execution) -> None:
        calls.append(e.execution_id)
        raise OSError("disk full")

    h.worker.handler("send-report")(failing)
    h.worker.run(install_signal_handlers=False)
    assert calls == ["e-1"]
    first, again = h.producer.sent
    assert first == ("job-results", b"job-1", {"execution_id": "e-1", "job_id": "job-1",
                                              "scheduled_at": "2026-11-22T10:10:00.000Z", "attempt": 1,
                                              "status": "FAILED", "error": "OSError: disk full"})
    assert again == first
    assert h.worker.processed == 1


def test_offsets_are_committed_only_after_the_results_are_flushed() -> None:
    h = harness([execution("e-1"), execution("e-2")], [execution("e-3")])
    h.worker.handler()(lambda e: None)
    h.worker.run(install_signal_handlers=False)
    assert h.log == [
        "poll", "send", "send", "flush", "commit",
        "poll", "send", "flush", "commit",
        "poll",  # empty: nothing to commit; the worker is told to stop
        "flush", "consumer.close", "producer.close",
    ]


def test_an_execution_without_handler_is_reported_failed() -> None:
    h = harness([execution("e-1", {"type": "unknown-type"})])
    h.worker.handler("send-report")(lambda e: None)
    h.worker.run(install_signal_handlers=False)
    [result] = h.results()
    assert (result["status"], result["error"]) == ("FAILED", "no handler for job type 'unknown-type'")


@pytest.mark.parametrize(
    "malformed",
    [b"not json", b"[]", b'"text"', b"{}", b'{"execution_id": "e-9"}', None, b"\xff\xfe"],
    ids=["not-json", "array", "string", "empty-object", "missing-fields", "tombstone", "not-utf8"],
)
def test_a_malformed_message_is_skipped_and_committed(malformed: bytes | None) -> None:
    h = harness([malformed, execution("e-1")])
    ran: list[str] = []
    h.worker.handler()(lambda e: ran.append(e.execution_id))
    h.worker.run(install_signal_handlers=False)
    assert ran == ["e-1"]
    assert [r["execution_id"] for r in h.results()] == ["e-1"]
    assert h.log[:5] == ["poll", "send", "flush", "commit", "poll"]


def test_a_message_without_trigger_counts_as_scheduled() -> None:
    h = harness([execution(trigger=None)])
    got: list[Execution] = []
    h.worker.handler()(got.append)
    h.worker.run(install_signal_handlers=False)
    assert [e.trigger for e in got] == ["SCHEDULE"]


def test_stopping_before_run_polls_nothing_and_closes() -> None:
    h = harness([execution()])
    h.worker.handler()(lambda e: None)
    h.worker.stopping.set()
    h.worker.run(install_signal_handlers=False)
    assert h.log == ["flush", "consumer.close", "producer.close"]
    assert h.producer.sent == []


def test_stopping_during_a_batch_finishes_and_commits_it() -> None:
    h = harness([execution("e-1"), execution("e-2")], [execution("e-3")])

    def stop_after(e: Execution) -> None:
        h.worker.stopping.set()

    h.worker.handler()(stop_after)
    h.worker.run(install_signal_handlers=False)
    assert [r["execution_id"] for r in h.results()] == ["e-1", "e-2"]  # the batch in hand, not the next
    assert h.log == ["poll", "send", "send", "flush", "commit", "flush", "consumer.close", "producer.close"]


# -- tracing ------------------------------------------------------------------------------------------------

#: The message's traceparent header: the scan's span of this execution.
MESSAGE_TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"


def traced(execution_id: str = "e-1", payload: Any = None) -> Message:
    return Message(execution(execution_id, payload), [("traceparent", MESSAGE_TRACE.encode())])


def test_without_tracing_the_result_carries_the_messages_traceparent() -> None:
    h = harness([traced()])
    seen: list[Execution] = []
    h.worker.handler()(seen.append)
    h.worker.run(install_signal_handlers=False)
    assert [e.traceparent for e in seen] == [MESSAGE_TRACE]
    assert [r["traceparent"] for r in h.results()] == [MESSAGE_TRACE]


def test_the_default_span_hook_traces_nothing_and_hands_the_messages_traceparent_on(
    spans: InMemorySpanExporter,
) -> None:
    # Given tracing on in this process, but a worker built without a span hook (as a user's worker is)
    h = harness([traced("e-1"), traced("e-2", {"type": "unknown"})], span=untraced)
    seen: list[Execution] = []
    h.worker.handler("send-report")(seen.append)
    h.worker.run(install_signal_handlers=False)
    # Then it opens no span, and the message's trace context goes to the handler and back with each result
    assert spans.get_finished_spans() == ()
    assert [e.traceparent for e in seen] == [MESSAGE_TRACE]
    assert [(r["status"], r["traceparent"]) for r in h.results()] == [("SUCCESS", MESSAGE_TRACE),
                                                                      ("FAILED", MESSAGE_TRACE)]


def test_the_span_hook_opens_one_consumer_span_per_execution_and_hears_its_failure() -> None:
    # Given a span hook of the user's own, recording what the worker asks of it
    opened: list[tuple[str, str | None, str, dict[str, Any]]] = []
    failed: list[str | None] = []

    @dataclass
    class Recorded:
        traceparent: str | None

        def fail(self, description: str | None) -> None:
            failed.append(description)

    @contextlib.contextmanager
    def hook(name: str, *, parent: str | None = None, kind: str = "internal",
             attributes: Mapping[str, Any] | None = None) -> Iterator[Recorded]:
        opened.append((name, parent, kind, dict(attributes or {})))
        yield Recorded(OWN_TRACE)

    # When the worker runs an execution it has a handler for and one it has not
    h = harness([traced("e-1"), traced("e-2", {"type": "unknown"})], span=hook)
    seen: list[Execution] = []
    h.worker.handler("send-report")(seen.append)
    h.worker.run(install_signal_handlers=False)

    # Then each runs in a consumer span continuing the message, the failure is reported to its span, and the
    # span's trace context is the one the handler sees and the result carries
    assert [(name, parent, kind) for name, parent, kind, _ in opened] == [
        ("process execution", MESSAGE_TRACE, "consumer")] * 2
    assert opened[0][3] == {"messaging.system": "kafka", "messaging.destination.name": "jobs",
                            "jobrunner.execution_id": "e-1", "jobrunner.job_id": "job-1", "jobrunner.attempt": 1}
    assert failed == ["no handler for job type 'unknown'"]
    assert [e.traceparent for e in seen] == [OWN_TRACE]
    assert [r["traceparent"] for r in h.results()] == [OWN_TRACE, OWN_TRACE]


#: The trace context of a span a test's own hook opens.
OWN_TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_the_worker_span_continues_the_message_and_goes_back_with_the_result(spans: InMemorySpanExporter) -> None:
    h = harness([traced()])
    seen: list[Execution] = []
    h.worker.handler()(seen.append)
    h.worker.run(install_signal_handlers=False)
    [span] = spans.get_finished_spans()
    assert (span.name, span.kind, parent(span)) == ("process execution", SpanKind.CONSUMER, ids(MESSAGE_TRACE))
    assert span.attributes is not None and span.attributes["jobrunner.execution_id"] == "e-1"
    [result] = h.results()
    assert ids(result["traceparent"]) == own(span)
    assert [e.traceparent for e in seen] == [result["traceparent"]]  # the handler's own spans nest under it


def test_a_failed_execution_ends_its_span_in_error(spans: InMemorySpanExporter) -> None:
    h = harness([traced("e-1", {"type": "unknown"})])
    h.worker.run(install_signal_handlers=False)
    [span] = spans.get_finished_spans()
    assert (span.status.status_code, span.status.description) == (StatusCode.ERROR, "no handler for job type 'unknown'")


def test_msk_iam_connects_both_clients_over_tls_with_iam(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a worker pointed at the stack's bootstrap brokers (KafkaBootstrapBrokers output)
    import jobrunner_client.worker as worker_module

    seen: dict[str, dict[str, Any]] = {}
    monkeypatch.setattr(worker_module, "KafkaConsumer", lambda *topics, **config: seen.setdefault("consumer", config))
    monkeypatch.setattr(worker_module, "KafkaProducer", lambda **config: seen.setdefault("producer", config))

    Worker(bootstrap="b-1.x:9098,b-2.x:9098", group_id="jobrunner-workers", security="msk-iam")

    # Then the consumer and the producer both authenticate with IAM over TLS
    for client in ("consumer", "producer"):
        assert seen[client]["bootstrap_servers"] == ["b-1.x:9098", "b-2.x:9098"]
        assert (seen[client]["security_protocol"], seen[client]["sasl_mechanism"]) == ("SASL_SSL", "AWS_MSK_IAM")


def test_plaintext_is_the_local_default_and_an_unknown_mode_is_refused() -> None:
    from jobrunner_client.worker import connection_config

    assert connection_config("127.0.0.1:9092") == {"bootstrap_servers": ["127.0.0.1:9092"]}
    with pytest.raises(ValueError, match="msk-iam"):
        connection_config("b:9098", "iam")


def test_the_result_carries_the_messages_result_token_back_and_a_duplicate_too() -> None:
    # Given a message with its result token (the proof that the result comes from its holder), twice
    message = json.loads(execution("e-1"))
    message["result_token"] = "t" * 43
    h = harness([json.dumps(message).encode(), json.dumps(message).encode()])
    h.worker.handler()(lambda e: None)
    h.worker.run(install_signal_handlers=False)
    # Then both reports send it back
    assert [value.get("result_token") for _, _, value in h.producer.sent] == ["t" * 43, "t" * 43]


# -- cancel messages (overlap policy cancel_other) ------------------------------------------------------------


def cancel(execution_id: str, reason: str = "overlap policy cancel_other: the fire at 10:11 replaces it") -> Message:
    value = {"cancel": True, "execution_id": execution_id, "job_id": "job-1", "user_id": "alice",
             "scheduled_at": "2026-11-22T10:10:00.000Z", "attempt": 1, "reason": reason}
    return Message(json.dumps(value).encode(), [("jobrunner-cancel", execution_id.encode())])


@pytest.fixture
def quick_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker reads its partitions again soon after a handler starts (a second, in production)."""
    monkeypatch.setattr("jobrunner_client.worker.POLL_WHILE_RUNNING_AFTER_S", 0.01)


def test_a_cancel_message_stops_the_execution_running_and_is_reported_not_to_retry(quick_polls: None) -> None:
    # Given a long execution, and a cancel message for it arriving while it runs
    h = harness([execution("e-1")], [cancel("e-1")], [execution("e-2")])
    steps: list[str] = []

    def long(e: Execution) -> None:
        if e.execution_id == "e-2":
            steps.append("e-2 ran")
            return
        for _ in range(500):  # about 5 s unless cancelled
            e.raise_if_cancelled()
            e.cancelled.wait(0.01)
        steps.append("e-1 ran to its end")

    h.worker.handler()(long)
    h.worker.run(install_signal_handlers=False)
    # Then it stopped, and its result says it was cancelled (the results function does not retry it)
    first, second = h.results()
    assert (first["execution_id"], first["status"], first["cancelled"]) == ("e-1", "FAILED", True)
    assert first["error"] == "cancelled: overlap policy cancel_other: the fire at 10:11 replaces it"
    assert (second["execution_id"], second["status"], steps) == ("e-2", "SUCCESS", ["e-2 ran"])
    # and offsets are committed once every message read has its result flushed
    assert h.log.count("commit") >= 1 and h.log.index("flush") < h.log.index("commit")


def test_an_execution_cancelled_before_it_starts_is_not_run(quick_polls: None) -> None:
    # Given e-2 waiting behind a long e-1, and a cancel for e-2 read while e-1 runs
    h = harness([execution("e-1"), execution("e-2")], [cancel("e-2")])
    ran: list[str] = []

    def slow(e: Execution) -> None:
        if e.execution_id == "e-1":
            threading_wait(0.2)
        ran.append(e.execution_id)

    h.worker.handler()(slow)
    h.worker.run(install_signal_handlers=False)
    assert ran == ["e-1"]
    assert [(r["execution_id"], r["status"], r.get("cancelled")) for r in h.results()] == [
        ("e-1", "SUCCESS", None), ("e-2", "FAILED", True)]
    assert h.results()[1]["error"].startswith("cancelled before it started")


def test_a_cancel_for_an_execution_that_is_not_here_changes_nothing() -> None:
    h = harness([cancel("elsewhere"), execution("e-1")])
    h.worker.handler()(lambda e: None)
    h.worker.run(install_signal_handlers=False)
    assert [(r["execution_id"], r["status"]) for r in h.results()] == [("e-1", "SUCCESS")]


def threading_wait(seconds: float) -> None:
    import threading

    threading.Event().wait(seconds)
