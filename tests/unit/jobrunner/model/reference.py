"""The reference model of the model test: what the scheduler owes, from acknowledged operations only.

Per job (``JobModel``): as submitted, then each acknowledged change replayed in the order its write
landed (concurrent requests take effect in that order, whatever order they were answered in). A change
that lands closes the schedule in effect (its ``Epoch``) and owes the new one's fires from the instant
it was decided; pauses, the cancel, payloads and manual runs are kept the same way. Per execution
(``Execution``): what its worker answered. ``Reference.observe`` checks each message as it is
published (safety); ``check_owed`` and ``check_next_runs`` check, after the final drain, that all
that was owed was done (liveness). Fire times are computed by the reference's own schedules, read from
the JSON the user sent (``timetables``), never by the product's parsing or ``next_fire_after``; the
reason a fire was skipped is read from its record's words as the API documents them.

What a PATCH changes besides the schedule and the payload (overlap, catch-up, calendar, jitter, timeout,
retries, topic, delete after last, tags) is kept as a timeline per field, from when each change landed:
a check that depends on one accepts any value the job had in the stretch of time the product could have
read it in (the overlap, catch-up and calendar apply from the next fire a scan reaches).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from jobrunner.domain.jobs import (
    RUN_RECORDS,
    ExecutionStatus,
    JobState,
    Trigger,
    execution_id_for,
    with_runs,
)
from jobrunner.domain.policies import MISFIRE_GRACE, Overlap
from tests.unit.jobrunner.model.timetables import START, Timetable, timetable, utc_instant

if TYPE_CHECKING:
    from collections.abc import Callable

    from jobrunner.adapters.leases.memory import MemoryLeaseStore
    from jobrunner.adapters.stores.memory import MemoryJobStore
    from jobrunner.domain.calendars import Calendar
    from jobrunner.domain.jobs import ExecutionRecord, Job, ScheduledExecution
    from jobrunner.domain.spec import JobSpec, RetryPolicy
    from jobrunner.ports import OutboundMessage

USER = "alice"
MINUTE = timedelta(minutes=1)
MS = timedelta(milliseconds=1)
JOBS_TOPIC = "jobs"
DLQ_TOPIC = "job-dlq"
Fate = Literal["success", "failure", "never"]


def hms(instant: datetime | None) -> str:
    return "-" if instant is None else instant.strftime("%H:%M:%S.%f")[:-3]


#: Why a fire was not run, as a SKIPPED record's ``error`` begins (the reason, then a colon): the API's words.
SKIP_REASONS = ("calendar", "overlap", "catch_up")


def skip_reason(record: ExecutionRecord) -> str | None:
    """The reason a SKIPPED record gives (None for any other record, or a reason the reference does not know)."""
    if record.status is not ExecutionStatus.SKIPPED or not record.error:
        return None
    reason = record.error.partition(":")[0]
    return reason if reason in SKIP_REASONS else None


def fires(schedule: Timetable, low: datetime, high: datetime) -> list[datetime]:
    """The schedule's fires in [low, high]."""
    return list(itertools.takewhile(lambda t: t <= high, schedule.fires_from(low)))


@dataclass
class Epoch:
    """A stretch during which one schedule drove the job: its fires from ``since`` (strictly after it when
    ``strict``) until ``until``, the instant a change ended it (None: still in effect). Fires before
    ``owed_since`` are allowed, not owed (a catch-up over a schedule changed while paused)."""

    schedule: Timetable
    since: datetime
    strict: bool = False
    owed_since: datetime | None = None
    until: datetime | None = None

    def holds(self, fire: datetime, slack: timedelta = timedelta(0)) -> bool:
        """Whether ``fire`` is one of its fires (``slack``: read on a clock that far off the one ``until`` is on)."""
        if fire < self.since or (self.strict and fire == self.since):
            return False
        return (self.until is None or fire <= self.until + slack) and self.schedule.is_fire(fire)

    def first_from(self, low: datetime) -> datetime | None:
        """Its first fire at or after ``low``."""
        candidates = (f for f in self.schedule.fires_from(max(low, self.since)) if f > self.since or not self.strict)
        fire = next(candidates, None)
        return fire if fire is not None and self.holds(fire) else None

    def owed(self, horizon: datetime) -> list[datetime]:
        low = max(self.since, self.owed_since or self.since)
        return [f for f in fires(self.schedule, low, horizon) if self.holds(f)]

    def __repr__(self) -> str:
        since = ("after " if self.strict else "from ") + hms(self.since)
        return f"<{self.schedule} {since} to {hms(self.until) if self.until else 'now'}>"


@dataclass
class Window:
    """A pause: from ``start`` to ``end`` (a resume or the cancel; None: still paused)."""

    start: datetime
    end: datetime | None = None
    catch_up: bool = False


@dataclass(frozen=True)
class Change:
    """An acknowledged change of a job: decided at ``at`` (the job's ``updated_at``), in effect from ``landed``
    (when its write landed: concurrent requests take effect in that order, not in the order answered)."""

    kind: Literal["payload", "schedule", "pause", "resume", "cancel", "patch"]
    at: datetime
    landed: datetime
    payload: Any = None
    #: Its write's place among all writes: of two changes landed at the same instant, the later one wins.
    order: int = 0
    schedule: Timetable | None = None
    catch_up: bool = False
    #: A PATCH: the fields it set besides the schedule (``SETTINGS``; the payload under "payload").
    fields: dict[str, Any] = field(default_factory=dict)


#: The fields of a job a PATCH may change besides its schedule and payload, kept as timelines (``JobModel.values``).
SETTINGS = ("overlap", "catch_up", "calendar", "jitter_s", "timeout_s", "retry", "topic", "delete_after_last", "tags")


