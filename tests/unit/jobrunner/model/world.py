"""The world of the model test: the whole scheduler on memory adapters and virtual time, and what drives it.

The services are built by ``wiring.Container`` on ports wrapped by ``faults.Faulty``, with the clock and
the scans of ``simulation.Simulation``: one container per role (the API, the results function, the
scans on two hosts, the tick), each on a clock of its own that may be off true time by a fixed amount
within ``domain.placement.CLOCK_SKEW`` of the others (``Skew``). ``World`` drives them: user operations
(retried until acknowledged, as a user does; refusals, such as a tenant's limit, are answers too),
minutes with their tick (the scans it dispatches then run as time goes on), worker results, and the
final drain without faults; it tells ``reference.Reference`` each acknowledged operation and each
published message. The operations are small dataclasses so that Hypothesis can draw them and print a
failing run as readable steps.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import json
import logging
import random
import uuid
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from hypothesis import note

from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.quotas.memory import MemoryTenantQuotas
from jobrunner.adapters.stores.calendars import MemoryCalendarStore
from jobrunner.adapters.stores.changes import MemoryChangeLog
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.config import Settings
from jobrunner.domain.calendars import calendar_from_dict
from jobrunner.domain.errors import (
    Conflict,
    InvalidField,
    InvalidFields,
    JobNotFound,
    LimitReached,
    Unavailable,
)
from jobrunner.domain.jobs import Lane
from jobrunner.domain.limits import Standing
from jobrunner.domain.policies import CatchUp, Overlap
from jobrunner.domain.schedules import schedule_from_dict
from jobrunner.domain.selection import JobFilter
from jobrunner.domain.spec import JobSpec, RetryChange, RetryPolicy, SpecChange
from jobrunner.domain.time import minute_bucket, rfc3339
from jobrunner.ports import Clock, Invoker, PublishError
from jobrunner.services.results import WorkerReport
from jobrunner.services.wake import NoWaker
from jobrunner.wiring import Container
from tests.unit.jobrunner.model.faults import (
    WRITES,
    Call,
    Crash,
    Fault,
    FaultPlan,
    Faulty,
    Glitch,
    InjectedUnavailable,
    Injector,
    Landing,
    compact_repr,
    jobs_named,
    landings,
)
from tests.unit.jobrunner.model.reference import (
    MINUTE,
    TOPICS,
    USER,
    Reference,
    hms,
)
from tests.unit.jobrunner.model.simulation import Simulation
from tests.unit.jobrunner.model.timetables import START

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from datetime import datetime

    from jobrunner.domain.jobs import Job, ScheduledExecution
    from jobrunner.domain.schedules import Schedule
    from jobrunner.ports import OutboundMessage, ScanRequest
    from jobrunner.services.jobs import Commands, JobService
    from tests.unit.jobrunner.model.reference import Execution, Fate, JobModel

MAX_JOBS = 6
#: The tenant's standing limits where the example counts them (``World(quotas=True)``).
LIMITS = {"jobs_held": 4, "executions_per_minute": 30}
#: The tags jobs carry (``Submit.team``), which a bulk change selects them by.
TEAM = "team"


# -- clocks --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class Skew:
    """How far (ms) the clock of each role is off true time: the API's, the results function's, the scans' (two
    hosts: scans take turns) and the tick's. Within ``domain.placement.CLOCK_SKEW`` of one another."""

    api: int = 0
    results: int = 0
    scans: int = 0
    other_scans: int = 0
    tick: int = 0

    __repr__ = compact_repr

    @property
    def spread(self) -> timedelta:
        offsets = [getattr(self, f.name) for f in fields(self)]
        return timedelta(milliseconds=max(offsets) - min(offsets))


class SkewedClock(Clock):
    """The simulation's clock as a host ``offset`` off true time reads it (and sleeps on it)."""

    def __init__(self, base: Simulation, offset_ms: int) -> None:
        self._base = base
        self._offset = timedelta(milliseconds=offset_ms)

    def now(self) -> datetime:
        return self._base.now() + self._offset

    def sleep_until(self, instant: datetime) -> None:
        self._base.sleep_until(instant - self._offset)


#: The writes of the API (a PLANNED row the API writes must land before the scan of its partition starts).
API_WRITES = ("store.create_job", "store.create_jobs", "store.update_job")


def row_key(row: ScheduledExecution) -> tuple[Any, ...]:
    """A scheduled row's key in ``MemoryJobStore.rows``."""
    return (row.bucket, row.segment, row.lane, row.due_at, row.job_id, row.execution_id, row.job_version)


def scheduled_rows(target: str, args: tuple[Any, ...]) -> list[Any]:
    """The scheduled rows a store call writes."""
    if not args:
        return []
    if target in ("store.create_job", "store.update_job"):
        rows = args[1] if len(args) > 1 else []
        return [rows] if not isinstance(rows, list | tuple) else list(rows)
    if target == "store.create_jobs":
        return [row for _, row in args[0] if row is not None]
    if target == "store.write_scheduled":
        return list(args[0])
    if target == "store.settle_published":
        return [row for c in args[0] for row in (c.following, c.watchdog) if row is not None]
    if target == "store.write_outcomes":
        return [o.retry for o in args[0] if o.retry is not None]
    return []


# -- the broker and the invoker ----------------------------------------------------------------------------


class RecordingPublisher(MemoryPublisher):
    """The broker: keeps every message it acknowledged, with the clock's time."""

    def __init__(self, clock: Simulation, on_publish: Callable[[datetime, OutboundMessage], None]) -> None:
        super().__init__()
        self.clock = clock
        self.log: list[tuple[datetime, OutboundMessage]] = []
        self._on_publish = on_publish

    def publish(self, messages: Any, *args: Any, **kwargs: Any) -> None:
        super().publish(messages)
        now = self.clock.now()
        for message in messages:
            self.log.append((now, message))
            self._on_publish(now, message)


