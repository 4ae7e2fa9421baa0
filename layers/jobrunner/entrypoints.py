"""Event -> service call -> plain result, for the tick, scan, results, delivery and reconcile functions (and the
local stack).

Kept apart from ``functions/`` so the handlers stay a few lines and the local stack calls the very
same code.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.data_classes import KafkaEvent
from pydantic import ValidationError

from jobrunner import telemetry
from jobrunner.domain.orphans import Reason
from jobrunner.domain.schedules import parse_instant
from jobrunner.observability import NAMESPACE, logger, metrics
from jobrunner.ports import ScanRequest
from jobrunner.services.delivery import DeliveryRecord
from jobrunner.services.results import WorkerReport
from jobrunner.wiring import container
from jobrunner_client.protocol import TRACEPARENT_HEADER, ResultMessage

if TYPE_CHECKING:
    from collections.abc import Iterator
    from datetime import datetime

    from jobrunner.services.results import ResultsService


#: Lateness values sent per scan (an EMF metric holds at most 100 values).
LATENESS_SAMPLES = 50
#: Time a reconciler invocation keeps, after its walk, to save its progress and flush its metrics.
RECONCILE_SAVE_MARGIN = timedelta(seconds=10)
#: Time a delivery invocation keeps, after its last call, to publish the outcomes and flush its metrics.
DELIVERY_PUBLISH_MARGIN = timedelta(seconds=10)


def run_tick(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` is an EventBridge scheduled event; its ``time`` names the minute, not the clock."""
    services = container()
    event_time: datetime = parse_instant(str(event["time"]), "time")
    report = services.ticks.tick(event_time, services.clock.now())
    metrics.add_metric(name="ScansDispatched", unit=MetricUnit.Count, value=len(report.dispatched))
    metrics.add_metric(name="WatermarkLagSeconds", unit=MetricUnit.Seconds, value=report.max_lag_s)
    # Partitions whose scans failed again and again, set aside and retried with backoff (alarmed on).
    metrics.add_metric(name="ParkedPartitions", unit=MetricUnit.Count, value=report.parked_total)
    metrics.add_metric(name="HeartbeatUnavailableSegments", unit=MetricUnit.Count, value=len(report.unavailable))
    result = {
        "target": report.target.isoformat(), "dispatched": len(report.dispatched),
        "segments": report.segment_count, "parked": report.parked_total, "unavailable": report.unavailable,
    }
    logger.info("tick", extra=result)
    return result