@dataclass(eq=False)
class JobModel:
    """A job as its user knows it: as submitted, then each change replayed in the order it landed."""

    name: str
    job_id: str
    retry: RetryPolicy
    timeout_s: int | None
    created_at: datetime
    first: Epoch
    first_payload: Any
    #: What happens around its fires, as submitted (``values`` holds them as PATCHes changed them).
    calendar: bool = False
    overlap: Overlap = Overlap.ALLOW_ALL
    catch_up: bool = False
    delete_after_last: bool = False
    jitter_s: int | None = None
    topic: str = "jobs"
    tags: dict[str, str] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)
    manual: dict[str, datetime] = field(default_factory=dict)  # execution_id -> due instant of each run now
    #: The run nows of attempts that failed after their row landed: they may run, they are not owed.
    unowed: set[str] = field(default_factory=set)
    #: execution_id -> the instants it was requested at, of each fire a backfill asked for (trigger BACKFILL)
    backfills: dict[str, list[datetime]] = field(default_factory=dict)
    history: dict[str, ExecutionRecord] = field(default_factory=dict)  # the records seen last, by execution_id
    # Derived from the above by ``replay``:
    state: JobState = JobState.ACTIVE
    schedule: Timetable | None = None
    epochs: list[Epoch] = field(default_factory=list)
    payloads: list[tuple[datetime, Any]] = field(default_factory=list)  # from when each payload was in effect
    pauses: list[Window] = field(default_factory=list)
    paused_at: datetime | None = None
    rescheduled_at: datetime | None = None  # the latest schedule change while paused
    cancelled_at: datetime | None = None
    #: Every schedule it has had (also those taken while paused).
    schedules: list[Timetable] = field(default_factory=list)
    #: Per field of ``SETTINGS``: (from when, value), in the order the changes landed.
    values: dict[str, list[tuple[datetime, Any]]] = field(default_factory=dict)
    #: How far apart the clocks of the API, the results function and the scans may be (0: one clock).
    skew: timedelta = timedelta(0)

    def change(self, change: Change) -> None:
        self.changes.append(change)
        self.replay()

    def replay(self) -> None:
        self.state, self.schedule = JobState.ACTIVE, self.first.schedule
        self.schedules = [self.first.schedule]
        self.epochs, self.payloads = [replace(self.first)], [(self.created_at, self.first_payload)]
        self.pauses, self.paused_at, self.rescheduled_at, self.cancelled_at = [], None, None, None
        first = {"overlap": self.overlap, "catch_up": self.catch_up, "calendar": self.calendar,
                 "jitter_s": self.jitter_s, "timeout_s": self.timeout_s, "retry": self.retry, "topic": self.topic,
                 "delete_after_last": self.delete_after_last, "tags": self.tags}
        self.values = {name: [(self.created_at, value)] for name, value in first.items()}
        for change in sorted(self.changes, key=lambda c: (c.landed, c.order)):
            self._apply(change)

    def between(self, name: str, low: datetime, high: datetime) -> list[Any]:
        """The values field ``name`` had at some instant of [low, high] (at the instant of a change, both)."""
        timeline = self.values[name]
        before = [value for landed, value in timeline if landed < low]
        return before[-1:] + [value for landed, value in timeline if low <= landed <= high] or timeline[:1]

    def ever(self, name: str) -> list[Any]:
        """Every value field ``name`` has had."""
        return [value for _, value in self.values[name]]

    def latest(self, name: str) -> Any:
        return self.values[name][-1][1]

    def same_schedule(self, a: datetime, b: datetime) -> bool:
        """Whether fires ``a`` and ``b`` are both fires of one schedule the job had (one of its epochs)."""
        return any(epoch.holds(a) and epoch.holds(b) for epoch in self.epochs)

    def serial_since(self, t: datetime) -> datetime:
        """Since when the executions published were surely decided under an overlap policy that never lets them
        overlap, up to ``t``: the job's creation if it always had one, else ``POLICY_LAG`` after the change to
        one (a scan may have read the job before it)."""
        never = datetime.max.replace(tzinfo=UTC)
        since = self.created_at
        for landed, policy in self.values["overlap"]:
            if landed > t:
                break
            if policy not in SERIAL:
                since = never
            elif since == never:
                since = landed + POLICY_LAG
        return since

    def _patch(self, change: Change) -> None:
        """A PATCH: its fields from when it landed, then its schedule as a change of schedule."""
        if self.state is not JobState.CANCELLED:  # (a PATCH of a cancelled job is refused)
            for name, value in change.fields.items():
                timeline = self.payloads if name == "payload" else self.values[name]
                timeline.append((change.landed, value))
        if change.schedule is not None:
            self._apply(replace(change, kind="schedule"))

    def _apply(self, change: Change) -> None:
        """A change that lands closes the schedule in effect then; the new one owes its fires from ``at``."""
        state, landed = self.state, change.landed
        if change.kind == "patch":
            self._patch(change)
        elif change.kind == "payload":
            self.payloads.append((landed, change.payload))
        elif change.kind == "schedule" and state is not JobState.CANCELLED:
            assert change.schedule is not None
            self.schedule = change.schedule
            self.schedules.append(change.schedule)
            if state is JobState.ACTIVE:
                self.epochs[-1].until = landed
                self.epochs.append(Epoch(change.schedule, since_of(change.schedule, change.at)))
            else:
                self.rescheduled_at = change.at
        elif change.kind == "pause" and state is JobState.ACTIVE:
            self.epochs[-1].until = landed
            self.state, self.paused_at = JobState.PAUSED, change.at
            self.pauses.append(Window(landed))
        elif change.kind == "resume" and state is JobState.PAUSED:
            assert self.schedule is not None and self.paused_at is not None
            self.pauses[-1].end, self.pauses[-1].catch_up = change.at, change.catch_up
            if change.catch_up:  # the fires since the pause are owed again (of a schedule changed meanwhile: allowed)
                owed_since = max(self.paused_at, self.rescheduled_at or self.paused_at)
                self.epochs.append(Epoch(self.schedule, self.paused_at, owed_since=owed_since))
            else:
                self.epochs.append(Epoch(self.schedule, change.at, strict=True))
            self.state, self.rescheduled_at = JobState.ACTIVE, None
        elif change.kind == "cancel" and state is not JobState.CANCELLED:
            if state is JobState.ACTIVE:
                self.epochs[-1].until = landed
            elif self.pauses:
                self.pauses[-1].end = landed
            self.state, self.cancelled_at = JobState.CANCELLED, landed


def since_of(schedule: Timetable, at: datetime) -> datetime:
    """Where a schedule taken at ``at`` starts owing fires: ``at`` (an ``at`` may be a little in the past)."""
    return min(at, schedule.first) if schedule.kind == "at" and schedule.first is not None else at


