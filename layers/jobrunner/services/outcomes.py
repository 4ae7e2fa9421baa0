"""How an execution ends: the one rule the results function and the scan share.

An execution ends by a worker's result (``services.results``) or by its timeout, when the watchdog row
planned at publish time comes due and the execution has still not reported (``services.scan``). Both end
in ``Outcomes.conclude``: a success, a failure retried with backoff, a failure dead-lettered once no retry
is left, or (overlap policy ``cancel_other``) a cancelled execution; then a job that asked to be deleted
after its last fire may be (``services.retire``). Executions that are unknown, cancelled or already ended
are ignored and counted, never raised, so a bad message can never block the stream.

A scan asks only for timeouts (``Expiry``); ``NoExpiry`` stands where a scan is built to end none.
"""

from __future__ import annotations

import logging
import random
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

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
from jobrunner.domain.messages import dead_letter_message
from jobrunner.domain.placement import placed_anew, placed_in_time, plan_execution
from jobrunner.domain.retry import next_attempt_delay, should_retry
from jobrunner.ports import HistoryStore, JobStore, OutboundMessage, Outcome, ScheduledRowStore

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from datetime import datetime, timedelta

    from jobrunner.ports import Clock, Publisher
    from jobrunner.services.retire import Retirement
    from jobrunner.services.wake import Waker

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Ending:
    """What ends one execution: a result or a timeout."""

    #: The execution's record, or None when unknown.
    record: ExecutionRecord | None
    success: bool
    error: str | None = None
    #: Replaced by a newer fire (overlap policy ``cancel_other``): failed, neither retried nor dead-lettered.
    cancelled: bool = False
    #: A failure that would recur (a delivery's 404): dead-lettered at once, whatever retries are left.
    retryable: bool = True
    #: The least wait before a retry the failed call asked for (``Retry-After``): it lengthens the job's backoff,
    #: within its ``max_delay_s`` (``domain.retry.next_attempt_delay``).
    retry_after: timedelta | None = None


class OutcomeStores(JobStore, ScheduledRowStore, HistoryStore, Protocol):
    """The store ports an ending uses: the jobs (read), the history (the record read, the outcome written) and
    the scheduled rows (a retry placed anew)."""


@dataclass(frozen=True)
class OutcomeRules:
    segment_count: int
    dead_letter_topic: str = "job-dlq"


@dataclass
class ResultCounters:
    outcomes: Counter[str] = field(default_factory=Counter)


class Expiry(ABC):
    """What a scan asks when the watchdog row of an execution comes due.

    Contract: ``expire(watchdog)`` fails the watched execution if it has not reported yet (then retried, dead
    lettered or cancelled as a failed result would be), and returns the name of its outcome.
    """

    @abstractmethod
    def expire(self, watchdog: ScheduledExecution) -> str: ...


class NoExpiry(Expiry):
    """No execution is ended by its timeout: a watchdog row is only settled, and the execution stays as it is."""

    def expire(self, watchdog: ScheduledExecution) -> str:
        return "watchdog_ignored"