def run_scan(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` is ``{"segment": int, "minute": RFC 3339}`` from the tick."""
    services = container()
    request = ScanRequest(segment=int(event["segment"]), bucket=parse_instant(str(event["minute"]), "minute"))
    started = time.monotonic()
    report = services.scans.scan(request)
    metrics.add_metric(name="ExecutionsPublished", unit=MetricUnit.Count, value=report.published)
    if report.dead_lettered:  # rows that could not be published (the results function counts the same way)
        metrics.add_metric(name="DeadLetters", unit=MetricUnit.Count, value=report.dead_lettered)
    if report.behind_window:  # late rows found behind the windows read (clock skew beyond the bound)
        metrics.add_metric(name="LateRowsBehindWindow", unit=MetricUnit.Count, value=report.behind_window)
    metrics.add_metric(name="ScanDurationSeconds", unit=MetricUnit.Seconds, value=time.monotonic() - started)
    if report.lateness_ms:
        metrics.add_metric(name="MaxLatenessMs", unit=MetricUnit.Milliseconds, value=max(report.lateness_ms))
        # CloudWatch builds percentiles from the values of one metric: a sample of them is the histogram.
        for lateness in _sample(report.lateness_ms, LATENESS_SAMPLES):
            metrics.add_metric(name="LatenessMs", unit=MetricUnit.Milliseconds, value=lateness)
    with single_metric(name="ExecutionsPublishedBySegment", unit=MetricUnit.Count, value=report.published,
                       namespace=NAMESPACE) as segment_metric:
        segment_metric.add_dimension(name="segment", value=str(report.segment))
    result = {
        "segment": report.segment, "minute": report.bucket.isoformat(), "acquired": report.acquired,
        "finished": report.finished, "lost_lease": report.lost_lease, "published": report.published,
        "dropped": report.dropped, "errors": report.errors, "dead_lettered": report.dead_lettered,
        "replays_skipped": report.replays_skipped,
    }
    logger.info("scan", extra=result)
    return result


def run_reconcile(event: dict[str, Any], remaining_ms: int | None = None) -> dict[str, Any]:
    """``event`` is the reconciler rule's scheduled event (not read: the reconciler keeps its own progress);
    ``remaining_ms``: the invocation's time left, of which the walk leaves ``RECONCILE_SAVE_MARGIN`` to save it."""
    services = container()
    deadline = None
    if remaining_ms is not None:
        deadline = services.clock.now() + timedelta(milliseconds=remaining_ms) - RECONCILE_SAVE_MARGIN
    report = services.reconciler.run(deadline)
    # Each repair is a bug report: the total is alarmed on (> 0), and each reason is its own metric too.
    metrics.add_metric(name="Reconciled", unit=MetricUnit.Count, value=report.repaired_total)
    for reason in Reason:
        with single_metric(name="Reconciled", unit=MetricUnit.Count, value=report.repaired[reason.value],
                           namespace=NAMESPACE) as by_reason:
            by_reason.add_dimension(name="reason", value=reason.value)
    metrics.add_metric(name="ReconcileJobsWalked", unit=MetricUnit.Count, value=report.jobs_walked)
    metrics.add_metric(name="ReconcileHistoryReads", unit=MetricUnit.Count, value=report.history_reads)
    metrics.add_metric(name="ReconcileWatched", unit=MetricUnit.Count, value=report.watched)
    window = report.window
    result = {
        "window": [window[0].isoformat(), window[1].isoformat()] if window else None, "pass_done": report.pass_done,
        "jobs_walked": report.jobs_walked, "index_rows": report.index_rows, "history_reads": report.history_reads,
        "watched": report.watched, "repaired": dict(report.repaired), "settled_on_reading": report.settled_on_reading,
        "errors": report.errors,
    }
    logger.info("reconcile", extra=result)
    return result


def _sample(values: list[float], count: int) -> list[float]:
    """``count`` values spread evenly over the sorted ``values`` (all of them when there are fewer)."""
    if len(values) <= count:
        return values
    ordered = sorted(values)
    return [ordered[round(i * (len(ordered) - 1) / (count - 1))] for i in range(count)]


def parse_report(value: bytes) -> WorkerReport | None:
    """A ``job-results`` message (``jobrunner_client.protocol.ResultMessage``), or None when it is not one (counted and
    skipped, never retried)."""
    try:
        message = ResultMessage.model_validate_json(value)
    except ValidationError:
        return None
    success = message.status == "SUCCESS"
    return WorkerReport(
        execution_id=message.execution_id, job_id=message.job_id, success=success, error=message.error,
        scheduled_at=message.scheduled_at, attempt=message.attempt, traceparent=message.traceparent,
        result_token=message.result_token, cancelled=message.cancelled and not success,
        retryable=message.retryable or success,
        retry_after=timedelta(seconds=message.retry_after_s) if message.retry_after_s and not success else None,
    )


def run_results(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` is an MSK event-source batch: ``{"records": {"topic-partition": [{"value": base64}, ...]}}``.

    Store or broker failures raise, so the event source retries the batch; applying a result twice is
    harmless (a finished execution ignores further results).
    """
    results = container().results
    outcomes: Counter[str] = Counter()
    reports: list[WorkerReport] = []
    for value in _values(event):
        report = parse_report(value)
        if report is None:
            outcomes["ignored_malformed"] += 1
        else:
            reports.append(report)
    if telemetry.enabled():  # a span per result, each continuing its worker's trace
        outcomes.update(_apply(results, report) for report in reports)
    else:  # the whole batch in a few round trips
        outcomes.update(results.apply_many(reports))
    for outcome, count in outcomes.items():
        metrics.add_metric(name=f"Results_{outcome}", unit=MetricUnit.Count, value=count)
    if outcomes.get("retrying"):
        metrics.add_metric(name="Retries", unit=MetricUnit.Count, value=outcomes["retrying"])
    if outcomes.get("dead_lettered"):
        metrics.add_metric(name="DeadLetters", unit=MetricUnit.Count, value=outcomes["dead_lettered"])
    logger.info("results", extra=dict(outcomes))
    return dict(outcomes)


def run_delivery(event: dict[str, Any], remaining_ms: int | None = None) -> dict[str, Any]:
    """``event`` is an MSK event-source batch of ``job-deliveries`` records (``run_results``' shape);
    ``remaining_ms``: the invocation's time left, of which the calls leave ``DELIVERY_PUBLISH_MARGIN``.

    Each execution's target is called once and its outcome published to ``job-results``; a failure to read a
    tenant's secrets or to publish the outcomes raises, so the event source delivers the batch again (a receiver
    dedups on ``webhook-id``; the results function ignores a second result of an ended execution).
    """
    services = container()
    deadline = None
    if remaining_ms is not None:
        deadline = services.clock.now() + timedelta(milliseconds=remaining_ms) - DELIVERY_PUBLISH_MARGIN
    outcomes = services.delivery.deliver_batch(list(_delivery_records(event)), deadline)
    for outcome, count in outcomes.items():
        metrics.add_metric(name=f"Deliveries_{outcome}", unit=MetricUnit.Count, value=count)
    logger.info("deliveries", extra=dict(outcomes))
    return dict(outcomes)


def _values(event: dict[str, Any]) -> Iterator[bytes]:
    """The value of each record of an MSK batch, decoded by Powertools' ``KafkaEvent``; a record without one
    (a tombstone) as empty bytes, which no result parses from."""
    if not event.get("records"):
        return
    for record in KafkaEvent(event).records:
        yield record.decoded_value if record.get("value") else b""


def _delivery_records(event: dict[str, Any]) -> Iterator[DeliveryRecord]:
    """Each record of an MSK batch as the delivery reads it: its value (``_values``) and its ``traceparent`` header,
    the execution's trace context, if it has one."""
    if not event.get("records"):
        return
    for record in KafkaEvent(event).records:
        trace = record.decoded_headers.get(TRACEPARENT_HEADER) if record.get("headers") else None
        yield DeliveryRecord(record.decoded_value if record.get("value") else b"",
                             trace.decode("ascii", "replace") if trace else None)


def _apply(results: ResultsService, report: WorkerReport) -> str:
    """Apply one result, in a span that continues the worker's (when tracing is on)."""
    attributes = {"jobrunner.execution_id": report.execution_id, "jobrunner.job_id": report.job_id}
    with telemetry.span("apply result", parent=report.traceparent, kind="consumer", attributes=attributes) as span:
        outcome = results.apply(report)
        span.set_attribute("jobrunner.outcome", outcome)
        return outcome