class ScanInvoker(Invoker):
    """Async invoke: each requested scan (a tick's dispatch, a writer's wake) starts at once, as a task of the
    simulation."""

    def __init__(self, world: World) -> None:
        self._world = world

    def invoke_scan(self, request: ScanRequest) -> None:
        self._world.start_scan(request)


# -- what users and workers do -----------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class Spec:
    """A schedule as a user writes it (its JSON form), relative to the instant of the request."""

    kind: Literal["at", "every", "cron", "iso8601"]
    seconds: int = 30  # at: offset from now; every, iso8601: the period
    start: int | None = None  # every, iso8601: the start's offset from now (every: None, one period after now)
    cron: str = "*/1 * * * *"
    timezone: str = "UTC"
    count: int = 5  # iso8601: how many fires
    #: every, cron: an end condition, at most this many fires from the request (``count``)
    fires: int | None = None

    __repr__ = compact_repr

    def build(self, now: datetime) -> Schedule:
        return schedule_from_dict(self.json(now))

    def json(self, now: datetime) -> dict[str, Any]:
        """The schedule as the user sends it, at ``now`` (the product reads it with ``build``, the reference with
        its own ``timetables``)."""

        def instant(seconds: int) -> str:
            return rfc3339(now + timedelta(seconds=seconds))

        data: dict[str, Any]
        if self.kind == "at":
            data = {"at": instant(self.seconds)}
        elif self.kind == "every":
            data = {"every": f"PT{self.seconds}S"} | ({} if self.start is None else {"start": instant(self.start)})
        elif self.kind == "cron":
            data = {"cron": self.cron, "timezone": self.timezone}
        else:
            data = {"iso8601": f"R{self.count}/{instant(self.start or 0)}/PT{self.seconds}S"}
        if self.fires is not None and self.kind in ("every", "cron"):
            data = {**data, "count": self.fires}
        return data


class Op:
    """Something a user or a worker does; ``run`` does it to the world, which tells the model once it is
    acknowledged. Ops on a job pick it by index among the model's jobs (modulo their number)."""

    __repr__ = compact_repr

    def run(self, world: World) -> None:
        raise NotImplementedError


@dataclass(frozen=True, repr=False)
class Submit(Op):
    spec: Spec
    retries: int = 0
    timeout_s: int | None = None
    #: A window after each fire within which it is due: a pause or a change landing in it drops the fire,
    #: as one landing before a late scan reached it (the reference owes only fires of the epoch in force).
    jitter_s: int | None = None
    #: Names the calendar the ``Exclude`` ops change (recurring jobs only).
    calendar: bool = False
    overlap: str = "allow_all"
    #: The catch-up window: None (replay every missed fire), "latest" (most 1) or "window" (90 s).
    catch_up: str | None = None
    delete_after_last: bool = False
    glitch: Glitch | None = None
    #: Its tag ``team`` (a bulk change selects jobs by it), and its topic (None: the tenant's default).
    team: str | None = None
    topic: str | None = None

    def run(self, world: World) -> None:
        if len(world.model.jobs) >= MAX_JOBS:
            return
        new, requested = self.new_job(world)
        key = f"submit-{world.serial()}"  # the retried request is the same request: same key, same body
        done = world.call(self, lambda: world.api.submit(USER, new, idempotency_key=key))
        if done is not None:
            world.model.submitted(done[0], new, requested)
            return
        # Refused: a retry with the key of an attempt that created the job must answer that job (201 or 200).
        created = [job_id for plan in world.plans for landing in plan.writes if landing.target == "store.create_job"
                   for job_id in landing.jobs]
        stored = world.store.get_job(USER, created[0]) if created else None
        if stored is not None:
            assert not world.model.check("idempotent_retry"), (
                f"{self!r} was refused when retried with its idempotency key, though its first attempt created "
                f"job {stored.job_id[:8]}, which stands")
            world.model.submitted(stored, new, requested)

    def new_job(self, world: World) -> tuple[JobSpec, dict[str, Any]]:
        """The job to submit, and its schedule as the user wrote it."""
        requested = self.spec.json(world.clock.now())
        schedule = schedule_from_dict(requested)
        return JobSpec(schedule, {"v": world.serial()}, retry=retry_policy(self.retries), timeout_s=self.timeout_s,
                      jitter_s=self.jitter_s, calendar=CALENDAR if self.calendar and schedule.recurring else None,
                      overlap=Overlap(self.overlap), catch_up=CATCH_UPS[self.catch_up],
                      delete_after_last=self.delete_after_last, tags={TEAM: self.team} if self.team else {},
                      topic=self.topic), requested


def retry_policy(retries: int) -> RetryPolicy:
    return RetryPolicy(max_retries=retries, initial_delay_s=10, multiplier=2, max_delay_s=40)


