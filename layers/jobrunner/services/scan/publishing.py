"""Publishing a group of due rows (``Publishing``): triage (stale, waiting for their job, replays already ended),
the fire gate, the write-ahead record, the send, the dead letter of a row that cannot go out, and the watchdogs."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Literal

from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import ExecutionStatus, Lane, Trigger
from jobrunner.domain.messages import destination, execution_message
from jobrunner.domain.publication import ENDED, planned_ahead, publishable, row_identity, started_record
from jobrunner.domain.receipts import result_token
from jobrunner.ports import OutboundMessage, Outcome, PublishError
from jobrunner.services.outcomes import dead_letter

if TYPE_CHECKING:
    from datetime import datetime

    from jobrunner.domain.jobs import Job, ScheduledExecution
    from jobrunner.ports import Clock, Publisher
    from jobrunner.services.outcomes import Expiry
    from jobrunner.services.scan.completions import Completer
    from jobrunner.services.scan.fire_gate import FireGate
    from jobrunner.services.scan.rules import ScanRules, ScanStores
    from jobrunner.services.scan.state import Partition

log = logging.getLogger(__name__)


class Publishing:
    """Publishes the groups of due rows a scan takes; a row that cannot go out now waits (``retry_later``)."""

    def __init__(
        self, store: ScanStores, publisher: Publisher, clock: Clock, rules: ScanRules, gate: FireGate,
        completer: Completer, *, outcomes: Expiry,
    ) -> None:
        self._store = store
        self._publisher = publisher
        self._clock = clock
        self._rules = rules
        self._gate = gate
        self._completer = completer
        #: Ends a timed-out execution when its watchdog row comes due (``NoExpiry``: watchdog rows are only settled).
        self._outcomes = outcomes

    def publish(self, part: Partition, rows: list[ScheduledExecution], now: datetime) -> None:
        """Publish due rows; their completions are written, or left pending for the next attempt."""
        part.retry_at = now + self._rules.retry_backoff
        watchdogs = [r for r in rows if r.trigger is Trigger.TIMEOUT]
        if watchdogs:
            self._expire(part, watchdogs)
            rows = [r for r in rows if r.trigger is not Trigger.TIMEOUT]
            if not rows:
                return
        try:
            jobs = self._store.get_jobs(sorted({(r.user_id, r.job_id) for r in rows}))
        except Unavailable as exc:
            part.retry_later(rows, "job reads failed", exc)
            return
        live, stale = self._triage(part, rows, jobs, now)
        if stale:
            self._drop_stale(part, stale)
        if live:
            live = self._gate.admit(part, live)
        if live:
            self._publish_live(part, live)
        self._completer.complete(part)

    def _triage(
        self, part: Partition, rows: list[ScheduledExecution], jobs: dict[tuple[str, str], Job], now: datetime,
    ) -> tuple[list[tuple[ScheduledExecution, Job]], list[ScheduledExecution]]:
        """Sort due rows (their jobs read) into those to publish, with their jobs, and the stale ones; a row
        whose job or version has not landed yet waits (then is settled by reading), a replay whose result is in
        is only completed, and a row whose topic or target is no longer allowed is dead-lettered."""
        live: list[tuple[ScheduledExecution, Job]] = []
        stale: list[ScheduledExecution] = []
        for row in rows:
            job = jobs.get((row.user_id, row.job_id))
            if job is None or planned_ahead(row, job):
                landed = self._landed_by_now(part, row, now)
                if landed is None:
                    continue  # it waits (or waits for the store again)
                if landed is False:
                    stale.append(row)
                    continue
                job = landed
            published_as = part.published_ids.get(row.execution_id)
            if not publishable(row, job) or published_as == row.job_version:
                stale.append(row)
            elif published_as is not None:
                # Published by this scan under another version: a change that landed late planned the same fire
                # again (#31, found by the model). The execution went out; its completion plans the fires after
                # it under the row's version (dropping it as a copy left the job with no next fire).
                part.completions.add(row, job, ended=True)
            elif (part.replaying or row.trigger is Trigger.BACKFILL) and self._already_ended(row):
                # a replay, or a backfill's row written again by a repeated request that read no record yet and
                # landed late (#31): the result is in, only the completion is left
                part.report.replays_skipped += 1
                part.completions.add(row, job, ended=True)
            elif (refused := self._no_longer_allowed(job)) is not None:
                self._dead_letter(part, row, job, refused)
            else:
                live.append((row, job))
        return live, stale

    def _no_longer_allowed(self, job: Job) -> str | None:
        """Why ``job``'s executions may no longer go where they go (its target, or its topic for its tenant), or
        None: the deployment's rules changed since the job was submitted."""
        target = job.spec.target
        if target is not None:
            refusal = self._rules.targets.refusal(target) if self._rules.targets is not None else None
            return f"target no longer allowed: {refusal}" if refusal is not None else None
        if self._rules.topics is not None and not self._rules.topics.permits(job.user_id, job.spec.topic or ""):
            return f"topic {job.spec.topic or ''!r} is no longer allowed for its tenant"
        return None

    def _landed_by_now(self, part: Partition, row: ScheduledExecution, now: datetime) -> Job | Literal[False] | None:
        """A row planned by a change whose compare-and-set on the job has not shown yet (a change writes its rows
        first), or the first run of a job whose own write has not shown yet (a create writes the first run
        first: ``JobStore.create_job``). It waits ``change_grace`` for them (None: it waits); then the doubt is
        settled by reading (``JobStore.get_job_settled``: a compare-and-set that timed out has landed by then, or
        never will): the job as it now stands if the row's version has landed, False if it never will (the
        row is stale), None while it waits, and if the read failed (it waits for the store, as any row does)."""
        identity = row_identity(row)
        first_seen = part.ahead.setdefault(identity, now)
        if now - first_seen < self._rules.change_grace:
            part.postpone([row])
            return None
        try:
            settled = self._store.get_job_settled(row.user_id, row.job_id)
        except Unavailable as exc:
            part.retry_later([row], "settling read failed", exc, {"job_id": row.job_id})
            return None
        part.ahead.pop(identity, None)
        return False if settled is None or planned_ahead(row, settled) else settled

    def _already_ended(self, row: ScheduledExecution) -> bool:
        """A replay (or a backfill's row: one point read, backfills are rare) whose result is already in, as the
        execution's own history record says; a record that cannot be read counts as not ended (publish again)."""
        try:
            record = self._store.get_record(row.job_id, row.scheduled_at, row.attempt, row.execution_id)
        except Unavailable:
            return False
        return record is not None and record.status in ENDED

    def _drop_stale(self, part: Partition, stale: list[ScheduledExecution]) -> None:
        """Drop rows no job wants any more. A stale PLANNED row is left to expire with the rest of its lane; a
        LATE one is removed so that the late lane's polls stop returning it."""
        try:
            self._store.delete_scheduled([r for r in stale if r.lane is Lane.LATE])
        except Unavailable:
            part.report.errors += 1  # harmless: the row is never published, and a later scan drops it again
        part.report.dropped += len(stale)
        part.due.settle(stale)

    def _publish_live(self, part: Partition, live: list[tuple[ScheduledExecution, Job]]) -> None:
        """Record the rows as RUNNING, then publish them: together, except rows the broker refused in a
        shared publish, which go one per publish until it is known whether the refusal is theirs."""
        published_at = self._clock.now()
        try:
            self._store.write_started([started_record(row, job, published_at) for row, job in live])
        except Unavailable as exc:
            part.retry_later([row for row, _ in live], "history writes failed", exc)
            return
        together = [item for item in live if not part.failures.suspected(item[0])]
        alone = [[item] for item in live if part.failures.suspected(item[0])]
        for group in ([together] if together else []) + alone:
            self._send(part, group)

    def _send(self, part: Partition, group: list[tuple[ScheduledExecution, Job]]) -> None:
        """Publish one group (renewing the lease first if it might not outlast the publish); a row that fails
        is tried again after a backoff that grows with its failures, or dead-lettered once refused enough."""
        if not part.lease.covers_publish():
            part.postpone(row for row, _ in group)
            return
        messages = []
        for row, job in group:
            # signed as the record written before it names the execution (``started_record``): what results checks
            token = result_token(self._rules.result_key, tenant=row.user_id, execution_id=row.execution_id,
                                 attempt=row.attempt)
            key, value, headers = execution_message(job, row, token)
            messages.append(OutboundMessage(topic=destination(job, self._rules.delivery_topic), key=key, value=value,
                                            headers=headers,
                                            parent_trace=job.trace_parent))
        failed: dict[int, str] = {}
        refused: set[int] = set()
        try:
            self._publisher.publish(messages, timeout_s=self._rules.publish_timeout.total_seconds())
        except PublishError as exc:
            log.warning("publish failed for %d of %d, retrying: %s", len(exc.failed), len(messages), exc)
            part.report.errors += 1
            failed = dict.fromkeys(exc.failed, str(exc))
            refused = set(exc.rejected)
        acked_at = self._clock.now()
        for index, (row, job) in enumerate(group):
            if index in failed:
                self._failed(part, row, job, failed[index], refused=index in refused, shared=len(group) > 1)
            else:
                self._published(part, row, job, acked_at)

    def _failed(self, part: Partition, row: ScheduledExecution, job: Job, error: str, *, refused: bool,
                shared: bool) -> None:
        """A row whose publish failed: dead-lettered once the broker refused it enough, else tried again later."""
        failures = part.failures
        tries, refusals = failures.failed(row, refused=refused, shared=shared)
        topic = destination(job, self._rules.delivery_topic)
        if refusals >= failures.enough(topic, self._rules.max_publish_attempts):
            failures.refusing_topics.add(topic)
            self._dead_letter(part, row, job, f"refused {refusals} times: {error}")
        else:
            assert part.retry_at is not None
            part.postpone([row], until=part.retry_at + self._rules.retry_backoff * min(tries - 1, 9))

    @staticmethod
    def _published(part: Partition, row: ScheduledExecution, job: Job, acked_at: datetime) -> None:
        part.failures.cleared(row)
        log.debug("published", extra={"job_id": row.job_id, "execution_id": row.execution_id,
                                       "attempt": row.attempt, "due_at": row.due_at.isoformat()})
        part.report.published += 1
        part.published_ids[row.execution_id] = row.job_version
        part.report.lateness_ms.append((acked_at - row.due_at).total_seconds() * 1000)
        part.completions.add(row, job)

    def _dead_letter(self, part: Partition, row: ScheduledExecution, job: Job, reason: str) -> None:
        """Send a row that cannot be published to the dead-letter topic, record its execution FAILED with
        the reason, and complete it (a recurring job's next fire is planned as usual). If the dead-letter
        topic cannot be written either (the broker itself is away), the row is retried like any other."""
        now = self._clock.now()
        record = replace(started_record(row, job, now), status=ExecutionStatus.FAILED, finished_at=now, error=reason)
        try:
            self._publisher.publish([dead_letter(job, record, self._rules.dead_letter_topic)],
                                    timeout_s=self._rules.publish_timeout.total_seconds())
            self._store.write_outcomes([Outcome(record, None)])
        except (PublishError, Unavailable) as exc:
            part.retry_later([row], "dead-lettering failed", exc, {"job_id": row.job_id})
            return
        log.error("execution dead-lettered: %s", reason,
                  extra={"job_id": row.job_id, "execution_id": row.execution_id, "attempt": row.attempt})
        part.failures.cleared(row)
        part.report.dead_lettered += 1
        part.completions.add(row, job)

    def _expire(self, part: Partition, watchdogs: list[ScheduledExecution]) -> None:
        """Watchdog rows are not published: each fails its execution if that has not reported yet."""
        for row in watchdogs:
            try:
                self._outcomes.expire(row)
                if row.lane is Lane.LATE:  # a PLANNED one expires with its lane
                    self._store.delete_scheduled([row])
                part.report.expired += 1
                part.due.settle([row])
            except (Unavailable, PublishError) as exc:
                part.retry_later([row], "watchdog failed", exc,
                                 {"job_id": row.job_id, "execution_id": row.execution_id})