@dataclass(eq=False)
class Execution:
    """One attempt of one fire as published, and what its worker answered (``reported_at``: when)."""

    execution_id: str
    job: JobModel
    scheduled_at: datetime
    attempt: int
    trigger: Trigger
    published_at: datetime
    #: The first attempt's trigger (SCHEDULE or MANUAL): a run now at the instant of a fire is a lineage apart.
    lineage: Trigger = Trigger.SCHEDULE
    fate: Fate | None = None
    reported_at: datetime | None = None  # when its worker's result reached the results function
    #: The message's result token, which the worker sends back (every copy of one execution carries one).
    result_token: str | None = None
    applied_at: datetime | None = None  # when that result took effect (its record written)
    #: The timeouts its job had while a scan may have read it for a copy of this execution (its watchdog's).
    timeouts: set[int | None] = field(default_factory=set)

    def __repr__(self) -> str:
        return f"{self.job.name} {self.trigger} {hms(self.scheduled_at)} #{self.attempt}"

    @property
    def deadline(self) -> datetime | None:
        """When its watchdog can fail it at the earliest (jobs with a timeout)."""
        shortest = min((t for t in self.timeouts if t is not None), default=None)
        return None if shortest is None else self.published_at + timedelta(seconds=shortest) - self.job.skew

    @property
    def sure_deadline(self) -> datetime | None:
        """When its watchdog has surely come due (None: it may have none)."""
        if not self.timeouts or None in self.timeouts:
            return None
        return self.published_at + timedelta(seconds=max(t for t in self.timeouts if t is not None)) + self.job.skew

    def could_fail(self, by: datetime) -> bool:
        """Whether it may have failed by ``by``: its worker said so, or it may have timed out (no result had
        taken effect by its deadline)."""
        if self.fate == "failure" and self.reported_at is not None and self.reported_at <= by:
            return True
        deadline = self.deadline
        return deadline is not None and deadline <= by and (self.applied_at is None or self.applied_at >= deadline)

    def earliest_retry(self) -> datetime:
        """The earliest instant its retry can be due: failure, then at least half the base backoff."""
        causes = [t for t in (self.reported_at if self.fate == "failure" else None, self.deadline) if t is not None]
        policy = self.job.retry
        base = min(policy.max_delay_s, policy.initial_delay_s * policy.multiplier ** (self.attempt - 1))
        return min(causes) + timedelta(seconds=base / 2) - self.job.skew

    def why_failed(self) -> str:
        if self.fate == "failure":
            return f"its worker said so at {hms(self.reported_at)}"
        return f"no result within {sorted(self.timeouts, key=str)} s of {hms(self.published_at)}"

    def failed_for_sure(self) -> datetime | None:
        """The instant by which it certainly failed, for a failure the scheduler must act on (not ignored
        because the job was cancelled first); None when it succeeded or it is not certain."""
        cancelled = self.job.cancelled_at
        if self.fate == "failure":
            assert self.applied_at is not None
            return None if cancelled is not None and cancelled <= self.applied_at else self.applied_at
        if self.sure_deadline is not None and self.fate == "never":
            return None if cancelled is not None else self.sure_deadline
        return None

    def retries(self) -> set[bool]:
        """Whether its failure is retried, under each retry policy its job may have been read with when the
        failure was concluded (a worker's: when its result was applied; a timeout's: from its deadline on)."""
        causes = []
        if self.fate == "failure" and self.reported_at is not None:
            causes.append(self.reported_at)
        deadline = self.deadline
        if deadline is not None and (self.applied_at is None or self.applied_at >= deadline):
            causes.append(deadline)  # (its watchdog may have failed it first)
        low = min(causes, default=self.published_at)
        high = self.applied_at if self.fate == "failure" and deadline is None and self.applied_at is not None \
            else datetime.max.replace(tzinfo=UTC)
        return {self.attempt <= policy.max_retries for policy in self.job.between("retry", low - self.job.skew, high)}


#: How far along an execution's record is: it may only move up (a finished execution stays finished; a fire held
#: by its overlap policy is SCHEDULED; one a policy or a calendar did not run ends SKIPPED).
RANK = {ExecutionStatus.SCHEDULED: 0, ExecutionStatus.RUNNING: 1, ExecutionStatus.SUCCESS: 2, ExecutionStatus.FAILED: 2,
        ExecutionStatus.SKIPPED: 2}
#: How long before it publishes (or skips) a fire a scan may have read the calendar it applied (it keeps one
#: 10 s; a slow call in between, as the faults inject, may take up to 45 s more).
CALENDAR_LAG = timedelta(seconds=120)
#: How long before it decides a fire a scan may have read the job whose overlap and catch-up policies it applied,
#: or the timeout its watchdog takes (as for the calendar: slow calls in between).
POLICY_LAG = CALENDAR_LAG
#: How long after whatever delayed the scans (a fault, a missed tick, a resume with catch-up, the scheduler's
#: start) a fire may still count as missed; a catch-up window dropping a fire with nothing of the kind
#: that long before it is dropping a fire no outage left behind.
QUIET = timedelta(minutes=5)
#: How many fires ahead the liveness checks look for one not done.
FIRES_LOOKED_AT = 10_000
#: The topics jobs may name (``jobs`` is every tenant's default).
TOPICS = (JOBS_TOPIC, "jobs-b")
#: Overlap policies under which two executions of a job's schedule never run at once.
SERIAL = (Overlap.SKIP, Overlap.BUFFER_ONE, Overlap.BUFFER_ALL)


@dataclass(frozen=True)
class CalendarVersion:
    """The calendar as an ``Exclude`` op left it, from ``landed`` on (when the op was answered; its write may have
    landed from ``asked`` on): it excludes [start, end) (None: nothing)."""

    landed: datetime
    window: tuple[datetime, datetime] | None
    asked: datetime | None = None

    def excludes(self, fire: datetime) -> bool:
        return self.window is not None and self.window[0] <= fire < self.window[1]


