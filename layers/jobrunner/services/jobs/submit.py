"""Submitting jobs: one (``POST /jobs``) or a batch (``POST /jobs/batch``), each validated, counted against the
tenant's rate and limits, and written with its first run's row in time for its scan. The job row names who
submitted it (``Job.created_by``) and is its change log's submit entry (``domain.changes.submit_entry``): a submit
writes no entry of its own."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

from jobrunner.domain.errors import Conflict, Forbidden, InvalidField, InvalidFields
from jobrunner.domain.jobs import Job, Trigger
from jobrunner.domain.schedules import AT_PAST_TOLERANCE, At, anchor
from jobrunner.ports import IdempotencyClaim
from jobrunner.services.jobs.writer import JobWriter

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from jobrunner.domain.jobs import ScheduledExecution
    from jobrunner.domain.spec import JobSpec

#: The most jobs one ``submit_many`` (``POST /jobs/batch``) takes.
MAX_BATCH = 100


class Submissions(JobWriter):
    """New jobs, with their idempotency keys: a repeat of a request answers the job its first one made."""

    def submit(
        self, user_id: str, new: JobSpec, idempotency_key: str | None = None, *, actor: str | None = None,
        trace_parent: str | None = None,
    ) -> tuple[Job, bool]:
        """Validate and store ``new`` with its first run (its trace: ``trace_parent``); returns (job, created).
        With an idempotency key, a repeat of the same request returns the job made the first time (created
        False), and a different request with the same key is a conflict. A repeat after the first request failed
        half-way (an ambiguous 503) builds the very same job: same id, taken as of the first request's instant, so
        the same first fire and the same ``execution_id``s."""
        now = self._clock.now()
        topic = self._validate_keyed(user_id, new, idempotency_key, now)
        self._quotas.admit(user_id, now)  # a request refused above costs the tenant nothing
        return self._submit_admitted(user_id, new, topic, idempotency_key, now, actor, trace_parent)

    def submit_many(
        self, user_id: str, items: Sequence[tuple[JobSpec, str | None]], *, actor: str | None = None,
        trace_parent: str | None = None,
    ) -> list[tuple[Job, bool]]:
        """Submit several jobs in one request, each as ``submit`` would: (job, created) of each, in order; each
        job's trace is ``trace_parent`` (the request's).

        Every job is validated before anything is counted or written: if any is wrong, the error names each
        wrong field by its item (``jobs.3.schedule``) and nothing is written. The tenant's rate counts each
        job. Jobs without an idempotency key are written together (their rows and job rows in concurrent
        atomic writes, one per job), which is what makes loading many jobs cheap; a job with a key, or every
        job where the tenant's standing limits are counted, goes through ``submit``'s own steps one at a time.
        If the database fails part-way (503), the jobs written before it stand: give each job an idempotency
        key to make a retried batch safe."""
        if not 1 <= len(items) <= MAX_BATCH:
            raise InvalidField("jobs", f"must hold 1 to {MAX_BATCH} jobs")
        now = self._clock.now()
        topics, wrong = self._check_many(user_id, items, now)
        if wrong:
            raise InvalidFields(wrong)
        self._quotas.admit(user_id, now, count=len(items))
        one_by_one = self._quotas.standing
        done: dict[int, tuple[Job, bool]] = {}
        together: list[tuple[int, Job]] = []
        for index, ((new, key), topic) in enumerate(zip(items, topics, strict=True)):
            if key is not None or one_by_one:
                done[index] = self._submit_admitted(user_id, new, topic, key, now, actor, trace_parent)
            else:
                together.append((index, self._build(user_id, str(uuid.uuid4()), new, topic, now, trace_parent,
                                                    actor)))
        if together:
            jobs = [job for _, job in together]

            written = False

            def write(at: datetime) -> list[ScheduledExecution]:
                nonlocal written
                pairs = [(job, self._rows.plan(job, job.next_run_at, at, Trigger.SCHEDULE)) for job in jobs
                         if job.next_run_at is not None]
                if written:  # placed again: the rows only (see ``_submit_admitted``)
                    self._store.write_scheduled([row for _, row in pairs])
                else:
                    self._store.create_jobs(pairs)
                    written = True
                return [row for _, row in pairs]

            self._rows.write_in_time(write)
            done.update((index, (job, True)) for index, job in together)
        return [done[index] for index in range(len(items))]

    def _check_many(
        self, user_id: str, items: Sequence[tuple[JobSpec, str | None]], now: datetime,
    ) -> tuple[list[str | None], list[InvalidField]]:
        """What is wrong with each of a batch's jobs, each error named by its item (``jobs.3.payload``), so that
        a batch refused for one wrong job names every other wrong field too. A topic not granted raises
        ``Forbidden`` (403), naming its item."""
        topics: list[str | None] = []
        wrong: list[InvalidField] = []
        for index, (new, key) in enumerate(items):
            try:
                topics.append(self._validate_keyed(user_id, new, key, now))
            except InvalidField as exc:
                wrong.append(InvalidField(f"jobs.{index}.{exc.field}", exc.reason))
            except Forbidden as exc:
                raise Forbidden(f"jobs.{index}.{exc.field}", exc.reason) from exc
        return topics, wrong

    def _validate(self, user_id: str, new: JobSpec, now: datetime) -> str | None:
        """Check ``new`` as submitted at ``now`` (nothing written; its calendar, if it names one, read); returns
        its topic (None for a job with a target)."""
        topic = self._checks.route(user_id, new)
        self._checks.payload(user_id, new.payload)
        new.checked()
        self._checks.keywords(new)
        self._checks.calendar(user_id, new.calendar, new.schedule.recurring)
        self._build(user_id, str(uuid.uuid4()), new, topic, now)
        return topic

    def _validate_keyed(self, user_id: str, new: JobSpec, idempotency_key: str | None, now: datetime) -> str | None:
        """``_validate``, but a repeat of a request whose key is bound is judged as of the first request's instant:
        the same key answers the same job even once its schedule has no fire after now (#31: a submit answered
        503 after its job landed, retried after the job's last fire, was refused 422 while its job ran). A request
        refused as of now whose key is unbound, or bound to another request, is refused (nothing is claimed)."""
        try:
            return self._validate(user_id, new, now)
        except InvalidField:
            if idempotency_key is None:
                raise
            bound = self._store.idempotency_key(user_id, idempotency_key)
            if bound is None or bound.fingerprint != new.digest():
                raise
            return self._validate(user_id, new, bound.claimed_at)

    def _submit_admitted(
        self, user_id: str, new: JobSpec, topic: str | None, idempotency_key: str | None, now: datetime,
        actor: str | None,
        trace_parent: str | None,
    ) -> tuple[Job, bool]:
        """``submit``'s steps after validation and the rate: the key's claim, then the write."""
        job_id = str(uuid.uuid4())
        if idempotency_key is not None:
            fingerprint = new.digest()
            claim = IdempotencyClaim(user_id, idempotency_key, job_id, fingerprint, now)
            winner = self._store.claim_idempotency_key(claim)
            if winner.job_id != job_id:
                if winner.fingerprint != fingerprint:
                    raise Conflict("idempotency_key was already used for a different request")
                existing = self._store.get_job(user_id, winner.job_id)
                if existing is not None:  # a repeat: its first run re-asserted (the first answer may have been a 503)
                    job = self._queries.with_runs([existing])[0]
                    self._rows.reassert(job)
                    self._quotas.recount(job, self._build(user_id, job.job_id, new, topic, winner.claimed_at,
                                                                    trace_parent))
                    return job, False
                # The first request died before its job was written: finish it, as of its own instant.
                job_id, now = winner.job_id, winner.claimed_at
        job = self._build(user_id, job_id, new, topic, now, trace_parent, actor)
        assert job.next_run_at is not None
        first = job.next_run_at

        written = False

        def write(at: datetime) -> list[ScheduledExecution]:
            # Placed again (the create returned too late for its row to be sure to be read): the row only. The
            # job row stands, and a request that saw it may have changed it since: written again, it would
            # undo a cancel or a pause that landed in between (#31, found by the model's long search).
            nonlocal written
            row = self._rows.plan(job, first, at, Trigger.SCHEDULE)
            if written:
                self._store.write_scheduled([row])
            else:
                self._store.create_job(job, row)
                written = True
            return [row]

        self._quotas.counted(user_id, self._rules.limits.change(None, job), lambda: self._rows.write_in_time(write),
                             landed=lambda: self._store.get_job(user_id, job.job_id) is not None,
                             key=job.job_id if idempotency_key is not None else None)
        return job, True

    @staticmethod
    def _build(user_id: str, job_id: str, new: JobSpec, topic: str | None, now: datetime,
               trace_parent: str | None = None, actor: str | None = None) -> Job:
        """The job ``new`` makes when submitted at ``now`` by ``actor`` (a pure function of its arguments): its
        schedule anchored at ``now``, its topic the one resolved (None: it delivers to its target)."""
        schedule = new.schedule
        if isinstance(schedule, At) and schedule.at < now - AT_PAST_TOLERANCE:
            raise InvalidField("schedule.at", "is more than 5 minutes in the past")
        schedule = anchor(schedule, now)
        first = schedule.first_fire(now)
        if first is None:
            raise InvalidField("schedule", "never fires after now")
        return Job(user_id=user_id, job_id=job_id, spec=replace(new, schedule=schedule, topic=topic),
                   created_at=now, updated_at=now, next_run_at=first, schedule_from=first,
                   trace_parent=trace_parent, created_by=actor or user_id)