@dataclass(frozen=True, repr=False)
class SubmitMany(Op):
    """A batch submit (``POST /jobs/batch``) of ``items`` (their glitches unused), each with an idempotency key
    when ``keyed``. A batch without keys that fails part-way leaves the jobs written before the failure, which
    the user never learns of: the system holds them all the same, and so does the model."""

    items: tuple[Submit, ...]
    keyed: bool = True
    glitch: Glitch | None = None

    def run(self, world: World) -> None:
        items = self.items[:MAX_JOBS - len(world.model.jobs)]
        if not items:
            return
        news = [item.new_job(world) for item in items]
        keyed = [(new, f"batch-{world.serial()}" if self.keyed else None) for new, _ in news]
        done = world.call(self, lambda: world.api.submit_many(USER, keyed))
        answered = [job for job, _ in done] if done is not None else []
        by_payload = {json.dumps(new.payload): (new, requested) for new, requested in news}
        landed = {job_id for target in ("store.create_job", "store.create_jobs") for plan in world.plans
                  for landing in plan.writes if landing.target == target for job_id in landing.jobs}
        for job_id in sorted(landed - {job.job_id for job in answered}):  # written, never answered
            stored = world.store.get_job(USER, job_id)
            if stored is not None and json.dumps(stored.spec.payload) in by_payload:
                world.say(f"    {job_id[:8]} was written by an attempt that failed")
                answered.append(stored)
        for job in answered:
            world.model.submitted(job, *by_payload[json.dumps(job.spec.payload)])


#: The tenant's calendar jobs may name; ``Exclude`` replaces its exclusion.
CALENDAR = "off"
CATCH_UPS: dict[str | None, CatchUp] = {None: CatchUp(), "latest": CatchUp(most=1), "window": CatchUp(window_s=90)}


@dataclass(frozen=True, repr=False)
class Exclude(Op):
    """The calendar is replaced: it excludes ``length`` seconds from ``start`` seconds after now (None: nothing)."""

    start: int | None = None
    length: int = 30
    glitch: Glitch | None = None

    def run(self, world: World) -> None:
        now = world.clock.now()
        window = None if self.start is None else (now + timedelta(seconds=self.start),
                                                  now + timedelta(seconds=self.start + self.length))
        exclude = [] if window is None else [{"from": f"{window[0]:%Y-%m-%dT%H:%M:%S}",
                                              "to": f"{window[1]:%Y-%m-%dT%H:%M:%S}"}]
        done = world.call(self, lambda: world.container.calendar_admin.put(USER, CALENDAR, {"exclude": exclude}))
        if done is not None:
            world.model.calendar_changed(done[0], world.clock.now(), asked=now)


@dataclass(frozen=True, repr=False)
class Payload(Op):
    """A PATCH of the payload only."""

    job: int
    glitch: Glitch | None = None

    def run(self, world: World) -> None:
        if (job := world.model.pick(self.job)) is None:
            return
        payload = {"v": world.serial()}
        changes = SpecChange(payload=payload)
        done = world.call(self, lambda: world.api.change(USER, job.job_id, changes))
        world.changes_of(job, done, lambda _, landed, order: world.model.payload_changed(job, payload, landed, order))


@dataclass(frozen=True, repr=False)
class Reschedule(Op):
    """A PATCH of the schedule."""

    job: int
    spec: Spec
    glitch: Glitch | None = None

    def run(self, world: World) -> None:
        if (job := world.model.pick(self.job)) is None:
            return
        requested = self.spec.json(world.clock.now())
        schedule = schedule_from_dict(requested)
        done = world.call(self, lambda: world.api.change(USER, job.job_id, SpecChange(schedule=schedule)))
        world.changes_of(job, done, lambda written, landed, order: world.model.rescheduled(
            job, requested, written.updated_at, landed, order))


@dataclass(frozen=True, repr=False)
class Patch(Op):
    """A PATCH of any of the job's fields (None, False: left as it is): a schedule, a new payload, the overlap
    policy, the catch-up window ("all": replay every missed fire), the calendar (False: none), the jitter and
    the timeout (0: none), the retries, the topic, delete after last, the tag ``team``."""

    job: int
    schedule: Spec | None = None
    payload: bool = False
    overlap: str | None = None
    catch_up: str | None = None
    calendar: bool | None = None
    jitter_s: int | None = None
    timeout_s: int | None = None
    retries: int | None = None
    topic: str | None = None
    delete_after_last: bool | None = None
    team: str | None = None
    glitch: Glitch | None = None

    def run(self, world: World) -> None:
        if (job := world.model.pick(self.job)) is None:
            return
        changed = self.fields(world)
        values = {**changed, "catch_up": self.catch_up_policy()} if self.catch_up is not None else changed
        requested = self.schedule.json(world.clock.now()) if self.schedule is not None else None
        schedule = schedule_from_dict(requested) if requested is not None else None
        options = {name: RetryChange.whole(value) if name == "retry" else value for name, value in values.items()}
        changes = SpecChange(**options, **({"schedule": schedule} if schedule is not None else {}))
        done = world.call(self, lambda: world.api.change(USER, job.job_id, changes))
        world.changes_of(job, done, lambda written, landed, order: world.model.patched(
            job, changed, requested, written.updated_at, landed, order))

    def catch_up_policy(self) -> CatchUp:
        return CATCH_UPS[None if self.catch_up == "all" else self.catch_up]

    def fields(self, world: World) -> dict[str, Any]:
        """The fields it sets, as the reference keeps them (``reference.SETTINGS``, and "payload")."""
        changed: dict[str, Any] = {}
        if self.payload:
            changed["payload"] = {"v": world.serial()}
        if self.overlap is not None:
            changed["overlap"] = Overlap(self.overlap)
        if self.catch_up is not None:
            changed["catch_up"] = not self.catch_up_policy().replays_all
        if self.calendar is not None:
            changed["calendar"] = CALENDAR if self.calendar else None
        for name in ("jitter_s", "timeout_s"):
            if getattr(self, name) is not None:
                changed[name] = getattr(self, name) or None
        if self.retries is not None:
            changed["retry"] = retry_policy(self.retries)
        if self.topic is not None:
            changed["topic"] = self.topic
        if self.delete_after_last is not None:
            changed["delete_after_last"] = self.delete_after_last
        if self.team is not None:
            changed["tags"] = {TEAM: self.team}
        return changed


