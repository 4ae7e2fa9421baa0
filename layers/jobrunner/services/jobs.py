"""Submitting, reading and managing jobs."""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from jobrunner.domain.calendars import exclusion_note
from jobrunner.domain.changes import JobChange
from jobrunner.domain.errors import (
    Conflict,
    Forbidden,
    InvalidField,
    InvalidFields,
    JobNotFound,
    LimitReached,
    Unavailable,
)
from jobrunner.domain.jobs import (
    MAX_JITTER_S,
    MAX_TIMEOUT_S,
    RUN_RECORDS,
    ExecutionRecord,
    Job,
    JobState,
    JobStatus,
    RetryPolicy,
    ScheduledExecution,
    Trigger,
    execution_id_for,
    with_runs,
)
from jobrunner.domain.ledger import MAX_FIRES_PER_PAGE, MAX_RANGE, LedgerPage, fires_between, ledger, timeline_of
from jobrunner.domain.limits import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    Limits,
    TenantLimits,
    minute_of,
    payload_refusal,
    refusal_reason,
)
from jobrunner.domain.placement import placed_in_time, plan_execution
from jobrunner.domain.policies import CatchUp, Overlap, check_catch_up
from jobrunner.domain.schedules import AT_PAST_TOLERANCE, At, Schedule, anchor, fires_left
from jobrunner.domain.tags import JobFilter, parse_tags
from jobrunner.domain.time import rfc3339, to_epoch_ms
from jobrunner.domain.topics import TopicGrants
from jobrunner.ports import IdempotencyClaim
from jobrunner.services.calendars import check_calendar
from jobrunner.services.wake import wake

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from datetime import datetime

    from jobrunner.domain.calendars import Calendar
    from jobrunner.domain.limits import QuotaChange
    from jobrunner.ports import CalendarStore, ChangeLog, Clock, Stores, TenantQuotas
    from jobrunner.services.wake import ScanWaker

log = logging.getLogger(__name__)

#: Compare-and-set attempts of one change before it answers 409 (each lost one re-reads the job).
MAX_UPDATE_ATTEMPTS = 5
#: Attempts to write a row in time for its scan before giving up with 503 (each is placed anew).
MAX_PLACEMENTS = 5
#: How many fires at the pause's instant a resume with catch-up looks past when they went out before it.
RESUME_LOOKS = 10
#: Fields a change sets that the user did not name (derived from the ones named).
_DERIVED = frozenset({"next_run_at", "paused_at"})
#: The most fires one backfill request may run.
MAX_BACKFILL = 1000
#: How many store pages one filtered list request may read before answering (with a cursor).
MAX_PAGES_PER_LIST = 20
#: The most jobs one ``submit_many`` (``POST /jobs/batch``) takes.
MAX_BATCH = 100
#: Entries (and history records) the ledger reads per store page, and the most pages of each per request.
LEDGER_PAGE = 500
MAX_LEDGER_PAGES = 10
#: Records read before a ledger's range, for a job with a catch-up window (a drop may have begun before it).
LEDGER_EARLIER = 20


@dataclass(frozen=True)
class JobRules:
    segment_count: int
    #: Which topics each tenant may name (``domain.topics``); by default only ``jobs``, for every tenant.
    topics: TopicGrants = field(default_factory=lambda: TopicGrants("jobs", frozenset({"jobs"})))
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    #: Per-tenant limits (``domain.limits``); the payload bound is the lower of theirs and the one above.
    limits: TenantLimits = field(default_factory=TenantLimits)


@dataclass(frozen=True)
class NewJob:
    schedule: Schedule
    payload: Any
    topic: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_s: int | None = None
    trace_parent: str | None = None
    jitter_s: int | None = None
    tags: dict[str, str] = field(default_factory=dict)
    calendar: str | None = None
    delete_after_last: bool = False
    overlap: Overlap = Overlap.ALLOW_ALL
    catch_up: CatchUp = field(default_factory=CatchUp)

    def fingerprint(self) -> str:
        """Digest of the request, to tell a retried submission from a different one with the same key."""
        body = {"schedule": self.schedule.to_dict(), "payload": self.payload, "topic": self.topic,
                "retry": asdict(self.retry), "timeout_s": self.timeout_s}
        if self.jitter_s is not None:  # so that requests from before jitter and tags keep their digest
            body["jitter_s"] = self.jitter_s
        if self.tags:
            body["tags"] = self.tags
        if self.calendar is not None:
            body["calendar"] = self.calendar
        if self.delete_after_last:
            body["delete_after_last"] = True
        if self.overlap is not Overlap.ALLOW_ALL:
            body["overlap"] = self.overlap.value
        if not self.catch_up.replays_all:
            body["catch_up"] = self.catch_up.to_dict()
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class Backfill:
    """What a backfill request found and did."""

    #: The fires the job's schedule had in the range.
    fires: list[datetime]
    #: Those this request queued (none for a dry run; a fire already backfilled is not queued again).
    queued: list[datetime]


@dataclass
class BulkResult:
    """What a bulk change did to each job it selected."""

    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class JobChanges:
    """A PATCH: only the fields given change; they take effect from the next fire."""

    schedule: Schedule | None = None
    payload: Any = None
    payload_set: bool = False
    topic: str | None = None
    retry: RetryPolicy | None = None
    timeout_s: int | None = None
    timeout_set: bool = False
    jitter_s: int | None = None
    jitter_set: bool = False
    #: The job's whole set of tags, replacing the one it has (None: leave them).
    tags: dict[str, str] | None = None
    calendar: str | None = None
    calendar_set: bool = False
    delete_after_last: bool | None = None
    overlap: Overlap | None = None
    #: The job's catch-up window, replacing its own (``CatchUp()``: replay every missed fire again).
    catch_up: CatchUp | None = None