class Outcomes(Expiry):
    def __init__(
        self, store: OutcomeStores, publisher: Publisher, clock: Clock, rules: OutcomeRules,
        jitter: Callable[[], float] = random.random, *, waker: Waker, retirer: Retirement,
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
        #: Every outcome, by name: those of the results applied and of the timeouts alike.
        self.counters = ResultCounters()

    def count(self, outcome: str, record: ExecutionRecord | None = None) -> str:
        """Count ``outcome`` (and log it against its execution, if known); returns it."""
        self.counters.outcomes[outcome] += 1
        if record is not None:
            log.info("result %s", outcome, extra={"job_id": record.job_id, "execution_id": record.execution_id,
                                                   "attempt": record.attempt})
        return outcome

    def expire(self, watchdog: ScheduledExecution) -> str:
        """The watchdog of an execution came due: fail the execution if it has not reported. The watched
        execution is named by the watchdog's own id (``domain.jobs.watched_execution_ids``)."""
        record = None
        for execution_id in watched_execution_ids(watchdog):
            record = self._store.get_record(watchdog.job_id, watchdog.scheduled_at, watchdog.attempt, execution_id)
            if record is not None:
                break
        if record is None or record.status is not ExecutionStatus.RUNNING:
            return self.count("watchdog_cleared")
        job = self._store.get_job(record.user_id, record.job_id)
        timeout = f"{job.spec.timeout_s} s" if job and job.spec.timeout_s else "its timeout"
        [outcome] = self.conclude([Ending(record, False, f"no result within {timeout}")])
        return self.count("timed_out_" + outcome, record)

    def conclude(self, results: Sequence[Ending]) -> list[str]:
        """End each (record, success, error, cancelled): the jobs of those still running read together, then
        dead letters sent, then the retries' rows written where their scans will read them, and only then every
        record (verify, then commit: a record that says FAILED is final, so its retry must be in place first).
        A cancelled execution (replaced by a newer fire, ``Overlap.CANCEL_OTHER``) ends FAILED with no retry and
        no dead letter. A result for an execution that already failed with a retry planned re-asserts that
        retry's row if the retry has not started (a redelivery after a write that failed half-way). Returns what
        happened to each, in order (not counted: the caller names it)."""
        outcomes = ["ignored_unknown" if ending.record is None else "ignored_finished" for ending in results]
        ended_before = [ending.record for ending in results if ending.record is not None
                        and ending.record.retry_at is not None and ending.record.status is ExecutionStatus.FAILED]
        running = [n for n, ending in enumerate(results) if ending.record is not None
                   and ending.record.status not in (ExecutionStatus.SUCCESS, ExecutionStatus.FAILED)]
        keys = {(r.user_id, r.job_id) for r in ended_before} | {
            (r.user_id, r.job_id) for n in running if (r := results[n].record) is not None}
        if not keys:
            return outcomes
        jobs = self._store.get_jobs(sorted(keys))
        now = self._clock.now()
        self._reassert_retries(ended_before, jobs, now)
        ending: list[tuple[ExecutionRecord, ScheduledExecution | None]] = []
        dead: list[OutboundMessage] = []
        ended: list[Job] = []
        for n in running:
            record, success, error = results[n].record, results[n].success, results[n].error
            assert record is not None
            job = jobs.get((record.user_id, record.job_id))
            if job is None or job.state is JobState.CANCELLED:
                outcomes[n] = "ignored_cancelled"
                continue
            status = ExecutionStatus.SUCCESS if success else ExecutionStatus.FAILED
            finished = replace(record, status=status, finished_at=now, error=None if success else (error or "failed"))
            if success or results[n].cancelled:
                ending.append((finished, None))
                ended.append(job)
                outcomes[n] = "succeeded" if success else "cancelled"
            elif results[n].retryable and should_retry(job.spec.retry, record.attempt):
                delay = next_attempt_delay(job.spec.retry, record.attempt, self._jitter(), results[n].retry_after)
                ending.append((finished, self._retry_of(job, record, now + delay, now)))
                outcomes[n] = "retrying"
            else:
                dead.append(dead_letter(job, finished, self._rules.dead_letter_topic))
                ending.append((finished, None))
                ended.append(job)
                outcomes[n] = "dead_lettered"
        # Dead letters first: if the writes after them fail, the results are retried and a dead letter may be
        # sent twice (same execution_id), but never lost.
        if dead:
            self._publisher.publish(dead)
        placed = self._write_in_time([row for _, row in ending if row is not None], now)
        written = [Outcome(record if row is None else replace(record, retry_at=placed[row.execution_id].due_at), None)
                   for record, row in ending]
        if written:
            self._store.write_outcomes(written)
        for job in ended:
            self._ended(job)
        return outcomes

    def _retry_of(self, job: Job, record: ExecutionRecord, due: datetime, now: datetime) -> ScheduledExecution:
        """The row of the retry of the execution ``record`` names, due at ``due``, placed as seen at ``now``."""
        return plan_execution(job, due, now, self._rules.segment_count, trigger=Trigger.RETRY,
                              attempt=record.attempt + 1, scheduled_at=record.scheduled_at, origin=origin_of(record))

    def _reassert_retries(self, failed: Sequence[ExecutionRecord], jobs: dict[tuple[str, str], Job],
                          now: datetime) -> None:
        """Every idempotent path re-asserts its row: a result delivered again for an execution that failed with a
        retry planned writes that retry's row again, placed as of now, unless the retry has started (its record
        exists) or its job is cancelled. A repair where the first delivery's row never landed in time."""
        rows = []
        for record in failed:
            job = jobs.get((record.user_id, record.job_id))
            if job is None or job.state is JobState.CANCELLED or record.retry_at is None:
                continue
            retry = self._retry_of(job, record, max(record.retry_at, now), now)
            if self._store.get_record(retry.job_id, retry.scheduled_at, retry.attempt, retry.execution_id) is None:
                log.info("retry re-asserted", extra={"job_id": job.job_id, "execution_id": retry.execution_id})
                rows.append(retry)
        self._write_in_time(rows, now)

    def _write_in_time(self, rows: list[ScheduledExecution], placed_at: datetime) -> dict[str, ScheduledExecution]:
        """Write ``rows`` (placed at ``placed_at``); those whose write returned too late for their scans to be sure
        to see them (``domain.placement``) are placed and written again from now, until every one is in time. The
        rows as finally placed, by execution id (a copy left behind is never read, or is a same-id duplicate)."""
        final = {row.execution_id: row for row in rows}
        while rows:
            self._store.write_scheduled(rows)
            self._waker.wake(rows)
            returned_at = self._clock.now()
            late = [row for row in rows if not placed_in_time([row], placed_at, returned_at)]
            placed_at = self._clock.now()
            rows = [placed_anew(row, placed_at) for row in late]
            final.update((row.execution_id, row) for row in rows)
        return final

    def _ended(self, job: Job) -> None:
        """An execution of ``job`` ended for good: a job that asked to be deleted after its last fire may be done."""
        self._retirer.consider(job)


def dead_letter(job: Job, record: ExecutionRecord, topic: str) -> OutboundMessage:
    """The dead letter of ``record``'s execution (``domain.messages.dead_letter_message``) for ``topic``."""
    key, value, headers = dead_letter_message(job, record)
    return OutboundMessage(topic=topic, key=key, value=value, headers=headers)