@dataclass(frozen=True, repr=False)
class Pause(Op):
    job: int
    glitch: Glitch | None = None

    def run(self, world: World) -> None:
        if (job := world.model.pick(self.job)) is not None:
            done = world.call(self, lambda: world.api.pause(USER, job.job_id))
            world.changes_of(job, done, functools.partial(world.model.paused, job))


@dataclass(frozen=True, repr=False)
class Resume(Op):
    job: int
    catch_up: bool = False
    glitch: Glitch | None = None

    def run(self, world: World) -> None:
        if (job := world.model.pick(self.job)) is not None:
            done = world.call(self, lambda: world.api.resume(USER, job.job_id, catch_up=self.catch_up))
            world.changes_of(job, done, functools.partial(world.model.resumed, job, catch_up=self.catch_up))


@dataclass(frozen=True, repr=False)
class Cancel(Op):
    job: int
    glitch: Glitch | None = None

    def run(self, world: World) -> None:
        if (job := world.model.pick(self.job)) is not None:
            done = world.call(self, lambda: world.api.cancel(USER, job.job_id))
            world.changes_of(job, done, functools.partial(world.model.cancelled, job))


@dataclass(frozen=True, repr=False)
class RunNow(Op):
    job: int
    glitch: Glitch | None = None

    def run(self, world: World) -> None:
        if (job := world.model.pick(self.job)) is not None:
            row = world.call(self, lambda: world.api.run_now(USER, job.job_id))
            if row is not None:
                world.model.ran_now(job, row)
            # An attempt that failed after its row landed was a run now too, which the retry does not repeat
            # (its due instant, and so its id, is the retry's own): it may run, it is not owed.
            for plan in world.plans:
                for landing in plan.writes:
                    for written in landing.rows:
                        if row is None or written.execution_id != row.execution_id:
                            world.model.ran_now(job, written, owed=False)


@dataclass(frozen=True, repr=False)
class Bulk(Op):
    """A bulk pause, resume or cancel (``JobService.bulk``) of the jobs tagged ``team``: each job changed as its
    own request would change it, and told to the model from what that request answered."""

    action: Literal["pause", "resume", "cancel"]
    team: str = "a"
    glitch: Glitch | None = None

    def run(self, world: World) -> None:
        service, answers = world.recording(self.action)
        where = JobFilter(tags=((TEAM, self.team),))
        done = world.call(self, lambda: service.bulk(USER, self.action, where, 2 * MAX_JOBS, None))
        if done is not None:
            world.say(f"    changed {len(done[0].changed)}, unchanged {len(done[0].unchanged)}, "
                      f"failed {len(done[0].failed)}")
        written = {job_id for plan in world.plans for landing in plan.writes for job_id in landing.jobs}
        left = {job_id for pending in world.faults.pending.values() if pending.plan in world.plans
                for job_id in jobs_named(pending.target, pending.call)}
        # (an attempt that failed may have changed some too, or left a change pending)
        for job_id in sorted(set(answers) | written | left):
            told = functools.partial(self.tell, world, answers.get(job_id), list(world.plans))
            model = world.model.by_id.get(job_id)
            if model is not None:
                told(model)
            else:  # a job whose submit is not answered yet (the bulk change ran in the middle of it)
                world.model.later.setdefault(job_id, []).append(told)

    def tell(self, world: World, answer: Job | None, plans: list[FaultPlan], model: JobModel) -> None:
        record = {"pause": functools.partial(world.model.paused, model),
                  "resume": functools.partial(world.model.resumed, model, catch_up=False),
                  "cancel": functools.partial(world.model.cancelled, model)}[self.action]
        world.changes_of(model, answer, record, plans)


@dataclass(frozen=True, repr=False)
class Backfill(Op):
    """A backfill of the job's fires from ``since`` to ``until`` seconds ago; ``twice``: asked again at once
    (a repeated request runs no fire a second time)."""

    job: int
    since: int = 120
    until: int = 1
    twice: bool = False
    glitch: Glitch | None = None

    def run(self, world: World) -> None:
        if (job := world.model.pick(self.job)) is None:
            return
        now = world.clock.now()
        start, end = now - timedelta(seconds=self.since), now - timedelta(seconds=self.until)
        for _ in range(2 if self.twice else 1):
            done = world.call(self, lambda: world.api.backfill(USER, job.job_id, start, end))
            if done is None:
                return
            queued = ', '.join(hms(f) for f in done.queued) or 'nothing'
            world.say(f"    backfills {', '.join(hms(f) for f in done.fires) or 'nothing'} (queued {queued})")
            world.model.backfilled(job, done.fires, world.landed)


@dataclass(frozen=True, repr=False)
class Result(Op):
    """The worker of a published execution not yet answered (picked by index) answers, or never will."""

    pick: int
    fate: Fate = "success"
    glitch: Glitch | None = None

    def run(self, world: World) -> None:
        world.check_safety()  # the model learns of the executions published so far, even in this minute
        waiting = world.model.unanswered()
        if waiting:
            world.answer(waiting[self.pick % len(waiting)], self.fate, self)


@dataclass(frozen=True, repr=False)
class Repeat(Op):
    """A worker's result is delivered again (a duplicate on ``job-results``)."""

    pick: int

    def run(self, world: World) -> None:
        world.check_safety()
        answered = world.model.answered_list()
        if answered:
            world.deliver(answered[self.pick % len(answered)], self)


