"""Results: apply each worker's report to its execution (``services.outcomes`` ends it).

A result arrives from a worker on ``job-results``. Its execution's record is read (by its whole key when the
report names its fire and attempt), its result token checked against that record (the tenant, execution and
attempt the store holds, never the report's claims: ``domain.receipts``), and the execution ended as
``Outcomes.conclude`` rules (success, retry with backoff, dead letter). Results for unknown, cancelled or
already finished executions are ignored and counted, never raised, so a bad message can never block the
stream. (A timeout ends its execution the same way, from the scan: ``Outcomes.expire``.)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobrunner.domain.receipts import token_fits, v1_token_fits
from jobrunner.services.outcomes import Ending

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime, timedelta

    from jobrunner.domain.jobs import ExecutionRecord
    from jobrunner.ports import HistoryStore, RecordKey
    from jobrunner.services.outcomes import Outcomes, ResultCounters

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
    #: A failure that would recur (a delivery's 404): dead-lettered at once rather than retried.
    retryable: bool = True
    #: The wait the failed call asked for before another attempt (a delivery's ``Retry-After``), if any.
    retry_after: timedelta | None = None


@dataclass(frozen=True)
class ResultRules:
    #: The key the scans sign result tokens with (``domain.receipts``).
    result_key: bytes = b""
    #: Also apply results without a token (only while messages published before tokens are in flight,
    #: during an upgrade); a token that is there must still fit.
    accept_unsigned: bool = False
    #: Also accept the first scheme's tokens (the execution id's alone), which older scans signed, while their
    #: messages may be out after an upgrade (``domain.receipts``; the settings turn it on unless told not to).
    accept_v1_tokens: bool = False


class ResultsService:
    def __init__(self, store: HistoryStore, outcomes: Outcomes, rules: ResultRules) -> None:
        #: Where the records of the reported executions are read.
        self._store = store
        #: Ends each execution (shared with the scan, which ends the timed-out ones) and counts the outcomes.
        self._outcomes = outcomes
        self._rules = rules

    @property
    def counters(self) -> ResultCounters:
        """Every outcome so far, by name (the timeouts' too, where the scan shares the ``Outcomes``)."""
        return self._outcomes.counters

    def apply(self, report: WorkerReport) -> str:
        """Apply one worker report (``apply_many`` of one)."""
        return self.apply_many([report])[0]

    def apply_many(self, reports: Sequence[WorkerReport]) -> list[str]:
        """Apply worker reports in few round trips (their records read together, then their jobs, then the
        outcomes written together, the retries first); returns what happened to each, in order (also counted
        in ``counters``). Reports of one execution are applied one after the other, as if they had come in
        batches of their own: the first ends the execution, the next finds it ended. A report whose result
        token is missing, or does not fit the record the store holds for its execution, changes nothing:
        ``refused_token``. A report whose execution is unknown changes nothing either (``ignored_unknown``): its
        token, if any, cannot be checked and is never needed."""
        outcomes: list[str] = [""] * len(reports)
        pending: list[int] = []
        for index, report in enumerate(reports):
            if report.result_token is None and not self._rules.accept_unsigned:
                outcomes[index] = self._refuse(report)
            else:
                pending.append(index)
        while pending:  # waves of reports of distinct executions
            wave: list[int] = []
            later: list[int] = []
            seen: set[tuple[str, str]] = set()
            for index in pending:
                key = (reports[index].job_id, reports[index].execution_id)
                (later if key in seen else wave).append(index)
                seen.add(key)
            records = self._records([reports[index] for index in wave])
            # verify, then commit: only a report whose token fits its stored record goes on to end it
            fitting: list[tuple[int, ExecutionRecord | None]] = []
            for index, record in zip(wave, records, strict=True):
                if record is None or self._fits(reports[index], record):
                    fitting.append((index, record))
                else:
                    outcomes[index] = self._refuse(reports[index])
            concluded = self._outcomes.conclude([
                Ending(record, r.success, r.error, r.cancelled, r.retryable, r.retry_after)
                for index, record in fitting for r in (reports[index],)])
            for (index, record), outcome in zip(fitting, concluded, strict=True):
                outcomes[index] = self._outcomes.count(outcome, record)
            pending = later
        return outcomes

    def _fits(self, report: WorkerReport, record: ExecutionRecord) -> bool:
        """Whether ``report`` carries the token of the execution ``record`` is: the tenant, execution and attempt
        the store holds (an unsigned report, while those are accepted, fits any)."""
        token, key = report.result_token, self._rules.result_key
        if token is None:
            return self._rules.accept_unsigned
        if token_fits(key, token, tenant=record.user_id, execution_id=record.execution_id, attempt=record.attempt):
            return True
        if self._rules.accept_v1_tokens and v1_token_fits(key, token, execution_id=record.execution_id):
            # an execution published before the upgrade: once these stop, v1 tokens may be refused
            log.info("result token of the first scheme accepted", extra={"job_id": record.job_id,
                                                                        "execution_id": record.execution_id})
            return True
        return False

    def _refuse(self, report: WorkerReport) -> str:
        """Count (and log) a report refused for its token."""
        log.warning("result refused: its result token is %s", "missing" if report.result_token is None else
                    "wrong", extra={"job_id": report.job_id, "execution_id": report.execution_id})
        return self._outcomes.count("refused_token")

    def _records(self, reports: Sequence[WorkerReport]) -> list[ExecutionRecord | None]:
        """Each report's execution record: by its whole key when the report names its fire and attempt (one
        read for them all), else (no hint, or a wrong one) by its execution id among the job's records."""
        keys: list[RecordKey | None] = [
            (r.job_id, r.scheduled_at, r.attempt, r.execution_id) if r.scheduled_at is not None and r.attempt
            is not None else None for r in reports]
        wanted = [key for key in keys if key is not None]
        found = self._store.get_records(wanted) if wanted else {}
        records: list[ExecutionRecord | None] = []
        for report, key in zip(reports, keys, strict=True):
            record = found.get(key) if key is not None else None
            records.append(record if record is not None else self._store.record_by_execution_id(report.job_id,
                                                                                      report.execution_id))
        return records