class JobService:
    def __init__(self, store: Stores, clock: Clock, rules: JobRules, waker: ScanWaker | None = None,
                 quotas: TenantQuotas | None = None, changes: ChangeLog | None = None,
                 calendars: CalendarStore | None = None) -> None:
        self._store = store
        #: The tenants' calendars (``domain.calendars``): a job may name one of its tenant's.
        self._calendars = calendars
        #: Each job's change log (``ports.ChangeLog``): who asked for each change that landed (None: none kept).
        self._changes = changes
        self._clock = clock
        self._rules = rules
        #: Counts each tenant's submissions against its ``submissions_per_second`` (None: no rate limits).
        self._quotas = quotas
        #: Wakes the scan of a partition this service wrote a LATE row to (``services.wake``).
        self._waker = waker

    # -- submit ---------------------------------------------------------------------------------

    def submit(
        self, user_id: str, new: NewJob, idempotency_key: str | None = None, *, actor: str | None = None
    ) -> tuple[Job, bool]:
        """Validate and store ``new`` with its first run; returns (job, created). With an idempotency key,
        a repeat of the same request returns the job made the first time (created False), and a different
        request with the same key is a conflict. A repeat after the first request failed half-way (an
        ambiguous 503) builds the very same job: same id, taken as of the first request's instant, so the
        same first fire and the same ``execution_id``s."""
        now = self._clock.now()
        topic = self._validate_keyed(user_id, new, idempotency_key, now)
        self._admit(user_id, now)  # a request refused above costs the tenant nothing
        return self._submit_admitted(user_id, new, topic, idempotency_key, now, actor)

    def submit_many(
        self, user_id: str, items: Sequence[tuple[NewJob, str | None]], *, actor: str | None = None
    ) -> list[tuple[Job, bool]]:
        """Submit several jobs in one request, each as ``submit`` would: (job, created) of each, in order.

        Every job is validated before anything is counted or written: if any is wrong, the error names each
        wrong field by its item (``jobs.3.schedule``) and nothing is written. The tenant's rate counts each
        job. Jobs without an idempotency key are written together (their rows and job rows in concurrent
        atomic writes, one per job, and their change-log entries together), which is what makes loading
        many jobs cheap; a job with a key, or every job where the tenant's standing limits are counted, goes
        through ``submit``'s own steps one at a time. If the database fails part-way (503), the jobs written
        before it stand: give each job an idempotency key to make a retried batch safe."""
        if not 1 <= len(items) <= MAX_BATCH:
            raise InvalidField("jobs", f"must hold 1 to {MAX_BATCH} jobs")
        now = self._clock.now()
        topics, wrong = self._check_many(user_id, items, now)
        if wrong:
            raise InvalidFields(wrong)
        self._admit(user_id, now, count=len(items))
        limits = self._rules.limits
        one_by_one = self._quotas is not None and (limits.counts_jobs or limits.counts_minutes)
        done: dict[int, tuple[Job, bool]] = {}
        together: list[tuple[int, Job]] = []
        for index, ((new, key), topic) in enumerate(zip(items, topics, strict=True)):
            if key is not None or one_by_one:
                done[index] = self._submit_admitted(user_id, new, topic, key, now, actor)
            else:
                together.append((index, self._build(user_id, str(uuid.uuid4()), new, topic, now)))
        if together:
            jobs = [job for _, job in together]

            written = False

            def write(at: datetime) -> list[ScheduledExecution]:
                nonlocal written
                pairs = [(job, self._plan(job, job.next_run_at, at, Trigger.SCHEDULE)) for job in jobs
                         if job.next_run_at is not None]
                if written:  # placed again: the rows only (see ``_submit_admitted``)
                    self._store.write_scheduled([row for _, row in pairs])
                else:
                    self._store.create_jobs(pairs)
                    written = True
                return [row for _, row in pairs]

            self._write_in_time(write)
            self._log_many([(job, "submit", {"schedule": job.schedule.to_dict()}) for job in jobs], actor)
            done.update((index, (job, True)) for index, job in together)
        return [done[index] for index in range(len(items))]

    def _check_many(
        self, user_id: str, items: Sequence[tuple[NewJob, str | None]], now: datetime,
    ) -> tuple[list[str], list[InvalidField]]:
        """What is wrong with each of a batch's jobs, each error named by its item (``jobs.3.payload``), so that
        a batch refused for one wrong job names every other wrong field too. A topic not granted raises
        ``Forbidden`` (403), naming its item."""
        topics: list[str] = []
        wrong: list[InvalidField] = []
        for index, (new, key) in enumerate(items):
            try:
                topics.append(self._validate_keyed(user_id, new, key, now))
            except InvalidField as exc:
                wrong.append(InvalidField(f"jobs.{index}.{exc.field}", exc.reason))
            except Forbidden as exc:
                raise Forbidden(f"jobs.{index}.{exc.field}", exc.reason) from exc
        return topics, wrong

    def _validate(self, user_id: str, new: NewJob, now: datetime) -> str:
        """Check ``new`` as submitted at ``now`` (nothing written; its calendar, if it names one, read); returns
        its topic."""
        topic = self._check_topic(user_id, new.topic)
        self._check_payload(user_id, new.payload)
        self._check_timeout(new.timeout_s)
        self._check_jitter(new.jitter_s)
        check_calendar(self._calendars, user_id, new.calendar, new.schedule.recurring)
        self._build(user_id, str(uuid.uuid4()), new, topic, now)
        return topic

    def _validate_keyed(self, user_id: str, new: NewJob, idempotency_key: str | None, now: datetime) -> str:
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
            if bound is None or bound.fingerprint != new.fingerprint():
                raise
            return self._validate(user_id, new, bound.claimed_at)

    def _submit_admitted(
        self, user_id: str, new: NewJob, topic: str, idempotency_key: str | None, now: datetime, actor: str | None,
    ) -> tuple[Job, bool]:
        """``submit``'s steps after validation and the rate: the key's claim, the write, the change log."""
        job_id = str(uuid.uuid4())
        if idempotency_key is not None:
            fingerprint = new.fingerprint()
            claim = IdempotencyClaim(user_id, idempotency_key, job_id, fingerprint, now)
            winner = self._store.claim_idempotency_key(claim)
            if winner.job_id != job_id:
                if winner.fingerprint != fingerprint:
                    raise Conflict("idempotency_key was already used for a different request")
                existing = self._store.get_job(user_id, winner.job_id)
                if existing is not None:  # a repeat: its first run re-asserted (the first answer may have been a 503)
                    job = self._with_runs([existing])[0]
                    self._reassert(job)
                    self._reassert_count(job, self._build(user_id, job.job_id, new, topic, winner.claimed_at))
                    return job, False
                # The first request died before its job was written: finish it, as of its own instant.
                job_id, now = winner.job_id, winner.claimed_at
        job = self._build(user_id, job_id, new, topic, now)
        assert job.next_run_at is not None
        first = job.next_run_at

        written = False

        def write(at: datetime) -> list[ScheduledExecution]:
            # Placed again (the create returned too late for its row to be sure to be read): the row only. The
            # job row stands, and a request that saw it may have changed it since: written again, it would
            # undo a cancel or a pause that landed in between (#31, found by the model's long search).
            nonlocal written
            row = self._plan(job, first, at, Trigger.SCHEDULE)
            if written:
                self._store.write_scheduled([row])
            else:
                self._store.create_job(job, row)
                written = True
            return [row]

        self._counted(user_id, self._rules.limits.change(None, job), lambda: self._write_in_time(write),
                      landed=lambda: self._store.get_job(user_id, job.job_id) is not None,
                      key=job.job_id if idempotency_key is not None else None)
        self._log(job, "submit", actor, {"schedule": job.schedule.to_dict()})
        return job, True

    def _build(self, user_id: str, job_id: str, new: NewJob, topic: str, now: datetime) -> Job:
        """The job ``new`` makes when submitted at ``now`` (a pure function of its arguments)."""
        schedule = new.schedule
        if isinstance(schedule, At) and schedule.at < now - AT_PAST_TOLERANCE:
            raise InvalidField("schedule.at", "is more than 5 minutes in the past")
        schedule = anchor(schedule, now)
        first = schedule.first_fire(now)
        if first is None:
            raise InvalidField("schedule", "never fires after now")
        return Job(
            user_id=user_id, job_id=job_id, schedule=schedule, payload=new.payload, topic=topic,
            created_at=now, updated_at=now, retry=new.retry, timeout_s=new.timeout_s, next_run_at=first,
            trace_parent=new.trace_parent, jitter_s=new.jitter_s, tags=parse_tags(new.tags), calendar=new.calendar,
            delete_after_last=new.delete_after_last, overlap=new.overlap, catch_up=check_catch_up(new.catch_up),
        )

    # -- read -----------------------------------------------------------------------------------

    def get(self, user_id: str, job_id: str) -> Job:
        """The job with its run fields, derived from its newest history records (``domain.jobs.with_runs``). A job
        deleted after its last fire is not found (its history and change log still are)."""
        job = self._store.get_job(user_id, job_id)
        if job is None or job.state is JobState.DELETED:
            raise JobNotFound(job_id)
        return self._with_runs([job])[0]

    def _with_runs(self, jobs: list[Job]) -> list[Job]:
        records = self._store.latest_records([job.job_id for job in jobs], RUN_RECORDS) if jobs else {}
        return [self._next_run_kept(with_runs(job, records[job.job_id])) for job in jobs]

    def _next_run_kept(self, job: Job) -> Job:
        """A next run older than the tenant's history retention comes from the job row, not from a record
        (which has expired): the job has fired since. Its next run is then the schedule's next fire."""
        now = self._clock.now()
        kept = timedelta(days=self._rules.limits.of(job.user_id).history_days)
        if job.state is not JobState.ACTIVE or job.next_run_at is None or job.next_run_at >= now - kept:
            return job
        return job.with_changes(next_run_at=job.schedule.next_fire_after(now))

    def list_jobs(
        self, user_id: str, limit: int, cursor: str | None, status: JobStatus | None = None,
        where: JobFilter | None = None,
    ) -> tuple[list[Job], str | None]:
        """A page of the tenant's jobs, optionally only those in ``status`` or matching ``where`` (read from
        the tenant's own partition only). A filtered page may hold fewer than ``limit`` jobs (even none) and
        still have a next cursor: keep following it until it is None."""
        where = where or JobFilter(status=status)
        if where.everything:  # (a deleted job is left out: a page may hold fewer than limit jobs)
            page, cursor = self._store.list_jobs(user_id, limit, cursor)
            return self._with_runs([job for job in page if job.state is not JobState.DELETED]), cursor
        found: list[Job] = []
        for _ in range(MAX_PAGES_PER_LIST):
            page, cursor = self._store.list_jobs(user_id, limit - len(found), cursor)
            found += [job for job in self._with_runs(page) if where.matches(job) and job.state is not JobState.DELETED]
            if cursor is None or len(found) >= limit:
                break
        return found, cursor

    def bulk(
        self, user_id: str, action: str, where: JobFilter, limit: int, cursor: str | None, *,
        actor: str | None = None,
    ) -> tuple[BulkResult, str | None]:
        """Pause, resume or cancel a page of the tenant's jobs that ``where`` selects (at least one
        condition: never every job by accident); the next cursor continues with the following page. Each
        job is changed as its own request would change it: one that is already so is unchanged, one that
        cannot be (a cancelled job paused) is reported with the reason."""
        if where.everything:
            raise InvalidField("tag", "a bulk change needs a tag, a status or a kind to select jobs by")
        change = {"pause": self.pause, "resume": self.resume, "cancel": self.cancel}.get(action)
        if change is None:
            raise InvalidField("action", "must be pause, resume or cancel")
        jobs, cursor = self.list_jobs(user_id, limit, cursor, where=where)
        result = BulkResult()
        for job in jobs:
            try:
                after = change(user_id, job.job_id, actor=actor)
            except (Conflict, JobNotFound) as exc:
                result.failed.append((job.job_id, str(exc)))
                continue
            (result.changed if after.version != job.version else result.unchanged).append(job.job_id)
        return result, cursor

    def changes(
        self, user_id: str, job_id: str, limit: int = 50, before: tuple[datetime, str] | None = None
    ) -> list[JobChange]:
        """A page of the job's change log, newest first (``ChangeLog.changes``); of a job deleted after its last
        fire too, while its entries are kept."""
        if self._store.get_job(user_id, job_id) is None:
            newest = self._changes.changes(job_id, 1) if self._changes is not None else []
            if not newest or newest[0].user_id != user_id:  # another tenant's job is "not found"
                raise JobNotFound(job_id)
        return self._changes.changes(job_id, limit, before) if self._changes is not None else []

    def _log(self, job: Job, action: str, actor: str | None, details: dict[str, Any]) -> None:
        """Add a change that landed to the job's change log. Best effort: the change stands whether or not
        its entry could be written (a failure is logged, and the entry is missing from the log)."""
        if self._changes is None:
            return
        entry = JobChange(job_id=job.job_id, user_id=job.user_id, changed_at=self._clock.now(),
                          change_id=str(uuid.uuid4()), actor=actor or job.user_id, action=action, version=job.version,
                          details=details)
        try:
            self._changes.record(entry)
        except Unavailable as exc:
            log.warning("change log unavailable, %s of job %s by %s not logged: %s", action, job.job_id, actor, exc)

    def _log_many(self, changes: Sequence[tuple[Job, str, dict[str, Any]]], actor: str | None) -> None:
        """``_log`` of several changes that landed, written together (best effort, as ``_log``)."""
        if self._changes is None or not changes:
            return
        now = self._clock.now()
        entries = [JobChange(job_id=job.job_id, user_id=job.user_id, changed_at=now, change_id=str(uuid.uuid4()),
                             actor=actor or job.user_id, action=action, version=job.version, details=details)
                   for job, action, details in changes]
        try:
            self._changes.record_many(entries)
        except Unavailable as exc:
            log.warning("change log unavailable, %d changes by %s not logged: %s", len(entries), actor, exc)

    def fires(
        self, user_id: str, job_id: str, start: datetime, end: datetime, limit: int = 100,
        after: datetime | None = None,
    ) -> LedgerPage:
        """A page of the job's firing ledger (``domain.ledger``): the fires its schedule called for in
        [``start``, ``end``] (after ``after``, the last fire of the page before), each with what became of it.

        Reads: the job (and its newest records, as every read of a job), its change log newest first down
        to its first entry (``LEDGER_PAGE`` entries a read), and its history records of the page's range
        (``LEDGER_PAGE`` a read), each at most ``MAX_LEDGER_PAGES`` reads."""
        if limit < 1 or limit > MAX_FIRES_PER_PAGE:
            raise InvalidField("limit", f"must be between 1 and {MAX_FIRES_PER_PAGE}")
        if end < start:
            raise InvalidField("to", "is before from")
        if end - start > MAX_RANGE:
            raise InvalidField("to", f"the range may span at most {MAX_RANGE.days} days; page through a longer one")
        if after is not None and not start <= after <= end:
            raise InvalidField("cursor", "is not a cursor of this range")
        job = self.get(user_id, job_id)  # tenancy check: another tenant's job is "not found"
        now = self._clock.now()
        low = after + timedelta(milliseconds=1) if after is not None else start
        timeline = timeline_of(job, *self._change_log(job_id))
        planned = fires_between(timeline, low, end, limit + 1, now)
        high = planned[limit] if len(planned) > limit else end
        records = self._records_between(job_id, low, high)
        # a catch-up window's drop that began before the range stands for fires in it: the records just before
        earlier = (self._store.history_page(job_id, LEDGER_EARLIER, (low, 0, None))
                   if not job.catch_up.replays_all else [])
        kept = timedelta(days=self._rules.limits.of(user_id).history_days)
        calendar = self._calendar_of(job)

        def excluded_by(fire: datetime) -> str | None:
            exclusion = calendar.excluding(fire) if calendar is not None else None
            return exclusion_note(calendar, exclusion) if calendar is not None and exclusion is not None else None

        return ledger(job, timeline, records, start=low, end=end, now=now, kept_since=now - kept, limit=limit,
                      excluded_by=excluded_by, earlier=earlier)

    def _change_log(self, job_id: str) -> tuple[list[JobChange], bool]:
        """The job's whole change log (newest first), and whether it was read to its end."""
        if self._changes is None:
            return [], False
        entries: list[JobChange] = []
        before: tuple[datetime, str] | None = None
        for _ in range(MAX_LEDGER_PAGES):
            page = self._changes.changes(job_id, LEDGER_PAGE, before)
            entries += page
            if len(page) < LEDGER_PAGE:
                return entries, True
            before = (page[-1].changed_at, page[-1].change_id)
        return entries, False

    def _records_between(self, job_id: str, low: datetime, high: datetime) -> list[ExecutionRecord]:
        """The job's history records with ``scheduled_at`` in [``low``, ``high``], newest first."""
        found: list[ExecutionRecord] = []
        before: tuple[datetime, int, str | None] = (high + timedelta(milliseconds=1), 0, None)
        for _ in range(MAX_LEDGER_PAGES):
            page = self._store.history_page(job_id, LEDGER_PAGE, before)
            found += [r for r in page if r.scheduled_at >= low]
            if len(page) < LEDGER_PAGE or page[-1].scheduled_at < low:
                break
            last = page[-1]
            before = (last.scheduled_at, last.attempt, last.execution_id)
        return found

    def executions(
        self, user_id: str, job_id: str, limit: int = 50, before: tuple[datetime, int, str | None] | None = None
    ) -> list[ExecutionRecord]:
        """A page of the job's history (``HistoryStore.history_page``: ``before`` names the last record of the page
        before); of a job deleted after its last fire too (``delete_after_last``), while its records are kept:
        each names its tenant."""
        if self._store.get_job(user_id, job_id) is None:
            newest = self._store.history_page(job_id, 1)
            if not newest or newest[0].user_id != user_id:  # another tenant's job is "not found"
                raise JobNotFound(job_id)
        return self._store.history_page(job_id, limit, before)

    @staticmethod
    def fires_left(job: Job) -> int | None:
        """How many fires the job has left from its next run (its end conditions), None when more than
        ``MAX_COUNT`` or no end; 0 for a job with no next run."""
        schedule = job.schedule
        ends = any(getattr(schedule, name, None) is not None for name in ("end", "until", "count", "at"))
        if job.state is not JobState.ACTIVE or not ends:
            return None
        return fires_left(schedule, job.next_run_at)

    def preview(self, job: Job, count: int) -> list[datetime]:
        """The next ``count`` fire times of an active job, from its next run."""
        fires: list[datetime] = []
        instant = job.next_run_at
        while instant is not None and len(fires) < count and job.state is JobState.ACTIVE:
            fires.append(instant)
            instant = job.schedule.next_fire_after(instant)
        return fires

    def excluded(self, job: Job, fires: list[datetime]) -> dict[datetime, str]:
        """Those of ``fires`` the job's calendar excludes (as it stands now), each with the reason in words.
        One read of the calendar, for a job that names one; none otherwise."""
        calendar = self._calendar_of(job)
        if calendar is None:
            return {}
        return {fire: exclusion_note(calendar, exclusion) for fire in fires
                if (exclusion := calendar.excluding(fire)) is not None}

    def _calendar_of(self, job: Job) -> Calendar | None:
        if job.calendar is None or self._calendars is None:
            return None
        return self._calendars.get(job.user_id, job.calendar)

    # -- manage ---------------------------------------------------------------------------------

    def cancel(self, user_id: str, job_id: str, *, actor: str | None = None) -> Job:
        """Cancel: nothing further is published. Rows already planned carry an older version and are
        dropped by their scan, which reads the job just before publishing."""
        return self._save(user_id, job_id, self._cancelled, "cancel", actor)

    @staticmethod
    def _cancelled(job: Job, now: datetime) -> dict[str, Any] | None:
        if job.state is JobState.CANCELLED:
            return None
        return {"state": JobState.CANCELLED, "next_run_at": None}

    def pause(self, user_id: str, job_id: str, *, actor: str | None = None) -> Job:
        """Pause the schedule: no fire due from now on is published until resumed. Retries and timeouts of
        executions already published go on (a pause stops the schedule, not the work in flight)."""
        return self._save(user_id, job_id, self._paused, "pause", actor)

    def _paused(self, job: Job, now: datetime) -> dict[str, Any] | None:
        self._check_not_cancelled(job)
        if job.state is JobState.PAUSED:
            return None
        return {"state": JobState.PAUSED, "next_run_at": None, "paused_at": now}

    def resume(self, user_id: str, job_id: str, catch_up: bool = False, *, actor: str | None = None) -> Job:
        """Resume from the first fire after now; with ``catch_up``, from the first fire after the pause, so
        that the fires missed while paused run one after another."""
        return self._save(user_id, job_id, lambda job, now: self._resumed(job, now, catch_up), "resume", actor,
                          {"catch_up": True} if catch_up else None)

    def _resumed(self, job: Job, now: datetime, catch_up: bool) -> dict[str, Any] | None:
        self._check_not_cancelled(job)
        if job.state is JobState.ACTIVE:
            return None
        since = (job.paused_at or now) if catch_up else now
        first = job.schedule.next_fire_after(since - timedelta(milliseconds=1) if catch_up else since)
        if catch_up:
            first = self._first_not_gone_out(job, first)
        if first is None:
            raise Conflict("the schedule has no fire left after now; nothing to resume")
        return {"state": JobState.ACTIVE, "next_run_at": first}

    def _first_not_gone_out(self, job: Job, fire: datetime | None) -> datetime | None:
        """From ``fire`` (the first at or after the pause), the first fire with no record: one at the pause's
        instant may have gone out before the pause landed (a scan's clock a little ahead of the API's), and is
        not missed (#31, found by the model: replayed, it ran twice, or a catch-up window recorded it SKIPPED
        over its record). A read per fire that went out; at most ``RESUME_LOOKS`` of them."""
        for _ in range(RESUME_LOOKS):
            if fire is None or self._store.get_record(
                    job.job_id, fire, 1, execution_id_for(job.job_id, fire, 1, Trigger.SCHEDULE)) is None:
                return fire
            fire = job.schedule.next_fire_after(fire)
        return fire

    def run_now(self, user_id: str, job_id: str, *, actor: str | None = None) -> ScheduledExecution:
        """A manual run, due now, recorded in history with trigger MANUAL (allowed on paused jobs)."""
        job = self.get(user_id, job_id)
        self._check_not_cancelled(job)
        due = self._clock.now()
        rows: list[ScheduledExecution] = []

        def write(at: datetime) -> list[ScheduledExecution]:
            rows[:] = self._schedule([self._plan(job, due, at, Trigger.MANUAL)])
            return rows

        self._counted(user_id, self._rules.limits.run_now(due), lambda: self._write_in_time(write))
        self._log(job, "run", actor, {"execution_id": rows[0].execution_id})
        return rows[0]

    def backfill(
        self, user_id: str, job_id: str, start: datetime, end: datetime, dry_run: bool = False, *,
        actor: str | None = None,
    ) -> Backfill:
        """The fires the job's schedule had in [``start``, ``end``] (a past range), each run now as its own
        execution (trigger BACKFILL, its id a function of the job and the fire); with ``dry_run``, only listed. A
        fire already backfilled (its execution has a record: published, or ended) is not queued again, so asking
        again for a range runs nothing new (one read of the records per request). At most ``MAX_BACKFILL``
        fires a request. Allowed on a paused job, as a run now is."""
        job = self.get(user_id, job_id)
        self._check_not_cancelled(job)
        now = self._clock.now()
        if end > now:
            raise InvalidField("to", "is in the future: a backfill runs past fires only")
        if start > end:
            raise InvalidField("from", "is after to")
        fires: list[datetime] = []
        instant = job.schedule.next_fire_after(start - timedelta(milliseconds=1))
        while instant is not None and instant <= end:
            if len(fires) == MAX_BACKFILL:
                raise InvalidField("to", f"the range holds more than {MAX_BACKFILL} fires; ask for a shorter one")
            fires.append(instant)
            instant = job.schedule.next_fire_after(instant)
        if dry_run or not fires:
            return Backfill(fires, [])
        keys = [(job_id, fire, 1, execution_id_for(job_id, fire, 1, Trigger.BACKFILL)) for fire in fires]
        run = self._store.get_records(keys)
        queued = [fire for fire, key in zip(fires, keys, strict=True) if key not in run]
        if not queued:
            return Backfill(fires, [])

        def write(at: datetime) -> list[ScheduledExecution]:
            return self._schedule([plan_execution(job, at, at, self._rules.segment_count, trigger=Trigger.BACKFILL,
                                                  scheduled_at=fire) for fire in queued])

        self._counted(user_id, self._rules.limits.run_now(now, len(queued)), lambda: self._write_in_time(write))
        self._log(job, "backfill", actor, {"from": rfc3339(start), "to": rfc3339(end), "fires": len(queued)})
        return Backfill(fires, queued)

    def change(self, user_id: str, job_id: str, changes: JobChanges, *, actor: str | None = None) -> Job:
        """Apply a PATCH; it takes effect from the next fire (a new schedule starts from now)."""
        return self._save(user_id, job_id, lambda job, now: self._changed(job, now, changes), "patch", actor)

    def _changed(self, job: Job, now: datetime, changes: JobChanges) -> dict[str, Any]:
        self._check_not_cancelled(job)
        updates = self._field_changes(job.user_id, changes)
        if changes.calendar_set or (changes.schedule is not None and job.calendar is not None):
            calendar = changes.calendar if changes.calendar_set else job.calendar
            check_calendar(self._calendars, job.user_id, calendar, (changes.schedule or job.schedule).recurring)
            updates["calendar"] = calendar
        if changes.schedule is None:
            return updates  # the planned rows and the next run stay as they are
        schedule = anchor(changes.schedule, now)
        next_run_at = schedule.first_fire(now)
        if next_run_at is None or next_run_at < now - AT_PAST_TOLERANCE:
            raise InvalidField("schedule", "never fires after now")
        return {**updates, "schedule": schedule,
                "next_run_at": None if job.state is JobState.PAUSED else next_run_at}

    def _field_changes(self, user_id: str, changes: JobChanges) -> dict[str, Any]:
        """The PATCH's fields that neither plan a fire nor depend on one another, checked."""
        updates: dict[str, Any] = {}
        if changes.topic is not None:
            updates["topic"] = self._check_topic(user_id, changes.topic)
        if changes.payload_set:
            self._check_payload(user_id, changes.payload)
            updates["payload"] = changes.payload
        if changes.retry is not None:
            updates["retry"] = changes.retry
        if changes.timeout_set:
            self._check_timeout(changes.timeout_s)
            updates["timeout_s"] = changes.timeout_s
        if changes.jitter_set:  # from the next fire planned: the one already planned keeps its due instant
            self._check_jitter(changes.jitter_s)
            updates["jitter_s"] = changes.jitter_s
        if changes.tags is not None:
            updates["tags"] = parse_tags(changes.tags)
        if changes.delete_after_last is not None:
            updates["delete_after_last"] = changes.delete_after_last
        if changes.overlap is not None:  # from the next fire the scan reaches (planned rows stay)
            updates["overlap"] = changes.overlap
        if changes.catch_up is not None:
            updates["catch_up"] = check_catch_up(changes.catch_up)
        return updates

    # -- helpers --------------------------------------------------------------------------------

    @staticmethod
    def _check_not_cancelled(job: Job) -> None:
        if job.state is JobState.CANCELLED:
            raise Conflict("the job is cancelled")

    def _save(
        self, user_id: str, job_id: str, decide: Callable[[Job, datetime], dict[str, Any] | None], action: str,
        actor: str | None, details: dict[str, Any] | None = None,
    ) -> Job:
        """Read the job, ``decide`` its changes (None: nothing to do), and write them as a new version, on
        condition that no other change landed since the read. A change of schedule or state also becomes
        the schedule version, with its next run planned under it; any other change plans nothing (see
        ``domain.jobs``). A lost race re-reads and decides again (a user's intent applies to the job as it
        now stands), a few times, then answers 409 with the current version."""
        for _ in range(MAX_UPDATE_ATTEMPTS):
            job = self.get(user_id, job_id)
            now = self._clock.now()
            changes = decide(job, now)
            if changes is None:  # nothing to change; a resume of an active job re-asserts its next run's row
                if action == "resume":
                    self._reassert(job)
                return job
            version = job.version + 1
            replans = "schedule" in changes or "state" in changes
            updated = job.with_changes(version=version, schedule_version=version if replans else job.schedule_version,
                                       updated_at=now, **changes)
            if self._counted(user_id, self._rules.limits.change(job, updated),
                             lambda: self._write_update(updated, job.version),  # noqa: B023 - called at once
                             landed=lambda: self._stands(updated)):  # noqa: B023 - called at once
                fields = sorted(set(changes) - _DERIVED) if action == "patch" else None
                logged = {**(details or {}), **({"fields": fields} if fields else {})}
                if fields and "schedule" in fields:  # the ledger reads the schedules a job had from its log
                    logged["schedule"] = updated.schedule.to_dict()
                self._log(updated, action, actor, logged)
                return updated
        current = self.get(user_id, job_id)
        raise Conflict(f"the job kept changing while this request was applied; its version is now {current.version}")

    def _write_update(self, updated: Job, expected_version: int) -> bool:
        """Compare-and-set ``updated`` with its next run's row placed as of the moment of writing; a row that
        landed too late for its scan is placed and written again under the same version (and only then is the
        change answered: verify, then commit). A change that keeps the schedule writes no row."""
        due = updated.next_run_at if updated.state is JobState.ACTIVE else None
        now = self._clock.now()
        rows = [] if due is None or updated.schedule_version != updated.version else [
            self._plan(updated, due, now, Trigger.SCHEDULE)]
        if not self._compare_and_set(updated, rows, expected_version):
            return False
        if due is not None and rows:
            wake(self._waker, rows)
            if not placed_in_time(rows, now, self._clock.now()):
                self._write_in_time(lambda at: self._schedule([self._plan(updated, due, at, Trigger.SCHEDULE)]))
        return True

    def _compare_and_set(self, updated: Job, rows: list[ScheduledExecution], expected_version: int) -> bool:
        """``JobStore.update_job``; an outcome it could not learn (it raised: a timed-out compare-and-set may
        still land) is settled by reading (``JobStore.get_job_settled``), never by waiting: True when this very
        change is the job now (its version and instant), False when it did not land and never will. If even
        that read fails, ``Unavailable`` (503): the caller may send the request again."""
        try:
            return self._store.update_job(updated, rows, expected_version)
        except Unavailable as exc:
            log.warning("job %s: the outcome of a change is unknown (%s); settling it by reading", updated.job_id, exc)
            return self._stands(updated)

    def _stands(self, updated: Job) -> bool:
        """Whether this very change is the job now (its version and instant), read settled
        (``JobStore.get_job_settled``): a change whose compare-and-set timed out, or whose row could not be placed
        again after it landed, is judged by it (#31)."""
        settled = self._store.get_job_settled(updated.user_id, updated.job_id)
        return settled is not None and settled.version == updated.version and (
            to_epoch_ms(settled.updated_at) == to_epoch_ms(updated.updated_at))

    def _reassert(self, job: Job) -> None:
        """Every idempotent path re-asserts its row (a repeated submit, a resume of an active job): the next run
        of an active job whose fire has no record yet (not published, skipped or held) is written again where its
        scan will read it, under the same execution_id: harmless where the row exists (the same row, or a copy
        with the same id), a repair where it does not (an earlier answer that was an error, a row lost)."""
        due = job.next_run_at
        if job.state is not JobState.ACTIVE or due is None:
            return
        if self._store.get_record(job.job_id, due, 1, execution_id_for(job.job_id, due, 1, Trigger.SCHEDULE)):
            return
        self._write_in_time(lambda at: self._schedule([self._plan(job, due, at, Trigger.SCHEDULE)]))

    def _schedule(self, rows: list[ScheduledExecution]) -> list[ScheduledExecution]:
        self._store.write_scheduled(rows)
        return rows

    def _write_in_time(self, write: Callable[[datetime], list[ScheduledExecution]]) -> bool:
        """Run ``write(now)``, which places its rows as seen at ``now``, writes them and returns them, until a
        write returns in time for the scans of the buckets it placed them in (see ``domain.placement``).
        True once it has; 503 if it never does."""
        for _ in range(MAX_PLACEMENTS):
            started = self._clock.now()
            rows = write(started)
            returned = self._clock.now()
            # After the write (the lease is read after it), but outside its time: a woken scan reads its late
            # lane from the start, so how long the request for it takes changes nothing for the rows.
            wake(self._waker, rows)
            if placed_in_time(rows, started, returned):
                return True
        raise Unavailable("the database keeps answering too slowly for the scans; the write may have to be retried")

    def _plan(self, job: Job, due_at: datetime, now: datetime, trigger: Trigger) -> ScheduledExecution:
        return plan_execution(job, due_at, now, self._rules.segment_count, trigger=trigger)

    def _check_topic(self, user_id: str, topic: str | None) -> str:
        """A topic the deployment does not allow is a wrong field (422); an allowed one that is not granted
        to this tenant is refused (403), naming the topics the tenant may use."""
        grants = self._rules.topics
        chosen = topic or grants.default_for(user_id)
        if chosen is not None and chosen not in grants.allowed:
            raise InvalidField("topic", f"not an allowed topic; allowed: {sorted(grants.allowed)}")
        if chosen is None or not grants.permits(user_id, chosen):
            mine = list(grants.topics_of(user_id))
            raise Forbidden("topic", f"{chosen!r} is not granted to this tenant; granted: {mine}" if chosen
                            else "no topic is granted to this tenant")
        return chosen

    def payload_limit(self, user_id: str) -> int:
        """The largest payload (serialized, in bytes) the tenant may give a job: the lower of the deployment's
        and its own limit."""
        return min(self._rules.max_payload_bytes, self._rules.limits.of(user_id).payload_bytes)

    def _check_payload(self, user_id: str, payload: Any) -> None:
        refusal = payload_refusal(payload, self.payload_limit(user_id))
        if refusal is not None:
            raise InvalidField("payload", refusal)

    def _counted(self, user_id: str, change: QuotaChange, write: Callable[[], bool],
                 landed: Callable[[], bool] | None = None, key: str | None = None) -> bool:
        """Run ``write`` (True: it landed) with ``change`` counted against the tenant's standing limits:
        what grows is taken before the write (a refusal writes nothing: 429) and given back if the write
        does not land; what only gives back is given back once the write has landed. A write that raised may
        have landed all the same: ``landed`` settles that by reading (a repeat of the request finds it done and
        changes nothing, so what it took stands and what it frees is given back now); without it, or if that
        read fails too, it counts as not landed. Under ``key`` (a create with an idempotency key, by its job id)
        the count is idempotent: a repeat of the request that finds the job counts it again, once, should this
        one have given it back (``_reassert_count``). If the counter cannot be reached, the write goes ahead
        uncounted and is logged, as for the rate."""
        if self._quotas is None or change.empty:
            return write()
        grows = change.grows
        if grows:
            self._take(user_id, change, key)
        try:
            written = write()
        except BaseException:
            stands = self._landed_anyway(landed)
            if grows and not stands:
                self._give_back(user_id, change, key)
            elif stands and not grows:  # a change that frees, landed though it answered an error (#31)
                self._take(user_id, change)
            raise
        if grows and not written:
            self._give_back(user_id, change, key)
        elif written and not grows:
            self._take(user_id, change)
        return written

    @staticmethod
    def _landed_anyway(landed: Callable[[], bool] | None) -> bool:
        """Whether a write that raised landed after all, as ``landed`` reads it (False when unknown)."""
        if landed is None:
            return False
        try:
            return landed()
        except Unavailable as exc:
            log.warning("could not tell whether a failed write landed; its count is given back: %s", exc)
            return False

    def _reassert_count(self, job: Job, created: Job) -> None:
        """Every idempotent path re-asserts its row, and a repeated create its count: the count the job took when
        ``created`` (as its first request built it) is taken again under its job id, which counts it once
        (``TenantQuotas.take``): a repair where the first request gave it back, unable to tell whether its write
        had landed (#31, found by the model: its settling read failed too). Never refused (the job stands);
        nothing for a job cancelled or deleted since, whose count was given back with it."""
        if self._quotas is None or job.state in (JobState.CANCELLED, JobState.DELETED):
            return
        change = self._rules.limits.change(None, created)
        if change.empty:
            return
        try:
            self._quotas.take(job.user_id, change, Limits(), minute_of(self._clock.now()), key=job.job_id)
        except Unavailable as exc:
            log.warning("quota counter unavailable, a repeated create not counted again (%s): %s", change, exc)

    def _take(self, user_id: str, change: QuotaChange, key: str | None = None) -> None:
        assert self._quotas is not None
        limits = self._rules.limits.of(user_id)
        now = self._clock.now()
        try:
            refused = self._quotas.take(user_id, change, limits, minute_of(now), key=key)
        except Unavailable as exc:
            log.warning("quota counter unavailable, change admitted uncounted (%s): %s", change, exc)
            return
        if refused is not None:
            current = change.add_minute == minute_of(now) and refused == "executions_per_minute"
            raise LimitReached(refused, refusal_reason(refused, limits, change),
                               retry_after_s=60 - now.second if current else 60)

    def _give_back(self, user_id: str, change: QuotaChange, key: str | None = None) -> None:
        assert self._quotas is not None
        try:
            self._quotas.give_back(user_id, change, key=key)
        except Unavailable as exc:
            log.warning("quota counter unavailable, a change that did not land stays counted (%s): %s", change, exc)

    def _admit(self, user_id: str, now: datetime, count: int = 1) -> None:
        """Count ``count`` submissions against the tenant's rate, all or none; over it, nothing is written
        (429). If the counter cannot be reached the submission goes ahead: the limit protects the service,
        and the stage's own throttle still bounds it; such admissions are logged."""
        rate = self._rules.limits.of(user_id).submissions_per_second
        if rate is None or self._quotas is None:
            return
        if count > rate:
            raise LimitReached("submissions_per_second",
                               f"this tenant may submit at most {rate} jobs a second: send fewer at once",
                               retry_after_s=1)
        try:
            admitted = self._quotas.admit(user_id, int(now.timestamp()), rate, count=count)
        except Unavailable as exc:
            log.warning("quota counter unavailable, submission admitted uncounted: %s", exc)
            return
        if not admitted:
            raise LimitReached("submissions_per_second", f"this tenant may submit at most {rate} jobs a second",
                               retry_after_s=1)

    @staticmethod
    def _check_jitter(jitter_s: int | None) -> None:
        if jitter_s is not None and not 1 <= jitter_s <= MAX_JITTER_S:
            raise InvalidField("jitter_s", f"must be between 1 and {MAX_JITTER_S} seconds")

    @staticmethod
    def _check_timeout(timeout_s: int | None) -> None:
        if timeout_s is not None and not 1 <= timeout_s <= MAX_TIMEOUT_S:
            raise InvalidField("timeout_s", f"must be between 1 and {MAX_TIMEOUT_S} seconds")
