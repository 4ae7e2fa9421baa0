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
from jobrunner.domain.placement import placed_anew, placed_in_time
from jobrunner.domain.receipts import token_fits
from jobrunner.domain.retry import retry_delay, should_retry
from jobrunner.domain.time import rfc3339
from jobrunner.ports import OutboundMessage, Outcome
from jobrunner.services.jobs import plan_execution
from jobrunner.services.wake import wake

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from jobrunner.ports import Clock, JobStore, Publisher
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
        """Apply one worker report; returns what happened (also counted in ``counters``). A report whose
        result token is missing or does not fit its execution changes nothing: ``refused_token``."""
        unsigned = report.result_token is None and self._rules.accept_unsigned
        if not unsigned and not token_fits(self._rules.result_key, report.execution_id, report.result_token):
            log.warning("result refused: its result token is %s", "missing" if report.result_token is None else
                        "wrong", extra={"job_id": report.job_id, "execution_id": report.execution_id})
            return self._count("refused_token")
        record = None
        if report.scheduled_at is not None and report.attempt is not None:
            record = self._store.record(report.job_id, report.scheduled_at, report.attempt, report.execution_id)
        if record is None:  # no hint, or a wrong one
            record = self._store.find_record(report.job_id, report.execution_id)
        return self._count(self._conclude(record, report.success, report.error, report.cancelled), record)

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
        return self._count("timed_out_" + self._conclude(record, False, f"no result within {timeout}"), record)

    def _count(self, outcome: str, record: ExecutionRecord | None = None) -> str:
        self.counters.outcomes[outcome] += 1
        if record is not None:
            log.info("result %s", outcome, extra={"job_id": record.job_id, "execution_id": record.execution_id,
                                                   "attempt": record.attempt})
        return outcome

    def _conclude(self, record: ExecutionRecord | None, success: bool, error: str | None,
                  cancelled: bool = False) -> str:
        if record is None:
            return "ignored_unknown"
        if record.status in (ExecutionStatus.SUCCESS, ExecutionStatus.FAILED):
            return "ignored_finished"
        job = self._store.get(record.user_id, record.job_id)
        if job is None or job.state is JobState.CANCELLED:
            return "ignored_cancelled"
        now = self._clock.now()
        status = ExecutionStatus.SUCCESS if success else ExecutionStatus.FAILED
        finished = replace(record, status=status, finished_at=now, error=None if success else (error or "failed"))
        if success or cancelled:  # a cancelled execution was replaced by a newer fire: no retry, no dead letter
            self._store.finish(Outcome(finished, None))
            self._ended(job)
            return "succeeded" if success else "cancelled"
        if should_retry(job.retry, record.attempt):
            due = now + retry_delay(job.retry, record.attempt, self._jitter())
            retry = plan_execution(job, due, now, self._rules.segment_count, trigger=Trigger.RETRY,
                                   attempt=record.attempt + 1, scheduled_at=record.scheduled_at,
                                   origin=origin_of(record))
            self._store.finish(Outcome(replace(finished, retry_at=retry.due_at), retry))
            self._keep_in_time(retry, now)
            return "retrying"
        # Dead-letter first: if the write after it fails, the result is retried and the dead letter
        # may be sent twice (same execution_id), but never lost.
        self._publisher.publish([dead_letter(job, finished, self._rules.dead_letter_topic)])
        self._store.finish(Outcome(finished, None))
        self._ended(job)
        return "dead_lettered"


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