@dataclass(frozen=True, repr=False)
class Tick(Op):
    """The minute's tick event is delivered again, now (EventBridge delivers at least once)."""

    def run(self, world: World) -> None:
        world.tick(world.event_time)


@dataclass(frozen=True, repr=False)
class Minute:
    """A minute: time runs to its tick at ``second`` (missed, or delivered twice), which dispatches scans that
    run as time goes on, with ``faults`` (``Fault.scan`` numbers the scans dispatched in this minute); ``ops``
    happen at their offsets (ms) from the minute's start, possibly while scans run."""

    second: int = 30
    tick: Literal["once", "missed", "twice"] = "once"
    faults: tuple[Fault, ...] = ()
    ops: tuple[tuple[int, Op], ...] = ()

    __repr__ = compact_repr


# -- the world ---------------------------------------------------------------------------------------------


#: The operations of users: what they change shows before they are answered (``Reference.observe``).
USER_OPS = (Submit, SubmitMany, Payload, Patch, Reschedule, Pause, Resume, Cancel, RunNow, Exclude, Bulk, Backfill)


class World:
    """The scheduler and its stores, the broker, virtual time, the faults and the reference model."""

    def __init__(self, segments: int, say: Callable[[str], None] = note, *, quotas: bool = False,
                 skew: Skew | None = None, wakes: bool = True, waived: frozenset[str] = frozenset()) -> None:
        self._say = say
        self._lines: list[str] = []
        self.clock = Simulation(START)
        self.skew = skew or Skew()
        self.clocks: dict[str, Clock] = {
            role.name: self.clock if not getattr(self.skew, role.name) else
            SkewedClock(self.clock, getattr(self.skew, role.name)) for role in fields(Skew)}
        self.store = MemoryJobStore(self.clock)  # one-time jobs' rows expire by virtual time (``domain.expiry``)
        self.calendars = MemoryCalendarStore()
        # The calendar jobs may name, excluding nothing until an ``Exclude`` op says otherwise.
        self.calendars.put(calendar_from_dict(USER, CALENDAR, {}, START))
        self.leases = MemoryLeaseStore()
        self.publisher = RecordingPublisher(self.clock, self._published)
        #: The tenant's quota counters, where its standing limits are counted (``LIMITS``).
        self.quotas = MemoryTenantQuotas() if quotas else None
        #: Whether writers of LATE rows wake their partition's scan (then a scan with nothing to do ends early);
        #: where they do not (``JOBRUNNER_WAKE_SCANS`` unset), every scan runs to the end of its minute.
        self.wakes = wakes
        self.changes = MemoryChangeLog()
        self.model = Reference(self.skew.spread, waived)
        self.faults = Injector(self.clock, self.run_op, self._job_id, self.say, self.model.disturbed, self.watch)
        #: The fault plans of the request acknowledged last (its writes, reads and the compare-and-sets it left).
        self.plans: list[FaultPlan] = []
        self._scans = 0
        self._serial = itertools.count(1)
        self.ticked = START - MINUTE  # the minute of the latest tick (each minute is ticked at most once)
        #: Whether a requested scan starts (a tick's dispatch, a writer's wake); False once the stack stops.
        self._dispatching = True
        self.event_time = START
        self.most_segments = 0
        self._faults: list[Fault] = []  # those of the scans the current minute dispatches
        self.landed = START
        self.landings: dict[str, tuple[datetime, int]] = {}
        #: The order of the last acknowledged change's write among all writes (ties of ``landed``).
        self.landed_order = 0
        self._dispatched = 0
        #: False once a step raised: the drain and the final checks are then skipped (the failure is the news).
        self.healthy = True
        # Job ids decide segments: they must be the same on every replay of an example (and the logs quiet).
        ids = random.Random(0)
        self._restore = (uuid.uuid4, logging.getLogger("jobrunner").level)
        uuid.uuid4 = lambda: uuid.UUID(int=ids.getrandbits(128), version=4)
        logging.getLogger("jobrunner").setLevel(logging.CRITICAL)
        self.resegment(segments)
        self.tick(START, dispatch=False)  # the scheduler ran before the first job: its watermarks are set

    def close(self) -> None:
        self.clock.close()
        uuid.uuid4, level = self._restore
        logging.getLogger("jobrunner").setLevel(level)

    # -- plumbing ---------------------------------------------------------------------------------------

    def say(self, text: str) -> None:
        self._lines.append(f"{hms(self.clock.now())} {text}")

    def flush_notes(self) -> None:
        """Hand the lines said so far to Hypothesis (from the test's thread: tasks only collect them)."""
        if self._lines:
            self._say("\n".join(self._lines))
            self._lines.clear()

    def serial(self) -> int:
        return next(self._serial)

    def resegment(self, segments: int) -> None:
        """(Re)build the services for ``segments`` segments, as wiring does, on the same stores: a container per
        role, each on its own clock."""
        env = {"JOBRUNNER_SEGMENTS": str(segments), "JOBRUNNER_ALLOWED_TOPICS": ",".join(TOPICS)}
        if self.quotas is not None:
            env["JOBRUNNER_TENANT_LIMITS"] = json.dumps({"*": LIMITS})
        settings = Settings.from_env(env)
        store = Faulty("store", self.store, self.faults)
        publisher = Faulty("publisher", self.publisher, self.faults)
        leases = Faulty("heartbeats", self.leases, self.faults)
        calendars = Faulty("calendars", self.calendars, self.faults)
        self.containers = {role: Container(
            settings, store=store, publisher=publisher, leases=leases,  # type: ignore[arg-type]
            calendars=calendars, invoker=ScanInvoker(self), clock=clock,  # type: ignore[arg-type]
            quotas=self.quotas, changes=self.changes) for role, clock in self.clocks.items()}
        if not self.wakes:  # the scans are invoked (by the tick), but no writer wakes one
            for container in self.containers.values():
                container.__dict__["waker"] = NoWaker()
        self.container = self.containers["api"]
        self.segments = segments
        self.most_segments = max(self.most_segments, segments)
        self.model.disturbed(self.clock.now())
        self.say(f"{segments} segment(s)")

    @property
    def api(self) -> JobService:
        return self.container.jobs

    def recording(self, action: str) -> tuple[Commands, dict[str, Job]]:
        """A copy of the API's job commands whose ``action`` (pause, resume or cancel, as a bulk change calls it)
        keeps what it answered for each job, by job id: a bulk change answers only ids."""
        service = copy.copy(self.api.commands)
        answers: dict[str, Job] = {}
        change = getattr(service, action)

        def recorded(user_id: str, job_id: str, *, actor: str | None = None) -> Job:
            answer: Job = change(user_id, job_id, actor=actor)
            answers[job_id] = answer
            return answer

        setattr(service, action, recorded)
        return service, answers

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        """One step of the state machine; if it raises, the world is no longer drained at the end."""
        self.healthy = False
        try:
            yield
            self.healthy = True
        finally:
            self.flush_notes()

    def watch(self, target: str, call: Call, result: Any, began: datetime) -> None:
        """Say what a reader of a failing run would want pointed out (``CLUE``): a lost compare-and-set that
        deleted a row of the version in force, a compare-and-set committed after its row was dropped, a PLANNED
        row landing after its scan took its partition, a LATE row landing late."""
        args = call.args
        if target in ("store.update_job", "store.update_job.commit") and len(args) > 1:
            job = self.store.get_job(args[0].user_id, args[0].job_id)
            gone = [row for row in args[1] if row_key(row) not in self.store.rows]
            kept = {r.job_version for r in self.store.rows.values() if r.job_id == args[0].job_id}
            name = self.model.name(args[0].job_id)
            if target == "store.update_job" and result is False and job is not None and any(
                    row.job_version == job.schedule_version not in kept for row in gone):
                self.say(f"    CLUE {name}: a lost compare-and-set deleted a row of the schedule version in force")
            if target.endswith(".commit") and gone:
                self.say(f"    CLUE {name}: a compare-and-set committed after its row was dropped")
        written = [r for r in scheduled_rows(target, args) if hasattr(r, "lane")]
        now = self.clock.now()
        for row in written:
            state = self.leases.partitions([(row.segment, row.bucket)])
            taken = bool(state) and state[0].owner is not None and target in API_WRITES
            clue = f"    CLUE {self.model.name(row.job_id)}: a {row.lane.name} row of {row.bucket:%H:%M}"
            if row.lane is Lane.PLANNED and taken and row_key(row) in self.store.rows:
                self.say(f"{clue} landed after its scan took the partition")
            if row.lane is Lane.LATE and now - began > timedelta(milliseconds=500):
                self.say(f"{clue} ({target}) landed {(now - began).seconds} s late")

    def held_last(self, plan: FaultPlan) -> str:
        """The job of the fire a scan recorded held (its record SCHEDULED, its next fire planned by the completion
        to come), if nothing settled since (a reader's clue), or ""."""
        writes = [landing for landing in plan.writes if landing.target in ("store.write_outcomes",
                                                                             "store.settle_published")]
        last = writes[-1] if writes else None
        if last is None or last.target != "store.write_outcomes" or last.job is None:
            return ""
        return ",".join(sorted(self.model.name(job_id) for job_id in last.jobs))

    def late_writes(self, plan: FaultPlan, targets: tuple[str, ...] = WRITES) -> str:
        """The jobs of the writes of ``plan`` that landed late (a reader's clue), or ""."""
        late = sorted({self.model.name(job_id) for landing in plan.writes if landing.late and landing.target in targets
                       for job_id in landing.jobs})
        return ",".join(late)

    def _job_id(self, index: int) -> str | None:
        job = self.model.pick(index)
        return job.job_id if job is not None else None

    def _published(self, at: datetime, message: OutboundMessage) -> None:
        value = message.value
        job = self.model.name(value["job_id"])
        if value.get("cancel"):
            self.say(f"    published {message.topic} {job} CANCEL of {value['scheduled_at'][11:23]} "
                     f"#{value['attempt']}")
            return
        self.say(f"    published {message.topic} {job} {value.get('trigger', '')} "
                 f"{value['scheduled_at'][11:23]} #{value['attempt']} payload {value['payload']}")

    # -- users and workers ------------------------------------------------------------------------------

    def run_op(self, op: Op) -> None:
        self.say(repr(op))
        op.run(self)

    def call(self, op: Op | None, action: Callable[[], Any]) -> Any:
        """Do ``action`` until it is acknowledged, as a user (or the results function) does after an error;
        the op's glitch hits its first attempt only (the user retries at once, or ``Glitch.retry_in`` later).
        Returns None when the service refuses the request (a tenant's limit is a refusal too)."""
        glitch: Glitch | None = getattr(op, "glitch", None)
        plans = [FaultPlan(glitch.faults() if glitch is not None else [])]
        self.plans = plans
        changing = isinstance(op, USER_OPS)  # until it is answered, the model does not know what it did
        self.model.changing += changing
        try:
            for attempt in range(3):
                with self.faults.acting(plans[-1]):
                    try:
                        result = action()
                        # When the request acknowledged last took effect (when it read the job, if it wrote
                        # nothing; when answered, if it read no job either).
                        self.plans, self.landings = plans, landings(plans)
                        self.landed, self.landed_order = self.landing_of(self.landings)
                        return result
                    except (Unavailable, PublishError) as exc:
                        self.say(f"    failed ({exc}); retried")
                        if late := self.late_writes(plans[-1]):
                            self.say(f"    CLUE {late}: the request failed after a write of it landed late")
                    except (Conflict, InvalidField, InvalidFields, JobNotFound, LimitReached) as exc:
                        self.say(f"    refused: {exc}")
                        self.plans = plans
                        return None
                if attempt == 0 and glitch is not None and glitch.retry_delay():
                    self.clock.sleep_until(self.clock.now() + timedelta(seconds=glitch.retry_delay()))
                plans.append(FaultPlan())
            raise AssertionError(f"{op!r} still fails with no fault injected")
        finally:
            self.model.changing -= changing

    def changes_of(self, job: JobModel, answer: Job | None, record: Callable[[Job, datetime, int], None],
                   plans: list[FaultPlan] | None = None) -> None:
        """Tell the model (``record(job as written, landed, order)``) each change of ``job`` that the request
        handled last made: each of its writes of the job that landed (a request retried after its compare-and-set
        was left pending can land twice: the pending write, committed by the retry's own, then the retry's,
        decided again on the job as it then stood), or, if none did, its answer, as of its last read of the job
        (a change that had nothing to do). Whether or not it was refused in the end."""
        plans = self.plans if plans is None else plans
        writes = sorted((landing for plan in plans for landing in plan.writes
                         if landing.target == "store.update_job" and landing.result is True
                         and job.job_id in landing.jobs), key=lambda landing: landing.order)
        for landing in writes:
            record(landing.job, landing.at, landing.order)
        if not writes and answer is not None:
            # As of its last read of the job: a row it re-asserted is no change of the job (found by the long
            # search on #31's final code: a resume of an active job whose row landed after a pause took effect).
            landed = landings(plans, job.job_id)
            record(answer, *landed.get("read", self.landing_of(landed)))
        for pending in self.faults.pending.values():  # left pending: told when committed (by another request)
            if pending.plan in plans and job.job_id in jobs_named(pending.target, pending.call):
                pending.committed = functools.partial(self._committed, job, record)

    def _committed(self, job: JobModel, record: Callable[[Job, datetime, int], None], landing: Landing) -> None:
        self.say(f"    {job.name}: a change of a request answered before commits now")
        record(landing.job, landing.at, landing.order)

    def landing_of(self, landed: dict[str, tuple[datetime, int]]) -> tuple[datetime, int]:
        """When a request took effect, from its ``faults.landings``: its first write that landed, else its last
        read of the job, else now."""
        for target in ("store.update_job", "store.create_job", "store.create_jobs", "store.write_scheduled", "read"):
            if target in landed:
                return landed[target]
        return self.clock.now(), self.faults.next_order()

    def deliver(self, execution: Execution, op: Op | None = None) -> datetime:
        """The worker's result reaches the results function (retried until applied); returns when it took
        effect (its record written, or when it was answered if it changed nothing)."""
        success = execution.fate == "success"
        report = WorkerReport(execution.execution_id, execution.job.job_id, success,
                              None if success else "worker failed", execution.scheduled_at, execution.attempt,
                              result_token=execution.result_token)
        outcome = self.call(op, lambda: self.container.results.apply(report))
        self.say(f"    result of {execution}: {outcome}")
        return self.landings.get("store.write_outcomes", (self.clock.now(), 0))[0]

    def answer(self, execution: Execution, fate: Fate, op: Op | None = None) -> None:
        self.model.answered(execution, fate, self.clock.now())
        if fate != "never":
            self.model.applied(execution, self.deliver(execution, op))

    def deliver_all(self) -> None:
        """Every execution not answered yet succeeds (the fault-free end of the run)."""
        self.check_safety()
        for execution in self.model.unanswered():
            self.answer(execution, "success")

    # -- time, ticks and scans --------------------------------------------------------------------------

    def wait(self, seconds: int) -> None:
        self.clock.sleep_until(self.clock.now() + timedelta(seconds=seconds))
        self.say(f"(waited {seconds} s)")

    def tick(self, event_time: datetime, dispatch: bool = True) -> Any:
        """The tick of ``event_time``'s minute, now; ``dispatch=False`` drops the scans it asks for."""
        dispatching, self._dispatching = self._dispatching, dispatch
        with self.faults.acting(FaultPlan()):
            report = self.containers["tick"].ticks.tick(event_time, self.clocks["tick"].now())
        self._dispatching = dispatching
        if dispatch:
            self.model.ticked.add(minute_bucket(event_time))
        requests = ", ".join(f"{r.segment}/{r.bucket:%H:%M}" for r in report.dispatched)
        self.say(f"tick of {hms(event_time)} dispatches {requests or 'nothing'}")
        return report

    def pass_minute(self, minute: Minute) -> None:
        """Time runs to the next minute's tick, which dispatches its scans (they run as time goes on). The tick
        is on the simulation's agenda: it comes at its time even in the middle of a slow request."""
        start = max(minute_bucket(self.clock.now()), self.ticked + MINUTE)
        self.ticked = start
        for offset_ms, op in minute.ops:
            self.clock.at(start + timedelta(milliseconds=offset_ms), functools.partial(self.run_op, op))
        event_time = start + timedelta(seconds=minute.second)
        self.clock.at(event_time, functools.partial(self._minute_tick, minute, event_time))
        self.clock.sleep_until(event_time)

    def _minute_tick(self, minute: Minute, event_time: datetime) -> None:
        # Only now is this minute's event the one a redelivery (``Tick``) repeats: an op that runs earlier in
        # the minute repeats the previous one (EventBridge never delivers an event before its time).
        self.event_time = event_time
        if minute.tick == "missed":
            self.say(f"tick of {minute_bucket(event_time):%H:%M} missed")
            self.model.disturbed(event_time)
            return
        self._faults, self._dispatched = list(minute.faults), 0
        self.tick(self.event_time)
        if minute.tick == "twice":
            self.tick(self.event_time)

    def start_scan(self, request: ScanRequest) -> None:
        if not self._dispatching:
            return
        plan = FaultPlan(f for f in self._faults if f.scan == self._dispatched)
        self._dispatched += 1
        self._scans += 1  # the scans take turns on the two hosts (their clocks may differ)
        scans = self.containers["scans" if self._scans % 2 else "other_scans"].scans
        self.clock.spawn(f"scan {request.segment}/{request.bucket:%H:%M}", lambda: self.scan(scans, request, plan))

    def scan(self, scans: Any, request: ScanRequest, plan: FaultPlan) -> None:
        """A scan's task: one scan of one partition, which may die (``Crash``) or fail (heartbeat table)."""
        name = f"scan {request.segment}/{request.bucket:%H:%M}"
        self.say(f"{name} starts")
        with self.faults.acting(plan):
            try:
                report = scans.scan(request)
            except Crash:
                self.say(f"{name} crashed")
                if late := self.late_writes(plan, ("store.settle_published",)):
                    self.say(f"    CLUE {late}: the scan died after a completion landed late")
                if held := self.held_last(plan):
                    self.say(f"    CLUE {held}: the scan died after it recorded a fire held, before its completion")
                return
            except InjectedUnavailable as exc:
                if exc.port == "store":  # a transient store error must be retried by the scan, not kill it
                    raise AssertionError(f"{name}: a transient store failure escaped the scan: {exc!r}") from exc
                self.say(f"{name} failed ({exc}); its lease will expire")
                return
        self.say(f"{name} ends: acquired {report.acquired}, finished {report.finished}, "
                 f"published {report.published}, dropped {report.dropped}, errors {report.errors}")

    def drain(self) -> datetime:
        """Go on with no faults, a tick each minute, until every segment has caught up (at least 4 minutes)
        and the scans have ended; every execution published meanwhile succeeds. Returns the last bucket
        dispatched."""
        self.say("-- drain: no more faults")
        self.faults.enabled = False
        self.deliver_all()
        started = self.clock.now()
        for _ in range(30):
            start = max(minute_bucket(self.clock.now()), self.ticked + MINUTE)
            self.ticked = start
            event_time = start + timedelta(seconds=30)
            self.clock.sleep_until(event_time)
            self.event_time = event_time  # (only now: a redelivery before it repeats the minute before's)
            target: datetime = self.tick(self.event_time).target
            self.deliver_all()
            # The scans the tick dispatched run first: a partition whose scan gave its lease up with nothing
            # to do (ScanRules.idle_end) is marked done by the one the tick after its minute dispatches.
            self.clock.sleep_until(self.event_time + timedelta(seconds=1))
            if self.clock.now() >= started + 4 * MINUTE and self.caught_up(target - 2 * MINUTE):
                break
        else:
            raise AssertionError(f"30 minutes after the faults stopped, segments are still behind: {self.watermarks()}")
        # The stack stops: no tick, and no wake either (a scan's next fires written into the next minute would
        # wake its scan, and short-period jobs would go on firing minute after minute).
        self._dispatching = False
        self.say("-- stopped: no more ticks or wakes")
        self.clock.sleep_until(target + 5 * MINUTE)  # the last scans end (a scan lives at most 4 min 5 s)
        assert not self.clock.busy(), "scans still running 5 minutes after their minute"
        self.deliver_all()
        self.check_safety()
        return target

    def watermarks(self) -> dict[int, str]:
        states = {s.segment: s for s in self.leases.segments(range(self.most_segments))}
        return {s: hms(states[s].watermark) if s in states else "-" for s in range(self.most_segments)}

    def caught_up(self, bucket: datetime) -> bool:
        """Every segment of the current count is done up to ``bucket``. (Rows left in higher segments after
        the count went down are not waited for: if they are never published, the final checks say so.)"""
        states = self.leases.segments(range(self.segments))
        return len(states) == self.segments and all(s.watermark is not None and s.watermark >= bucket for s in states)

    # -- checks -----------------------------------------------------------------------------------------

    def check_safety(self) -> None:
        self.model.observe(self.publisher.log)
        self.model.observe_history(self.store)

    def check_liveness(self, last_bucket: datetime) -> None:
        self.model.check_owed(last_bucket - 2 * MINUTE, self.store)
        self.model.check_queues(self.store, last_bucket - 3 * MINUTE)
        self.model.check_next_runs(self.store, self.leases, last_bucket)
        self.check_quotas()

    def check_quotas(self) -> None:
        """Where the tenant's standing limits are counted: after the drain, its count of recurring jobs held is
        the live recurring jobs the model knows, and the fires it reserves in every minute are theirs."""
        if self.quotas is None or not self.model.check("quota_drift"):
            return
        standing = self.quotas.standing.get(USER, Standing())
        live = self.model.live_recurring(self.store)
        names = [job.name for job in live]
        assert standing.jobs == len(live), (
            f"the tenant's count of recurring jobs held is {standing.jobs}, but it holds {len(live)}: {names}")
        reserved = sum(job.schedule.most_in_a_minute() for job in live if job.schedule is not None)
        assert standing.per_minute == reserved, (
            f"the tenant's fires reserved in every minute are {standing.per_minute}, but its jobs {names} "
            f"reserve {reserved}")
