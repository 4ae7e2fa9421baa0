"""The reconciler (services.reconcile, domain.orphans) on the whole scheduler in memory and virtual time.

Ticks come at second 1 of each minute, the scans they dispatch (and the writers' wakes) run as time goes on,
the reconciler runs at second 30. Rows are removed "behind the system's back" from the in-memory index; each lost
execution must be re-planned once, under its own id, and nothing late but live must be.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.stores.calendars import MemoryCalendarStore
from jobrunner.adapters.stores.changes import MemoryChangeLog
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.config import Settings
from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import ExecutionStatus, Trigger, execution_id_for
from jobrunner.domain.policies import Overlap
from jobrunner.domain.schedules import At, Every
from jobrunner.domain.spec import JobSpec, RetryPolicy, SpecChange
from jobrunner.domain.time import MINUTE, minute_bucket
from jobrunner.ports import Invoker
from jobrunner.services.results import WorkerReport
from jobrunner.wiring import Container
from tests.unit.jobrunner.model.simulation import Simulation

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from jobrunner.domain.jobs import Job, ScheduledExecution
    from jobrunner.ports import Completion, OutboundMessage, ScanRequest
    from jobrunner.services.reconcile import ReconcileReport

START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
USER = "alice"


def at(minute: int, second: int = 0) -> datetime:
    return START + timedelta(minutes=minute, seconds=second)


class ScanInvoker(Invoker):
    """Async invoke: a requested scan (a tick's dispatch, a writer's wake) starts at once, as a simulation task."""

    def __init__(self, system: System) -> None:
        self._system = system

    def invoke_scan(self, request: ScanRequest) -> None:
        if not self._system.scanning:  # scans are not running (an outage, a throttled function)
            return
        scans = self._system.container.scans

        def scan() -> None:
            scans.scan(request)

        self._system.clock.spawn(f"scan {request.segment}/{request.bucket:%H:%M}", scan)


class LossyStore(MemoryJobStore):
    """The memory store, except that the rows ``losing`` names are not written until ``until`` (a write lost)."""

    def __init__(self, clock: Simulation) -> None:
        super().__init__()
        self._clock = clock
        self.losing: Callable[[ScheduledExecution], bool] = lambda _row: False
        self.until = START
        self.lost: list[ScheduledExecution] = []
        #: Completions of the rows ``stuck`` names fail until ``stuck_until`` (a partition whose scans keep failing).
        self.stuck: Callable[[ScheduledExecution], bool] = lambda _row: False
        self.stuck_until = START

    def _kept(self, rows: Iterable[ScheduledExecution]) -> list[ScheduledExecution]:
        kept = []
        for row in rows:
            if self._clock.now() < self.until and self.losing(row):
                self.lost.append(row)
            else:
                kept.append(row)
        return kept

    def write_scheduled(self, rows: Sequence[ScheduledExecution]) -> None:
        super().write_scheduled(self._kept(rows))

    def settle_published(self, completions: Sequence[Completion]) -> None:
        if self._clock.now() < self.stuck_until and any(self.stuck(c.done) for c in completions):
            raise Unavailable("injected: completions of this row fail")
        super().settle_published(completions)


class System:
    """The scheduler on memory adapters and virtual time, with a reconciler run at second 30 of each minute."""

    def __init__(self, *, segments: int = 2, grace_s: int = 60, reconcile_at: tuple[int, ...] = (30,),
                 **settings: Any) -> None:
        #: The seconds of each minute the reconciler runs at.
        self.reconcile_at = reconcile_at
        self.clock = Simulation(START)
        self.store = LossyStore(self.clock)
        self.leases = MemoryLeaseStore()
        self.changes = MemoryChangeLog()
        self.publisher = MemoryPublisher()
        self.settings = Settings.of(segments=segments, reconcile_grace_s=grace_s, **settings)
        self.container = self._container()
        self.ticking = True
        self.scanning = True
        self.reconciling = True
        self.reports: list[ReconcileReport] = []
        #: What the worker answers for each message (None: nothing); by default, success.
        self.answer: Callable[[OutboundMessage], bool | None] = lambda _message: True
        self._answered = 0
        self._minute = minute_bucket(START)
        self.container.ticks.tick(START, START)  # the scheduler ran before the first job: watermarks are set
        self.container.start_segments()

    def _container(self) -> Container:
        return Container(self.settings, store=self.store, publisher=self.publisher, leases=self.leases,
                         invoker=ScanInvoker(self), clock=self.clock, changes=self.changes,
                         calendars=MemoryCalendarStore())

    def close(self) -> None:
        self.clock.close()

    # -- what happens -----------------------------------------------------------------------------------------

    def submit(self, new: JobSpec) -> Job:
        return self.container.jobs.submit(USER, new)[0]

    def run_until(self, end: datetime) -> None:
        """Time runs to ``end``: each minute its tick at second 1 and the reconciler at second 30; the worker
        answers what was published meanwhile."""
        steps = [(timedelta(seconds=1), self._tick)]
        steps += [(timedelta(seconds=second), self._reconcile) for second in self.reconcile_at]
        while True:
            for offset, action in sorted(steps, key=lambda step: step[0]):
                instant = self._minute + offset
                if instant > self.clock.now() and instant <= end:
                    self.clock.sleep_until(instant)
                    action(instant)
                    self._deliver()
            if self._minute + MINUTE > end:
                break
            self._minute += MINUTE
        self.clock.sleep_until(end)
        self._deliver()

    def _tick(self, instant: datetime) -> None:
        if self.ticking:
            self.container.ticks.tick(instant, self.clock.now())

    def _reconcile(self, _instant: datetime) -> None:
        if self.reconciling:
            # A fresh service each run, as in a stateless function: what it knows comes from its state's item.
            self.reports.append(self._container().reconciler.run())

    def _deliver(self) -> None:
        """The worker reports on the messages published since its last look, as ``answer`` says."""
        for message in self.publisher.sent[self._answered:]:
            success = self.answer(message)
            if success is None:
                continue
            value = message.value
            report = WorkerReport(execution_id=value["execution_id"], job_id=value["job_id"], success=success,
                                  error=None if success else "worker failed", attempt=value["attempt"],
                                  scheduled_at=datetime.fromisoformat(value["scheduled_at"].replace("Z", "+00:00")),
                                  result_token=value["result_token"])
            self.container.results.apply(report)
        self._answered = len(self.publisher.sent)

    # -- what there is ----------------------------------------------------------------------------------------

    def lose(self, execution_id: str) -> int:
        """Remove every row of an execution from the index, behind the system's back; returns how many."""
        keys = [key for key, row in self.store.rows.items() if row.execution_id == execution_id]
        for key in keys:
            del self.store.rows[key]
        return len(keys)

    def published(self, execution_id: str) -> list[datetime]:
        """When each copy of an execution was published (from its history record: the last publish)."""
        return [m.value["scheduled_at"] for m in self.publisher.sent if m.value["execution_id"] == execution_id]

    def fires_published(self, job: Job) -> list[str]:
        return sorted({m.value["scheduled_at"] for m in self.publisher.sent
                       if m.value["job_id"] == job.job_id and m.value["attempt"] == 1})

    def repaired(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for report in self.reports:
            total.update(report.repaired)
        return total

    def record(self, job: Job, fire: datetime, attempt: int = 1, trigger: Trigger = Trigger.SCHEDULE) -> Any:
        return self.store.get_record(job.job_id, fire, attempt, execution_id_for(job.job_id, fire, attempt, trigger))


@pytest.fixture(params=[(30,), tuple(range(5, 60, 10))], ids=["every-minute", "every-10-s"])
def system(request: pytest.FixtureRequest) -> Iterator[System]:
    """The system with the reconciler running once a minute, or every 10 seconds (its runs then come faster than the
    scans move on: what it decides must not depend on how often it runs)."""
    world = System(reconcile_at=request.param)
    yield world
    world.close()


def every(minutes: int, start: datetime, **options: Any) -> JobSpec:
    return JobSpec(Every(every=timedelta(minutes=minutes), start=start), {"n": 1}, **options)


# -- (a) a missed fire ---------------------------------------------------------------------------------------------


def test_a_lost_fire_is_repaired_once_under_its_own_execution_id_and_the_job_fires_on(system: System) -> None:
    # Given a job every 2 minutes from 10:02, whose 10:04 row (planned when 10:02 fired) is lost before its scan
    job = system.submit(every(2, at(2)))
    system.run_until(at(3))
    lost = execution_id_for(job.job_id, at(4), 1, Trigger.SCHEDULE)
    assert system.lose(lost) == 1

    # When time runs on with the reconciler
    system.run_until(at(12))

    # Then the 10:04 fire is published once, with its own execution id, within 5 minutes of its due instant
    record = system.record(job, at(4))
    assert record is not None and record.execution_id == lost
    assert record.published_at is not None and record.published_at - at(4) <= timedelta(minutes=5)
    assert len(system.published(lost)) == 1
    # And the chain goes on: every later fire was published
    assert system.fires_published(job) == [f"2026-11-22T10:{m:02d}:00.000Z" for m in (2, 4, 6, 8, 10, 12)]
    # And exactly one repair was counted, for that reason, whatever the passes after it saw
    assert system.repaired() == Counter({"missed_fire": 1})
    # And the job's change log names the repaired fire and why
    [entry] = [c for c in system.changes.entries.values() if c.action == "repair"]
    assert entry.actor == "reconciler"
    assert entry.details["execution_id"] == lost and entry.details["reason"] == "missed_fire"
    assert entry.details["fire"] == "2026-11-22T10:04:00.000Z"


def test_the_ledger_shows_a_repaired_fire_as_repaired(system: System) -> None:
    job = system.submit(every(2, at(2)))
    system.run_until(at(3))
    system.lose(execution_id_for(job.job_id, at(4), 1, Trigger.SCHEDULE))
    system.run_until(at(10))

    page = system.container.jobs.fires(USER, job.job_id, at(0), at(8))

    outcomes = {fire.at: fire.outcome.value for fire in page.fires}
    assert outcomes == {at(2): "published", at(4): "repaired", at(6): "published", at(8): "published"}
    repaired = next(fire for fire in page.fires if fire.at == at(4))
    assert repaired.detail is not None and "missed_fire" in repaired.detail
    assert page.unaccounted == 0


def test_a_lost_first_run_is_repaired(system: System) -> None:
    # Given a one-time job whose only row (written by its submit) is lost
    job = system.submit(JobSpec(At(at(4)), {"n": 1}))
    assert system.lose(execution_id_for(job.job_id, at(4), 1, Trigger.SCHEDULE)) == 1

    system.run_until(at(12))

    record = system.record(job, at(4))
    assert record is not None and record.status is ExecutionStatus.SUCCESS
    assert system.repaired() == Counter({"missed_fire": 1})


def test_a_fire_dropped_while_its_job_was_not_copied_yet_is_repaired_once_the_copy_lands(system: System) -> None:
    # Given a job every 2 minutes from 10:02 whose row in the new job table is missing while a migration copies the
    # old table (docs/deploy.md, "job_table_v2"): a scan woken meanwhile finds no job for the 10:02 row, waits its
    # grace, settles it by reading, and drops the row as stale (issue #31, finding 7)
    job = system.submit(every(2, at(2)))
    copied = system.store.jobs.pop((USER, job.job_id))
    system.run_until(at(3, 30))
    assert system.record(job, at(2)) is None
    # When the copy lands, and time runs on with the reconciler
    system.store.jobs[(USER, job.job_id)] = copied
    system.run_until(at(12))
    # Then the dropped fire is repaired (late, once, under its own id) and the job fires on
    record = system.record(job, at(2))
    assert record is not None and record.published_at is not None
    assert system.fires_published(job) == [f"2026-11-22T10:{m:02d}:00.000Z" for m in (2, 4, 6, 8, 10, 12)]
    assert system.repaired() == Counter({"missed_fire": 1})


# -- (b) a missed retry --------------------------------------------------------------------------------------------


def fail_and_lose_retry(system: System, job: Job, fire: datetime) -> str:
    """The worker reports the fire's first attempt failed, and its retry's row is lost at once (no scan has read it:
    one that gives its lease up reads its late lane to the end); returns the retry's execution id."""
    first = system.record(job, fire)
    system.container.results.apply(WorkerReport(first.execution_id, job.job_id, False, "boom", scheduled_at=fire,
                                                attempt=1, result_token=_token(system, first.execution_id)))
    failed = system.record(job, fire)
    assert failed.status is ExecutionStatus.FAILED and failed.retry_at is not None
    retry = execution_id_for(job.job_id, fire, 2, Trigger.RETRY)
    assert system.lose(retry) == 1
    return retry


def test_a_lost_retry_is_repaired_with_the_retry_s_execution_id(system: System) -> None:
    # Given a job whose first attempt fails (a retry a minute or so later), and whose retry row is lost
    system.answer = lambda message: None if message.value["attempt"] == 1 else True
    job = system.submit(JobSpec(At(at(2)), {"n": 1}, retry=RetryPolicy(max_retries=2, initial_delay_s=100,
                                                                      multiplier=1, max_delay_s=100)))
    system.run_until(at(2, 5))
    retry = fail_and_lose_retry(system, job, at(2))

    system.run_until(at(10))

    # Then the retry ran once, with its own id, and succeeded; one repair, of that reason
    assert system.record(job, at(2), 2, Trigger.RETRY).status is ExecutionStatus.SUCCESS
    assert len(system.published(retry)) == 1
    assert system.repaired() == Counter({"missed_retry": 1})


# -- (c) a hold nothing will release -------------------------------------------------------------------------------


def test_a_held_fire_whose_held_row_is_lost_is_released(system: System) -> None:
    # Given a buffer_one job every minute whose first execution (10:02) reports only at 10:05:30: its 10:03 fire is
    # held, and looked at again and again; the writes that move the held row to the next minute's partition are lost
    def answer(message: OutboundMessage) -> bool | None:
        return None if message.value["scheduled_at"] == "2026-11-22T10:02:00.000Z" else True

    system.answer = answer
    job = system.submit(every(1, at(2), overlap=Overlap.BUFFER_ONE))
    held_id = execution_id_for(job.job_id, at(3), 1, Trigger.SCHEDULE)
    system.store.losing, system.store.until = (lambda row: row.execution_id == held_id), at(5, 30)
    system.run_until(at(5, 30))
    held = system.record(job, at(3))
    assert held.status is ExecutionStatus.SCHEDULED and held.published_at is None
    assert system.store.lost
    # When the first execution ends
    first = system.record(job, at(2))
    system.container.results.apply(WorkerReport(first.execution_id, job.job_id, True, scheduled_at=at(2), attempt=1,
                                                result_token=_token(system, first.execution_id)))

    system.run_until(at(12))

    # Then the held fire is published, once, with its own id, within 5 minutes of the end it waited for; one
    # repair, of that reason
    released = system.record(job, at(3))
    assert released.published_at is not None and released.published_at - at(5, 30) <= timedelta(minutes=5)
    assert len(system.published(held_id)) == 1
    assert system.repaired() == Counter({"stuck_hold": 1})


def _token(system: System, execution_id: str) -> str:
    return str(next(m.value["result_token"] for m in system.publisher.sent if m.value["execution_id"] == execution_id))


# -- no false repairs ----------------------------------------------------------------------------------------------


def test_fires_late_after_an_outage_of_the_scans_are_not_repaired(system: System) -> None:
    # Given jobs every minute and every 2 minutes and a one-time job, and then 5 minutes with no tick and no scan
    # starting (the scans fall behind; the fires' rows wait in partitions not scanned yet)
    jobs = [system.submit(every(1, at(2))), system.submit(every(2, at(2))), system.submit(JobSpec(At(at(7)), {}))]
    system.run_until(at(4, 5))
    system.ticking = system.scanning = False
    system.run_until(at(9, 5))
    system.ticking = system.scanning = True

    # When the ticks come back and catch up (a few minutes a tick, oldest first; each next fire planned late, into
    # the running minute), the reconciler running every minute throughout
    system.run_until(at(22))

    # Then every fire was published, none twice, and nothing was repaired
    assert system.repaired() == Counter()
    assert system.fires_published(jobs[0]) == [f"2026-11-22T10:{m:02d}:00.000Z" for m in range(2, 23)]
    assert system.fires_published(jobs[1]) == [f"2026-11-22T10:{m:02d}:00.000Z" for m in range(2, 23, 2)]
    assert system.fires_published(jobs[2]) == ["2026-11-22T10:07:00.000Z"]
    assert len(system.publisher.sent) == len({m.value["execution_id"] for m in system.publisher.sent})
    # And the reconciler did look at the late fires meanwhile (they were due in its windows)
    assert sum(r.history_reads for r in system.reports) > 10


def test_a_next_fire_planned_late_by_a_parked_partition_is_not_repaired(system: System) -> None:
    # Given a job every minute whose 10:04 fire is published but not completed (its next fire, 10:05, not planned):
    # the completions of that partition fail for 11 minutes, its scans retry it until it is parked, and the
    # watermarks move on past it and past 10:05
    job = system.submit(every(1, at(2)))
    fire = execution_id_for(job.job_id, at(4), 1, Trigger.SCHEDULE)
    system.store.stuck, system.store.stuck_until = (lambda row: row.execution_id == fire), at(15)
    system.run_until(at(15))
    assert system.record(job, at(4)).published_at is not None
    assert system.record(job, at(5)) is None
    assert any(s.parked for s in system.leases.segments(range(2)))

    # When the partition's retry completes at last (its next fire planned late, into a later minute)
    system.run_until(at(25))

    # Then the fires go on from 10:05, late but not lost, and the reconciler, which saw 10:05 owed and missing all
    # along, repaired nothing: the partition that would write it was not done
    assert system.repaired() == Counter()
    assert system.fires_published(job)[:5] == [f"2026-11-22T10:{m:02d}:00.000Z" for m in range(2, 7)]
    assert len(system.publisher.sent) == len({m.value["execution_id"] for m in system.publisher.sent})


def test_a_paused_a_cancelled_and_a_changed_job_are_left_alone(system: System) -> None:
    # Given three jobs every 2 minutes whose 10:04 rows are lost, then one paused, one cancelled and one given a
    # new schedule before 10:04
    jobs = [system.submit(every(2, at(2))) for _ in range(3)]
    system.run_until(at(3))
    for job in jobs:
        system.lose(execution_id_for(job.job_id, at(4), 1, Trigger.SCHEDULE))
    system.container.jobs.pause(USER, jobs[0].job_id)
    system.container.jobs.cancel(USER, jobs[1].job_id)
    system.container.jobs.change(USER, jobs[2].job_id, SpecChange(schedule=Every(every=timedelta(minutes=3),
                                                                                 start=at(5))))

    system.run_until(at(14))

    # Then nothing is repaired: the pause and the cancel owe nothing, the change owes its own fires (published)
    assert system.repaired() == Counter()
    assert system.record(jobs[0], at(4)) is None and system.record(jobs[1], at(4)) is None
    assert system.fires_published(jobs[2]) == ["2026-11-22T10:02:00.000Z", "2026-11-22T10:05:00.000Z",
                                               "2026-11-22T10:08:00.000Z", "2026-11-22T10:11:00.000Z",
                                               "2026-11-22T10:14:00.000Z"]


def test_a_healthy_system_repairs_nothing_and_reads_history_only_for_rows_it_did_not_find() -> None:
    # Given jobs every 5 minutes (their next rows are written well ahead: the PLANNED lane, kept once done), one-time
    # jobs, and jobs every minute (their next rows go to the late lane, removed once done)
    world = System()
    try:
        slow = [world.submit(every(5, at(2, s))) for s in range(0, 60, 6)]
        [world.submit(JobSpec(At(at(4, s)), {})) for s in range(0, 60, 10)]
        fast = [world.submit(every(1, at(2, 30)))]
        world.run_until(at(25))
    finally:
        world.close()

    assert world.repaired() == Counter()
    walked = sum(r.jobs_walked for r in world.reports)
    # Each job whose fire fell due in a window was read only when its row was not among the done partitions' rows:
    # the slow jobs' fires after the first (planned ahead) never, the fast job's every time
    slow_ids = {job.job_id for job in slow}
    assert walked >= len(world.store.jobs) * 20
    assert sum(r.history_reads for r in world.reports) <= 25 + len(slow_ids) + 6  # the fast job, first runs
    assert world.fires_published(fast[0])[:3] == ["2026-11-22T10:02:30.000Z", "2026-11-22T10:03:30.000Z",
                                                  "2026-11-22T10:04:30.000Z"]


def test_each_reason_is_counted_and_a_pass_after_the_repairs_repairs_nothing(system: System) -> None:
    # Given a lost fire and a lost retry, in one system
    fire = system.submit(every(2, at(2)))
    retried = system.submit(JobSpec(At(at(2)), {}, retry=RetryPolicy(max_retries=1, initial_delay_s=100,
                                                                     multiplier=1, max_delay_s=100)))
    system.answer = lambda message: None if message.value["job_id"] == retried.job_id and message.value[
        "attempt"] == 1 else True
    system.run_until(at(2, 5))
    fail_and_lose_retry(system, retried, at(2))
    system.run_until(at(3))
    system.lose(execution_id_for(fire.job_id, at(4), 1, Trigger.SCHEDULE))

    system.run_until(at(12))
    counted = system.repaired()
    system.run_until(at(20))

    assert counted == Counter({"missed_fire": 1, "missed_retry": 1})
    assert system.repaired() == counted  # the passes after it found nothing


def test_the_walk_goes_page_by_page_within_its_rate_and_resumes_in_the_next_run() -> None:
    # Given more jobs than one run may walk (pages of 3, 1 job a second, 8-second runs)
    world = System(reconcile_page_size=3, reconcile_rate=1, reconcile_interval_s=10)
    try:
        [world.submit(every(5, at(2))) for _ in range(20)]
        world.run_until(at(8))
    finally:
        world.close()

    reports = [r for r in world.reports if r.window is not None]
    # Then each run walked at most what its rate allows in its budget, in pages of at most 3
    assert all(r.jobs_walked <= 9 for r in reports)
    assert all(r.jobs_walked <= 3 * r.walk_pages for r in reports)
    # And a pass spans runs: some run ended without finishing it, and a later one finished it
    assert any(not r.pass_done for r in reports) and any(r.pass_done for r in reports)


def test_repairs_are_logged_with_the_job_the_fire_and_the_reason(
    system: System, caplog: pytest.LogCaptureFixture
) -> None:
    job = system.submit(every(2, at(2)))
    system.run_until(at(3))
    system.lose(execution_id_for(job.job_id, at(4), 1, Trigger.SCHEDULE))

    with caplog.at_level(logging.WARNING, logger="jobrunner.services.reconcile"):
        system.run_until(at(10))

    [line] = [r for r in caplog.records if r.getMessage().startswith("execution repaired")]
    assert line.job_id == job.job_id  # type: ignore[attr-defined]
    assert line.fire == "2026-11-22T10:04:00.000Z"  # type: ignore[attr-defined]
    assert line.reason == "missed_fire"  # type: ignore[attr-defined]


def test_a_run_while_another_holds_the_lease_does_nothing(system: System) -> None:
    # Given a run in progress (an event delivered twice: two invocations at once)
    from jobrunner.ports import RECONCILER_LEASE, RECONCILER_SEGMENT

    assert system.leases.acquire(RECONCILER_SEGMENT, RECONCILER_LEASE, "other", system.clock.now(), 60)
    state = system.leases.reconciler_state

    # When another starts, Then it reads nothing, writes nothing, and says so
    report = system.container.reconciler.run()
    assert report.skipped and report.jobs_walked == 0
    assert system.leases.reconciler_state == state
    # And once the lease is given up, the next run goes on
    system.leases.release(RECONCILER_SEGMENT, RECONCILER_LEASE, "other", system.clock.now())
    assert not system.container.reconciler.run().skipped


def test_a_warm_reconciler_reads_each_done_partition_once_a_pass() -> None:
    # Given a pass that spans runs (pages of 3 jobs, 1 job a second) in one warm environment (one service)
    world = System(reconcile_page_size=3, reconcile_rate=1, reconcile_interval_s=10)
    try:
        [world.submit(every(5, at(2))) for _ in range(20)]
        world.reconciling = False
        world.run_until(at(6, 30))
        service = world.container.reconciler
        first = service.run()
        world.run_until(at(7, 30))
        second = service.run()
    finally:
        world.close()

    # Then its second run of the pass read only the partitions done since the first (2 segments, 1 minute)
    assert first.window == second.window and not first.pass_done
    assert first.index_partitions > 2
    assert second.index_partitions == 2


def test_a_fire_planned_within_a_jitter_window_since_removed_is_not_repaired_before_its_due_instant(
    system: System,
) -> None:
    # Given jobs every 5 minutes with a jitter window of 4 minutes, whose 10:07 fires are planned (when 10:02 fires)
    # at their offsets within it; then their jitter is removed (a change of settings: planned rows keep their keys)
    jobs = [system.submit(every(5, at(2), jitter_s=240)) for _ in range(8)]
    system.run_until(at(6, 10))
    for job in jobs:
        system.container.jobs.change(USER, job.job_id, SpecChange(jitter_s=None))

    # When time runs on past every jittered instant
    system.run_until(at(16))

    # Then each 10:07 fire was published once, at its planned instant, and nothing was taken for lost
    assert system.repaired() == Counter()
    for job in jobs:
        assert system.fires_published(job)[:2] == ["2026-11-22T10:02:00.000Z", "2026-11-22T10:07:00.000Z"]
    assert len(system.publisher.sent) == len({m.value["execution_id"] for m in system.publisher.sent})