class Reference:
    """What the scheduler owes, from acknowledged operations only, and the checks of what it did."""

    def __init__(self, skew: timedelta = timedelta(0), waived: frozenset[str] = frozenset()) -> None:
        #: How far apart the clocks of the roles may be (0: one clock): instants read on different clocks are
        #: compared with that much slack.
        self.skew = skew
        #: Checks waived by name (``JOBRUNNER_MODEL_WAIVE``), to search past a defect already known.
        self.waived = waived
        #: When something may have delayed the scans (``QUIET``), and the minutes whose tick came (one that did
        #: not is an outage of its own).
        self.disturbances: list[datetime] = [START]
        self.ticked: set[datetime] = set()
        #: Every instant each execution_id was published at.
        self.publications: dict[str, list[datetime]] = {}
        self.jobs: list[JobModel] = []
        #: Changes of jobs not known yet (a bulk change in the middle of their submit), told once they are.
        self.later: dict[str, list[Callable[[JobModel], None]]] = {}
        self.by_id: dict[str, JobModel] = {}
        self.executions: dict[str, Execution] = {}  # by execution_id, in order of first publication
        #: (job, fire, attempt, trigger, lineage) -> its execution_id
        self.copies: dict[tuple[str, datetime, int, Trigger, Trigger], str] = {}
        self.dead_letters: set[str] = set()
        self._seen = 0  # how much of the broker's log has been checked
        #: User operations under way: their messages are judged once the model knows what they did.
        self.changing = 0
        self._deferred: list[tuple[datetime, OutboundMessage]] = []
        #: Fires a backfill ran, to be found among their job's schedules once no change is under way.
        self._backfilled: list[tuple[JobModel, datetime]] = []
        #: The calendar jobs may name, as each ``Exclude`` left it (it starts excluding nothing).
        self.calendar: list[CalendarVersion] = [CalendarVersion(START - timedelta(days=1), None)]

    def calendar_changed(self, calendar: Calendar, landed: datetime, asked: datetime | None = None) -> None:
        window = None
        if calendar.exclusions:
            only = calendar.exclusions[0]
            window = (only.start.replace(tzinfo=UTC), only.end.replace(tzinfo=UTC))  # UTC wall times
        self.calendar.append(CalendarVersion(landed, window, asked))

    def calendars_between(self, low: datetime, high: datetime) -> list[CalendarVersion]:
        """The calendar's versions in effect at some instant of [low, high] (read on a scan's clock, up to ``skew``
        off the one the versions were told on: found by the long search on #31's final code, a calendar changed
        0.2 s before a scan 0.25 s behind skipped a fire by it), the one answered last before it, those answered
        in it, and those asked before its end and answered after it (their write may land before the answer)."""
        high = high + self.skew
        before = [v for v in self.calendar if v.landed <= low]
        in_flight = [v for v in self.calendar if v.asked is not None and v.asked <= high < v.landed]
        return before[-1:] + [v for v in self.calendar if low < v.landed <= high] + in_flight

    def pick(self, index: int) -> JobModel | None:
        return self.jobs[index % len(self.jobs)] if self.jobs else None

    def name(self, job_id: str) -> str:
        job = self.by_id.get(job_id)
        return job.name if job else job_id[:8]

    # -- acknowledged operations ------------------------------------------------------------------------

    def check(self, name: str) -> bool:
        """Whether the check ``name`` is made (not waived)."""
        return name not in self.waived

    def submitted(self, job: Job, new: JobSpec, requested: dict[str, Any]) -> None:
        """A job submitted as ``new``, its schedule as the user wrote it (``requested``, its JSON form)."""
        if job.job_id in self.by_id:
            return
        schedule = timetable(requested, job.created_at)
        model = JobModel(f"J{len(self.jobs) + 1}", job.job_id, new.retry, new.timeout_s, job.created_at,
                         Epoch(schedule, since_of(schedule, job.created_at)), new.payload,
                         calendar=new.calendar is not None, overlap=new.overlap,
                         catch_up=not new.catch_up.replays_all, delete_after_last=new.delete_after_last,
                         jitter_s=new.jitter_s, topic=new.topic or JOBS_TOPIC, tags=dict(new.tags), skew=self.skew)
        model.replay()
        self.jobs.append(model)
        self.by_id[job.job_id] = model
        for told in self.later.pop(job.job_id, []):
            told(model)

    def payload_changed(self, job: JobModel, payload: Any, landed: datetime, order: int) -> None:
        job.change(Change("payload", landed, landed, payload=payload, order=order))

    def rescheduled(self, job: JobModel, requested: dict[str, Any], at: datetime, landed: datetime, order: int,
                    ) -> None:
        job.change(Change("schedule", at, landed, schedule=timetable(requested, at), order=order))

    def patched(self, job: JobModel, fields: dict[str, Any], requested: dict[str, Any] | None, at: datetime,
                landed: datetime, order: int) -> None:
        """A PATCH of ``fields`` (``SETTINGS`` and "payload") and perhaps the schedule (its JSON), decided at ``at``."""
        schedule = timetable(requested, at) if requested is not None else None
        job.change(Change("patch", at, landed, order=order, schedule=schedule, fields=fields))

    def backfilled(self, job: JobModel, fires: list[datetime], at: datetime) -> None:
        """A backfill of ``fires``, requested at ``at``: each is run as its own execution (trigger BACKFILL).

        Each must be a fire of one of the job's schedules. A schedule change under way (a slow write) may
        already be what the backfill read, but the model learns it only when the change is answered: the
        fires are judged then."""
        for fire in fires:
            self._backfilled.append((job, fire))
            execution_id = execution_id_for(job.job_id, fire, 1, Trigger.BACKFILL)
            job.backfills.setdefault(execution_id, []).append(at)
        self._judge_backfills()

    def _judge_backfills(self) -> None:
        if self.changing:
            return
        judged, self._backfilled = self._backfilled, []
        for job, fire in judged:
            assert any(schedule.is_fire(fire) for schedule in job.schedules), (
                f"{job.name}: a backfill ran {hms(fire)}, not a fire of its schedules {job.schedules}")

    def live_recurring(self, store: MemoryJobStore) -> list[JobModel]:
        """The jobs the tenant holds against ``jobs_held``: recurring, not cancelled, not deleted."""
        live = []
        for job in self.jobs:
            stored = store.get_job(USER, job.job_id)
            gone = stored is None or stored.state is JobState.DELETED
            if job.state is not JobState.CANCELLED and not gone and job.schedule and job.schedule.recurring:
                live.append(job)
        return live

    def paused(self, job: JobModel, done: Job, landed: datetime, order: int) -> None:
        assert done.state is JobState.PAUSED and done.paused_at is not None, f"{job.name}: pause answered {done}"
        job.change(Change("pause", done.paused_at, landed, order=order))

    def resumed(self, job: JobModel, done: Job, landed: datetime, order: int, *, catch_up: bool) -> None:
        assert done.state is JobState.ACTIVE, f"{job.name}: resume answered {done.state}"
        job.change(Change("resume", done.updated_at, landed, catch_up=catch_up, order=order))

    def cancelled(self, job: JobModel, done: Job, landed: datetime, order: int) -> None:
        assert done.state is JobState.CANCELLED, f"{job.name}: cancel answered {done.state}"
        job.change(Change("cancel", done.updated_at, landed, order=order))

    def quiet(self, low: datetime, high: datetime) -> bool:
        """Whether nothing may have delayed the scans from ``low`` to ``high``: no fault, and every minute's tick."""
        if any(low <= d <= high for d in self.disturbances):
            return False
        minute = max(low, START).replace(second=0, microsecond=0)
        while minute <= high:
            if minute not in self.ticked:
                return False
            minute += MINUTE
        return True

    def disturbed(self, at: datetime) -> None:
        """Something that may delay the scans happened at ``at`` (``QUIET``)."""
        self.disturbances.append(at)

    def ran_now(self, job: JobModel, row: ScheduledExecution, owed: bool = True) -> None:
        job.manual[row.execution_id] = row.scheduled_at
        if not owed:
            job.unowed.add(row.execution_id)

    def answered(self, execution: Execution, fate: Fate, at: datetime) -> None:
        execution.fate = fate
        execution.reported_at = None if fate == "never" else at

    def applied(self, execution: Execution, at: datetime) -> None:
        execution.applied_at = at

    def unanswered(self) -> list[Execution]:
        return [e for e in self.executions.values() if e.fate is None]

    def answered_list(self) -> list[Execution]:
        return [e for e in self.executions.values() if e.fate in ("success", "failure")]

    # -- safety: checked after every step ---------------------------------------------------------------

    def observe(self, log: list[tuple[datetime, OutboundMessage]]) -> None:
        """Check each message published since the last call: one execution_id per fire and attempt, nothing
        published that is not owed or allowed (pauses, cancel, retries), the payload of its time.

        While a user operation is under way (a slow write: a scan runs in the middle of it), its effect may
        already show in what is published, but the model learns it only when the operation is answered:
        the messages of that time are judged after it."""
        self._judge_backfills()
        pending, self._deferred = [*self._deferred, *log[self._seen:]], []
        self._seen = len(log)
        for published_at, message in pending:
            value = message.value
            if message.topic == DLQ_TOPIC:
                self.dead_letters.add(value["execution_id"])
                continue
            if self.changing:
                self._deferred.append((published_at, message))
                continue
            assert message.topic in TOPICS, f"published to {message.topic}"
            assert value["job_id"] in self.by_id, f"published for a job never acknowledged: {value}"
            job = self.by_id[value["job_id"]]
            if value.get("cancel"):  # overlap policy cancel_other: it names an execution of this job, published
                target = self.executions.get(value["execution_id"])
                policies = job.between("overlap", published_at - POLICY_LAG, published_at)
                assert Overlap.CANCEL_OTHER in policies, f"{hms(published_at)} a cancel message of {job.name} " \
                                                         f"under overlap {policies}"
                # It names one of the job's executions: one published, or one a scan recorded started and died
                # before publishing (its write-ahead record says RUNNING: a cancel no worker acts on, accepted in
                # docs/reliability.md, #31)
                named = utc_instant(value["scheduled_at"])
                trigger = Trigger.SCHEDULE if value["attempt"] == 1 else Trigger.RETRY
                own = execution_id_for(job.job_id, named, value["attempt"], trigger)
                assert (target is not None and target.job is job) or value["execution_id"] == own, (
                    f"{hms(published_at)} a cancel message of {job.name} names {value['execution_id']}, "
                    "not one of its executions")
                continue
            fire = utc_instant(value["scheduled_at"])
            attempt, trigger, execution_id = value["attempt"], Trigger(value["trigger"]), value["execution_id"]
            what = f"{hms(published_at)} published {job.name} {trigger} {hms(fire)} #{attempt}"
            lineage = self._lineage(job, fire, attempt, trigger, execution_id, what)
            first_id = self.copies.setdefault((job.job_id, fire, attempt, trigger, lineage), execution_id)
            assert first_id == execution_id, f"{what}: execution_id {execution_id}, an earlier copy had {first_id}"
            execution = self.executions.setdefault(
                execution_id, Execution(execution_id, job, fire, attempt, trigger, published_at, lineage,
                                        result_token=value["result_token"]))
            assert execution.result_token == value["result_token"], f"{what}: another result token than its copy's"
            assert (execution.job, execution.scheduled_at, execution.attempt) == (job, fire, attempt), (
                f"{what}: its execution_id {execution_id} was published before for {execution}")
            execution.timeouts.update(job.between("timeout_s", published_at - POLICY_LAG, published_at))
            due = self._check_allowed(job, execution, published_at, what)
            if trigger is Trigger.SCHEDULE and all(job.between("calendar", published_at - CALENDAR_LAG, published_at)):
                versions = self.calendars_between(published_at - CALENDAR_LAG, published_at)
                assert not all(v.excludes(fire) for v in versions), (
                    f"{what}, but its calendar excluded it ({versions})")
            if execution.published_at == published_at and lineage is Trigger.SCHEDULE:  # its first publication
                self._check_serial(job, execution, what)
            if trigger is Trigger.BACKFILL and self.check("backfill_again"):
                self._check_backfill_once(job, execution, published_at, what)
            self.publications.setdefault(execution_id, []).append(published_at)
            allowed = self._payloads_between(job, due - self.skew, published_at)
            assert value["payload"] in allowed, (
                f"{what}: payload {value['payload']}, but from its due instant {hms(due)} until then the "
                f"job's payload was {' or '.join(map(str, allowed))}")
            topics = job.between("topic", due - self.skew, published_at)
            assert message.topic in topics, f"{what} to {message.topic}, but the job's topic was {topics}"

    @staticmethod
    def _check_backfill_once(job: JobModel, execution: Execution, published_at: datetime, what: str) -> None:
        """A backfill asked for again runs no fire a second time (its id is the fire's): no copy is published
        after a repeated request for an execution whose result had already taken effect."""
        if execution.published_at == published_at or execution.applied_at is None:
            return
        again = [at for at in job.backfills.get(execution.execution_id, [])
                 if execution.applied_at <= at <= published_at]
        assert not again, (f"{what} again, after its result took effect at {hms(execution.applied_at)}: the "
                           f"backfill asked for again at {hms(again[0])} ran it a second time")

    def _check_serial(self, job: JobModel, execution: Execution, what: str) -> None:
        """Under skip and the buffer policies no execution of the job's schedule starts while another one has
        not ended (reported, with no retry to come; or could have timed out with none left); under buffer_all
        the fires start in the order of their fires."""
        t = execution.published_at
        policies = job.between("overlap", t - POLICY_LAG, t)  # (the policy a scan read the job with)
        if any(p not in SERIAL for p in policies) or execution.trigger is not Trigger.SCHEDULE:
            return  # (a retry is not a fire: the policy held the fires after it until it ended)
        fewest_retries = min(policy.max_retries for policy in job.ever("retry"))
        mine = [e for e in self.executions.values() if e.job is job and e.lineage is Trigger.SCHEDULE
                and e is not execution and e.published_at <= t]
        # Once a policy that lets executions overlap gave way to a serial one, the executions started before
        # may still run: the policy waits for the fire before this one only.
        since = job.serial_since(t)
        before = max((e.scheduled_at for e in mine if e.scheduled_at < execution.scheduled_at), default=None)
        mine = [e for e in mine if e.published_at >= since or e.scheduled_at == before]
        for other in mine:
            if any(e.scheduled_at == other.scheduled_at and e.attempt == other.attempt + 1 for e in mine):
                continue  # its retry is the one that counts
            reported = other.applied_at is not None and other.applied_at <= t
            succeeded = reported and other.fate == "success"
            timed_out = other.deadline is not None and other.deadline <= t
            failed = (reported and other.fate == "failure") or (timed_out and not succeeded)
            ended = succeeded or (failed and other.attempt > fewest_retries)
            assert ended, (f"{what} under overlap {'/'.join(p.value for p in policies)}, but {other} (published "
                           f"at {hms(other.published_at)}) had not ended")
        if all(p is Overlap.BUFFER_ALL for p in policies) and execution.attempt == 1:
            # In the order of their fires, among the fires of one schedule: a schedule changed to fire before a
            # fire of the old one that went out first (the change landed after it) has nothing to be in order
            # with (found by the long search: a PATCH to an instant 2 s past, whose write landed 12 s late).
            later = [e for e in mine if e.attempt == 1 and e.scheduled_at > execution.scheduled_at
                     and job.same_schedule(e.scheduled_at, execution.scheduled_at)]
            assert not later, f"{what} under buffer_all, after the later fire {later[0]}"

    @staticmethod
    def _lineage(
        job: JobModel, fire: datetime, attempt: int, trigger: Trigger, execution_id: str, what: str
    ) -> Trigger:
        """The lineage a retry belongs to, told by its id: the schedule's, a run now's and a backfill's differ."""
        if trigger in (Trigger.SCHEDULE, Trigger.MANUAL, Trigger.BACKFILL):
            return trigger
        ids = {execution_id_for(job.job_id, fire, attempt, trigger, lineage): lineage
               for lineage in (Trigger.SCHEDULE, Trigger.MANUAL, Trigger.BACKFILL)}
        assert execution_id in ids, f"{what}: execution_id {execution_id} is not one of that fire's and attempt's"
        return ids[execution_id]

    def _check_allowed(self, job: JobModel, execution: Execution, published_at: datetime, what: str) -> datetime:
        """Fail unless the execution may be published; returns its due instant (a lower bound for retries)."""
        fire = execution.scheduled_at
        if execution.trigger is Trigger.SCHEDULE:
            assert execution.attempt == 1, f"{what}: a schedule fire is attempt 1"
            assert any(epoch.holds(fire, self.skew) for epoch in job.epochs), (
                f"{what}, but {self._why_not(job, fire)}")
            return fire
        if execution.trigger is Trigger.MANUAL:
            assert execution.execution_id in job.manual, f"{what}: no acknowledged run now is due then"
            assert job.cancelled_at is None or fire <= job.cancelled_at + self.skew, (
                f"{what}: due after the job's cancel at {hms(job.cancelled_at)}")
            return fire
        if execution.trigger is Trigger.BACKFILL:
            asked = job.backfills.get(execution.execution_id)
            assert asked, f"{what}: no acknowledged backfill asked for that fire"
            assert job.cancelled_at is None or asked[0] <= job.cancelled_at + self.skew, (
                f"{what}: asked for after the job's cancel at {hms(job.cancelled_at)}")
            return asked[0]
        assert execution.trigger is Trigger.RETRY, f"{what}: unexpected trigger"
        failed = [e for e in self.executions.values() if e.job is job and e.scheduled_at == fire
                  and e.attempt == execution.attempt - 1 and e.lineage is execution.lineage
                  and e.could_fail(published_at)]
        assert failed, f"{what}: a retry, but attempt {execution.attempt - 1} of that fire never failed"
        due = min(e.earliest_retry() for e in failed)
        assert job.cancelled_at is None or due <= job.cancelled_at + self.skew, (
            f"{what}: due at {hms(due)} at the earliest, after the job's cancel at {hms(job.cancelled_at)}")
        return due

    @staticmethod
    def _why_not(job: JobModel, fire: datetime) -> str:
        if job.cancelled_at is not None and fire > job.cancelled_at:
            return f"it is due after the job's cancel at {hms(job.cancelled_at)}"
        for pause in job.pauses:
            if pause.start < fire and (pause.end is None or fire < pause.end) and not pause.catch_up:
                return f"it is due while the job was paused (from {hms(pause.start)} to {hms(pause.end)})"
        return f"it is not a fire of the job's schedules when due: {job.epochs}"

    @staticmethod
    def _payloads_between(job: JobModel, low: datetime, high: datetime) -> list[Any]:
        """The payloads the job had at some instant in [low, high] (at the instant of a change, both)."""
        before = [payload for landed, payload in job.payloads if landed < low]
        return before[-1:] + [payload for landed, payload in job.payloads if low <= landed <= high]

    def observe_history(self, store: MemoryJobStore) -> None:
        """An execution's record never moves backwards (finished -> running or scheduled) nor disappears."""
        for job in self.jobs:
            records = {r.execution_id: r for r in store.history_page(job.job_id, 100_000)}
            for execution_id, before in job.history.items():
                after = records.get(execution_id)
                label = f"{job.name} {before.trigger} {hms(before.scheduled_at)} #{before.attempt}"
                assert after is not None, f"the history record of {label} ({before.status}) was overwritten: " + str(
                    [f"{r.trigger} {r.status}" for r in records.values()
                     if (r.scheduled_at, r.attempt) == (before.scheduled_at, before.attempt)])
                assert RANK[after.status] >= RANK[before.status], (
                    f"the history record of {label} went back from {before.status} to {after.status}")
            if self.changing:  # a change under way may explain a skip: judged once it is answered
                job.history = {k: r for k, r in records.items()
                               if k in job.history or r.status is not ExecutionStatus.SKIPPED}
                continue
            for record in records.values():
                if record.status is ExecutionStatus.SKIPPED and self.check("skipped_published"):
                    self._check_not_run(job, record)
                if record.status is ExecutionStatus.SKIPPED and record.execution_id not in job.history:
                    self._check_skip(job, record)
            job.history = records

    def _check_not_run(self, job: JobModel, record: ExecutionRecord) -> None:
        """A fire recorded SKIPPED (not run, for a reason) is never published after it was recorded."""
        skipped_at = (record.finished_at or record.scheduled_at) + self.skew
        later = [t for t in self.publications.get(record.execution_id, []) if t > skipped_at]
        assert not later, (f"{job.name} {hms(record.scheduled_at)} was recorded SKIPPED at {hms(record.finished_at)} "
                           f"({record.error}), then published at {hms(later[0])}")

    def _check_skip(self, job: JobModel, record: ExecutionRecord) -> None:
        """A fire is recorded SKIPPED only for a reason the job has: its calendar excluded it, its overlap
        policy skips, or it was missed and its catch-up window drops it."""
        reason, label = skip_reason(record), f"{job.name} {hms(record.scheduled_at)} ({record.error})"
        assert record.trigger is Trigger.SCHEDULE and record.published_at is None, f"SKIPPED, not a fire: {label}"
        at = record.finished_at or record.scheduled_at
        if reason == "calendar":
            versions = self.calendars_between(at - CALENDAR_LAG, at)
            assert any(job.between("calendar", at - CALENDAR_LAG, at)) and any(
                v.excludes(record.scheduled_at) for v in versions), (
                f"skipped for a calendar that did not exclude it: {label}; calendar {versions}")
        elif reason == "overlap":  # (buffer_all: only once its buffer is full)
            policies = job.between("overlap", at - POLICY_LAG, at)
            assert any(p in (Overlap.SKIP, Overlap.BUFFER_ONE) for p in policies) or (
                Overlap.BUFFER_ALL in policies and "the buffer is full" in (record.error or "")), (
                f"skipped under overlap {'/'.join(p.value for p in policies)}: {label}")
        elif reason == "catch_up":
            assert any(job.between("catch_up", at - POLICY_LAG, at)) and at - record.scheduled_at > MISFIRE_GRACE, (
                f"dropped, not missed: {label}")
            if self.check("missed_quietly"):
                assert not self.quiet(record.scheduled_at - QUIET, at), (
                    f"dropped as missed, but nothing delayed the scans in the {QUIET} before it (no fault, every "
                    f"minute ticked): {label}, at {hms(at)}")
        else:
            raise AssertionError(f"SKIPPED for no known reason: {label}")

    def accounted(self, job: JobModel, store: MemoryJobStore, horizon: datetime) -> Callable[[datetime], bool]:
        """Whether a fire of ``job`` is explained by a record without a publish: SKIPPED at that fire, dropped
        with a missed fire before it (up to the fire the schedule resumed from), or held by a buffer policy
        while it waits (under buffer_all, executions slower than the period make a queue that only grows:
        ``check_queues`` checks that it moves)."""
        records = store.history_page(job.job_id, 100_000)
        skipped = {r.scheduled_at for r in records if r.status is ExecutionStatus.SKIPPED}
        drops = [(r.scheduled_at, r.next_fire_at) for r in records
                 if r.status is ExecutionStatus.SKIPPED and skip_reason(r) == "catch_up"]
        held = {r.scheduled_at for r in records if r.status is ExecutionStatus.SCHEDULED and r.published_at is None
                and r.trigger is Trigger.SCHEDULE}

        def stretch(low: datetime, fire: datetime) -> bool:
            """Whether ``fire`` is of the schedule ``low`` was a fire of (a drop "to its end" of a schedule since
            replaced explains none of the next one's fires)."""
            # (the latest schedule whose fire ``low`` is: at the instant one ends and the next begins, as at a
            # pause's resume with catch-up, the drop was decided under the one that begins)
            epoch = next((e for e in reversed(job.epochs) if e.holds(low, self.skew)), None)
            return epoch is None or epoch.until is None or fire <= epoch.until + self.skew

        def explains(fire: datetime) -> bool:
            return fire in skipped or fire in held or any(
                low < fire and (high is None or fire < high) and stretch(low, fire) for low, high in drops)

        return explains

    def check_queues(self, store: MemoryJobStore, since: datetime) -> None:
        """A job with fires held by its buffer policy has its queue moving: a fire of its schedule was published
        since ``since`` (the drain, when every execution reports), or its oldest held fire came after that."""
        for job in self.jobs:
            buffered = job.latest("overlap") in (Overlap.BUFFER_ONE, Overlap.BUFFER_ALL)
            if job.state is not JobState.ACTIVE or not buffered:
                continue
            held = sorted(r.scheduled_at for r in store.history_page(job.job_id, 100_000)
                          if r.status is ExecutionStatus.SCHEDULED and r.published_at is None
                          and r.trigger is Trigger.SCHEDULE and r.job_version == self._version(store, job))
            if not held or held[0] >= since:
                continue
            if None in job.ever("timeout_s") and any(
                    e.job is job and e.lineage is Trigger.SCHEDULE and e.fate == "never"
                    for e in self.executions.values()):
                continue  # an execution that never reports (and has no timeout) holds the queue for ever
            moved = [e for e in self.executions.values() if e.job is job and e.trigger is Trigger.SCHEDULE
                     and e.published_at >= since]
            assert moved, f"{job.name}: its fires held from {hms(held[0])} are not released ({len(held)} held)"

    @staticmethod
    def _version(store: MemoryJobStore, job: JobModel) -> int | None:
        stored = store.get_job(USER, job.job_id)
        return stored.schedule_version if stored is not None else None

    def check_owed(self, horizon: datetime, store: MemoryJobStore) -> None:
        """Every fire owed up to ``horizon`` was published, or recorded not run for a reason its job has (its
        calendar, its overlap policy, its catch-up window; held by a buffer policy near the end); so was every
        manual run, retry and dead letter."""
        for job in self.jobs:
            published = {fire for (job_id, fire, _, trigger, _) in self.copies
                         if job_id == job.job_id and trigger is Trigger.SCHEDULE}
            if job.state is JobState.ACTIVE:
                epoch = job.epochs[-1]
                explains = self.accounted(job, store, horizon)
                missing = [hms(f) for f in epoch.owed(horizon) if f not in published and not explains(f)]
                assert not missing, f"{job.name}: fires {missing} of {epoch} were never published nor accounted for"
            if job.cancelled_at is None:
                lost = [hms(at) for execution_id, at in job.manual.items()
                        if execution_id not in self.executions and execution_id not in job.unowed]
                assert not lost, f"{job.name}: the manual runs due at {lost} were never published"
                lost = [hms(at[0]) for execution_id, at in job.backfills.items() if execution_id not in self.executions]
                assert not lost, f"{job.name}: the backfill runs asked for at {lost} were never published"
        for execution in list(self.executions.values()):
            failed_at = execution.failed_for_sure()
            if failed_at is None or failed_at > horizon - 2 * MINUTE:
                continue
            job = execution.job
            retried = execution.retries()
            retry = (job.job_id, execution.scheduled_at, execution.attempt + 1, Trigger.RETRY, execution.lineage)
            if len(retried) > 1:  # its job's retry policy changed about then: either is right
                assert job.cancelled_at is not None or retry in self.copies or (
                    execution.execution_id in self.dead_letters), (
                    f"{execution} failed ({execution.why_failed()}), but was neither retried nor dead-lettered")
                continue
            if retried == {True}:
                if job.cancelled_at is None:
                    retry = (job.job_id, execution.scheduled_at, execution.attempt + 1, Trigger.RETRY,
                             execution.lineage)
                    assert retry in self.copies, (
                        f"{execution} failed ({execution.why_failed()}), but its retry was never published")
            else:
                assert execution.execution_id in self.dead_letters, (
                    f"{execution} failed ({execution.why_failed()}) with no retry left, but was never dead-lettered")

    def check_next_runs(self, store: MemoryJobStore, leases: MemoryLeaseStore, last_bucket: datetime) -> None:
        """Every active job with fires left has its next run ahead of the scans, in a row some scan will read."""
        for job in self.jobs:
            epoch = job.epochs[-1]
            if job.state is not JobState.ACTIVE:
                continue
            # A scan woken ahead of its minute (a next fire written into it) may have published fires after
            # the last bucket dispatched: the next run is the first fire from there not published yet.
            # With a jitter window a fire is due up to that long after it (``due_of``), and is planned when the
            # fire before it is published: a next run may be up to a window behind the last bucket (a window
            # wider than the gap between fires makes each fire wait for the one before).
            published = {fire for (job_id, fire, attempt, trigger, _) in self.copies
                         if job_id == job.job_id and trigger is Trigger.SCHEDULE and attempt == 1}
            explains = self.accounted(job, store, last_bucket)

            def done(fire: datetime) -> bool:
                return fire in published or explains(fire)  # noqa: B023 - called within this iteration

            stored = store.get_job(USER, job.job_id)
            if stored is None or stored.state is JobState.DELETED:  # deleted: only if it asked, with no fire left
                assert any(job.ever("delete_after_last")), f"{job.name} is gone, and it never asked to be deleted"
                ahead = epoch.first_from(START)
                for _fire in range(FIRES_LOOKED_AT):
                    if ahead is None or not done(ahead):
                        break
                    ahead = epoch.first_from(ahead + MS)
                assert ahead is None, f"{job.name} was deleted with its fire {hms(ahead)} still owed"
                continue
            window = timedelta(seconds=max(jitter or 0 for jitter in [stored.spec.jitter_s, *job.ever("jitter_s")]))
            upcoming = epoch.first_from(last_bucket + MINUTE - window)
            for _fire in range(FIRES_LOOKED_AT):
                if upcoming is None or not done(upcoming):
                    break
                upcoming = epoch.first_from(upcoming + MS)
            else:
                upcoming = None  # every fire explained (a drop to the schedule's end)
            if upcoming is None:
                continue
            stored = with_runs(stored, store.latest_records([job.job_id], RUN_RECORDS)[job.job_id])
            next_run = stored.next_run_at
            assert next_run is not None and last_bucket - window <= next_run <= upcoming, (
                f"{job.name}: next_run_at {hms(next_run)} is stale; the scans are done up to {last_bucket:%H:%M} "
                f"and its next fire is {hms(upcoming)}")
            rows = [r for r in store.rows.values() if r.job_id == job.job_id and r.trigger is Trigger.SCHEDULE
                    and r.scheduled_at == next_run and r.job_version == stored.schedule_version]
            closed = {(p.segment, p.bucket) for p in leases.partitions((r.segment, r.bucket) for r in rows)
                      if p.done}
            seen = [(r.segment, f"{r.bucket:%H:%M}", r.lane.value, r.job_version) for r in rows]
            assert any((r.segment, r.bucket) not in closed for r in rows), (
                f"{job.name}: its next run {hms(next_run)} has no row of schedule version {stored.schedule_version}"
                f" that a scan will read (rows {seen}): the job is dead")
