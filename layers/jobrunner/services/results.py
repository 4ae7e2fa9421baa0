"""Results: move each execution to SUCCESS or FAILED, retry failures with backoff, dead-letter the rest.

A result arrives from a worker on ``job-results``; a timeout is noticed by the scan when the
watchdog row planned at publish time comes due and the execution has still not reported. Both end
in ``conclude``. Results for unknown, cancelled or already finished executions are ignored and
counted, never raised, so a bad message can never block the stream.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from jobrunner.domain.jobs import (
    ExecutionRecord,
    ExecutionStatus,
    Job,
    JobState,
    ScheduledExecution,
    Trigger,
    origin_of,
    watched_execution_ids,
)
from jobrunner.domain.placement import placed_anew, placed_in_time, plan_execution
from jobrunner.domain.receipts import token_fits
from jobrunner.domain.retry import retry_delay, should_retry
from jobrunner.domain.time import rfc3339
from jobrunner.ports import OutboundMessage, Outcome
from jobrunner.services.wake import wake

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from datetime import datetime

    from jobrunner.ports import Clock, JobStore, Publisher, RecordKey
    from jobrunner.services.retire import Retirer
    from jobrunner.services.wake import ScanWaker


log = logging.getLogger(__name__)

@dataclass(frozen=True)
class WorkerReport:
    """A message on ``job-results``. ``scheduled_at`` and ``attempt`` are optional (our worker helper
    sends them; they make the lookup a point read)."""

    execution_id: str
    job_id: str
    success: bool
    error: str | None = None
    scheduled_at: datetime | None = None
    attempt: int | None = None
    #: The worker's span (W3C traceparent), when it sends one: the parent of applying the result.
    traceparent: str | None = None
    #: The execution message's ``result_token``, sent back: proof that the sender holds that message.
    result_token: str | None = None
    #: The worker stopped it on a cancel message (overlap policy ``cancel_other``): failed, never retried.
    cancelled: bool = False


@dataclass(frozen=True)
class ResultRules:
    segment_count: int
    dead_letter_topic: str = "job-dlq"
    #: The key the scans sign result tokens with (``domain.receipts``).
    result_key: bytes = b""
    #: Also apply results without a token (only while messages published before tokens are in flight,
    #: during an upgrade); a token that is there must still fit.
    accept_unsigned: bool = False


@dataclass
class ResultCounters:
    outcomes: Counter[str] = field(default_factory=Counter)


class ResultsService:
    def __init__(
        self, store: JobStore, publisher: Publisher, clock: Clock, rules: ResultRules,
        jitter: Callable[[], float] = random.random, waker: ScanWaker | None = None,
        retirer: Retirer | None = None,
    ) -> None:
        #: Deletes a job that asked for it once its last execution ends (``services.retire``).
        self._retirer = retirer
        #: Wakes the scan of a partition a retry is written to (``services.wake``).
        self._waker = waker
        self._store = store
        self._publisher = publisher
        self._clock = clock
        self._rules = rules
        self._jitter = jitter
        self.counters = ResultCounters()

    def apply(self, report: WorkerReport) -> str:
        """Apply one worker report (``apply_many`` of one)."""
        return self.apply_many([report])[0]

    def apply_many(self, reports: Sequence[WorkerReport]) -> list[str]:
        """Apply worker reports in few round trips (their records read together, then their jobs, then the
        outcomes written together, the retries first); returns what happened to each, in order (also counted
        in ``counters``). Reports of one execution are applied one after the other, as if they had come in
        batches of their own: the first ends the execution, the next finds it ended. A report whose result
        token is missing or does not fit its execution changes nothing: ``refused_token``."""
        outcomes: list[str] = [""] * len(reports)
        pending: list[int] = []
        for index, report in enumerate(reports):
            unsigned = report.result_token is None and self._rules.accept_unsigned
            if unsigned or token_fits(self._rules.result_key, report.execution_id, report.result_token):
                pending.append(index)
                continue
            log.warning("result refused: its result token is %s", "missing" if report.result_token is None else
                        "wrong", extra={"job_id": report.job_id, "execution_id": report.execution_id})
            outcomes[index] = self._count("refused_token")
        while pending:  # waves of reports of distinct executions
            wave: list[int] = []
            later: list[int] = []
            seen: set[tuple[str, str]] = set()
            for index in pending:
                key = (reports[index].job_id, reports[index].execution_id)
                (later if key in seen else wave).append(index)
                seen.add(key)
            records = self._records([reports[index] for index in wave])
            concluded = self._conclude([(record, reports[index].success, reports[index].error, reports[index].cancelled)
                                        for index, record in zip(wave, records, strict=True)])
            for index, record, outcome in zip(wave, records, concluded, strict=True):
                outcomes[index] = self._count(outcome, record)
            pending = later
        return outcomes

    def _records(self, reports: Sequence[WorkerReport]) -> list[ExecutionRecord | None]:
        """Each report's execution record: by its whole key when the report names its fire and attempt (one
        read for them all), else (no hint, or a wrong one) by its execution id among the job's records."""
        keys: list[RecordKey | None] = [
            (r.job_id, r.scheduled_at, r.attempt, r.execution_id) if r.scheduled_at is not None and r.attempt
            is not None else None for r in reports]
        wanted = [key for key in keys if key is not None]
        found = self._store.records_by_key(wanted) if wanted else {}
        records: list[ExecutionRecord | None] = []
        for report, key in zip(reports, keys, strict=True):
            record = found.get(key) if key is not None else None
            records.append(record if record is not None else self._store.find_record(report.job_id,
                                                                                      report.execution_id))
        return records

    def expire(self, watchdog: ScheduledExecution) -> str:
        """The watchdog of an execution came due: fail the execution if it has not reported. The watched
        execution is named by the watchdog's own id (``domain.jobs.watched_execution_ids``)."""
        record = None
        for execution_id in watched_execution_ids(watchdog):
            record = self._store.record(watchdog.job_id, watchdog.scheduled_at, watchdog.attempt, execution_id)
            if record is not None:
                break
        if record is None or record.status is not ExecutionStatus.RUNNING:
            return self._count("watchdog_cleared")
        job = self._store.get(record.user_id, record.job_id)
        timeout = f"{job.timeout_s} s" if job and job.timeout_s else "its timeout"
        [outcome] = self._conclude([(record, False, f"no result within {timeout}", False)])
        return self._count("timed_out_" + outcome, record)

    def _count(self, outcome: str, record: ExecutionRecord | None = None) -> str:
        self.counters.outcomes[outcome] += 1
        if record is not None:
            log.info("result %s", outcome, extra={"job_id": record.job_id, "execution_id": record.execution_id,
                                                   "attempt": record.attempt})
        return outcome

    def _conclude(self, results: Sequence[tuple[ExecutionRecord | None, bool, str | None, bool]]) -> list[str]:
        """End each (record, success, error, cancelled): the jobs of those still running read together, then
        dead letters sent, then every outcome written (retries first), then the retries kept in time. A
        cancelled execution (replaced by a newer fire, ``Overlap.CANCEL_OTHER``) ends FAILED with no retry and
        no dead letter."""
        outcomes = ["ignored_unknown" if record is None else "ignored_finished" for record, *_ in results]
        running = [n for n, (record, *_) in enumerate(results)
                   if record is not None and record.status not in (ExecutionStatus.SUCCESS, ExecutionStatus.FAILED)]
        if not running:
            return outcomes
        jobs = self._store.get_many(sorted({(r.user_id, r.job_id) for n in running if (r := results[n][0])}))
        now = self._clock.now()
        written: list[Outcome] = []
        dead: list[OutboundMessage] = []
        retries: list[ScheduledExecution] = []
        ended: list[Job] = []
        for n in running:
            record, success, error, cancelled = results[n]
            assert record is not None
            job = jobs.get((record.user_id, record.job_id))
            if job is None or job.state is JobState.CANCELLED:
                outcomes[n] = "ignored_cancelled"
                continue
            status = ExecutionStatus.SUCCESS if success else ExecutionStatus.FAILED
            finished = replace(record, status=status, finished_at=now, error=None if success else (error or "failed"))
            if success or cancelled:
                written.append(Outcome(finished, None))
                ended.append(job)
                outcomes[n] = "succeeded" if success else "cancelled"
            elif should_retry(job.retry, record.attempt):
                due = now + retry_delay(job.retry, record.attempt, self._jitter())
                retry = plan_execution(job, due, now, self._rules.segment_count, trigger=Trigger.RETRY,
                                       attempt=record.attempt + 1, scheduled_at=record.scheduled_at,
                                       origin=origin_of(record))
                written.append(Outcome(replace(finished, retry_at=retry.due_at), retry))
                retries.append(retry)
                outcomes[n] = "retrying"
            else:
                dead.append(dead_letter(job, finished, self._rules.dead_letter_topic))
                written.append(Outcome(finished, None))
                ended.append(job)
                outcomes[n] = "dead_lettered"
        # Dead letters first: if the writes after them fail, the results are retried and a dead letter may be
        # sent twice (same execution_id), but never lost.
        if dead:
            self._publisher.publish(dead)
        if written:
            self._store.finish(written)
        for retry in retries:
            self._keep_in_time(retry, now)
        for job in ended:
            self._ended(job)
        return outcomes

    def _ended(self, job: Job) -> None:
        """An execution of ``job`` ended for good: a job that asked to be deleted after its last fire may be done."""
        if self._retirer is not None:
            self._retirer.consider(job)

    def _keep_in_time(self, row: ScheduledExecution, placed_at: datetime) -> None:
        """A retry row whose write returned too late for its scan to be sure to see it (``domain.placement``)
        is placed and written again from now; the copy left behind is never read, or is a same-id duplicate."""
        wake(self._waker, [row])
        while not placed_in_time([row], placed_at, self._clock.now()):
            placed_at = self._clock.now()
            row = placed_anew(row, placed_at)
            self._store.schedule([row])
            wake(self._waker, [row])


def dead_letter(job: Job, record: ExecutionRecord, topic: str) -> OutboundMessage:
    value: dict[str, Any] = {
        "execution_id": record.execution_id, "job_id": job.job_id, "user_id": job.user_id,
        "scheduled_at": rfc3339(record.scheduled_at), "attempt": record.attempt, "payload": job.payload,
        "error": record.error,
    }
    headers = {"execution_id": record.execution_id, "scheduled_at": value["scheduled_at"],
               "attempt": str(record.attempt)}
    return OutboundMessage(topic=topic, key=job.job_id, value=value, headers=headers)
