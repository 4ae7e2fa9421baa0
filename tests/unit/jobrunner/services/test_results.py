"""ResultsService: results and timeouts move executions to SUCCESS or FAILED, retry with backoff, dead-letter.

The unit tests set the store up as the scan leaves it after publishing (a RUNNING record); the stories
at the end drive the whole loop with memory adapters and a manual clock: scan -> worker report ->
retry row -> next scan.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import (
    RUN_RECORDS,
    ExecutionRecord,
    ExecutionStatus,
    Job,
    JobStatus,
    Lane,
    Trigger,
    execution_id_for,
    with_runs,
)
from jobrunner.domain.placement import place, plan_execution
from jobrunner.domain.receipts import v1_result_token
from jobrunner.domain.schedules import At, Every, parse_instant
from jobrunner.domain.spec import JobSpec, RetryPolicy
from jobrunner.ports import Completion, ScanRequest
from jobrunner.services.results import WorkerReport
from tests.support.memory import memory_container
from tests.support.results import RESULT_KEY, signed
from tests.support.waiting import waiting

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from jobrunner.domain.jobs import ScheduledExecution
    from jobrunner.ports import OutboundMessage
    from jobrunner.services.scan import ScanReport

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
FIRE = datetime(2026, 11, 22, 10, 10, tzinfo=UTC)  # the job's (first) fire
JITTER = 0.5
RETRY = RetryPolicy(max_retries=2, initial_delay_s=10, multiplier=2, max_delay_s=300)
#: One segment, and the key the workers' reports are signed with (``signed``).
SETTINGS = {"JOBRUNNER_SEGMENTS": "1", "JOBRUNNER_RESULT_KEY": RESULT_KEY}


@dataclass
class World:
    jitter: float = JITTER
    clock: ManualClock = field(default_factory=lambda: ManualClock(NOW))
    store: MemoryJobStore = field(default_factory=MemoryJobStore)
    publisher: MemoryPublisher = field(default_factory=MemoryPublisher)
    leases: MemoryLeaseStore = field(default_factory=MemoryLeaseStore)
    #: Settings a test names besides ``SETTINGS`` (a deployment's).
    settings: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        container = memory_container({**SETTINGS, **self.settings}, clock=self.clock, store=self.store,
                                     publisher=self.publisher, leases=self.leases, jitter=lambda: self.jitter)
        self.jobs, self.outcomes, self.results = container.jobs, container.outcomes, container.results
        self.scans = container.scans

    def submit(self, schedule: Any = None, retry: RetryPolicy = RETRY, timeout_s: int | None = None) -> Job:
        new = JobSpec(schedule or At(FIRE), {"report": "daily"}, retry=retry, timeout_s=timeout_s)
        return self.jobs.submit("alice", new)[0]

    def publish(self, job: Job, scheduled_at: datetime = FIRE, attempt: int = 1,
                trigger: Trigger = Trigger.SCHEDULE) -> ExecutionRecord:
        """Leave the store as the scan does once it has published this execution."""
        row = plan_execution(self.job(job), scheduled_at, self.clock.now(), 1, trigger=trigger, attempt=attempt,
                             scheduled_at=scheduled_at)
        record = ExecutionRecord(
            job_id=job.job_id, scheduled_at=scheduled_at, attempt=attempt, execution_id=row.execution_id,
            user_id=job.user_id, status=ExecutionStatus.RUNNING, trigger=trigger, due_at=row.due_at,
            published_at=self.clock.now(), job_version=row.job_version,
            next_fire_at=job.spec.schedule.next_fire_after(scheduled_at)
            if trigger is Trigger.SCHEDULE and job.spec.schedule.recurring else None,
        )
        self.store.write_started([record])
        self.store.settle_published([Completion(done=row, following=None)])
        self.store.rows.clear()  # the first run's own row is done
        return record

    def report(self, record: ExecutionRecord, success: bool, error: str | None = None, hint: bool = True) -> str:
        return self.results.apply(signed(WorkerReport(
            execution_id=record.execution_id, job_id=record.job_id, success=success, error=error,
            scheduled_at=record.scheduled_at if hint else None, attempt=record.attempt if hint else None,
        ), record.user_id, record.attempt))

    def waiting(self) -> list[ScheduledExecution]:
        """The rows a scan will still read (a done partition keeps its PLANNED rows until they expire)."""
        return waiting(self.store, self.leases)

    def job(self, job: Job) -> Job:
        """The job as the API shows it: its run fields derived from its history."""
        stored = self.store.jobs[(job.user_id, job.job_id)]
        return with_runs(stored, self.store.latest_records([job.job_id], RUN_RECORDS)[job.job_id])

    def record(self, job: Job, attempt: int, scheduled_at: datetime = FIRE) -> ExecutionRecord:
        """The one record of that fire and attempt."""
        [record] = [r for r in self.store.records.values()
                    if (r.job_id, r.scheduled_at, r.attempt) == (job.job_id, scheduled_at, attempt)]
        return record

    def snapshot(self) -> tuple[Any, ...]:
        return copy.deepcopy((self.store.jobs, self.store.rows, self.store.records, self.publisher.sent))

    def scan(self, bucket: datetime) -> ScanReport:
        self.clock.set(max(self.clock.now(), bucket - timedelta(seconds=30)))
        return self.scans.scan(ScanRequest(segment=0, bucket=bucket))


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def running(world: World) -> tuple[Job, ExecutionRecord]:
    """A one-time job with two retries whose first attempt was published at its fire."""
    job = world.submit()
    world.clock.set(FIRE)
    record = world.publish(job)
    world.clock.set(FIRE + timedelta(seconds=42))  # the worker reports 42 s later
    return job, record


# -- success and failure --------------------------------------------------------------------------------


def test_success_finishes_the_record_and_the_job(world: World, running: tuple[Job, ExecutionRecord]) -> None:
    job, record = running
    assert world.report(record, True) == "succeeded"
    assert world.record(job, 1) == replace(
        record, status=ExecutionStatus.SUCCESS, finished_at=FIRE + timedelta(seconds=42), error=None
    )
    assert (world.job(job).last_status, world.job(job).status) == (ExecutionStatus.SUCCESS, JobStatus.SUCCESS)
    assert world.waiting() == [] and world.publisher.sent == []
    assert world.results.counters.outcomes == {"succeeded": 1}


def test_failure_with_retries_left_plans_the_next_attempt_after_a_backoff(
    world: World, running: tuple[Job, ExecutionRecord]
) -> None:
    job, record = running
    now = world.clock.now()
    assert world.report(record, False, "ValueError: no data") == "retrying"
    failed = world.record(job, 1)
    assert (failed.status, failed.error, failed.finished_at) == (ExecutionStatus.FAILED, "ValueError: no data", now)
    [retry] = world.waiting()
    # base 10 s, equal jitter 0.5: 7.5 s
    assert (retry.trigger, retry.attempt, retry.scheduled_at, retry.due_at) == (
        Trigger.RETRY, 2, FIRE, now + timedelta(seconds=7.5)
    )
    assert retry.execution_id == execution_id_for(job.job_id, FIRE, 2, Trigger.RETRY)
    assert (retry.bucket, retry.lane) == place(retry.due_at, now)
    assert (retry.job_version, retry.user_id, retry.job_id) == (job.version, "alice", job.job_id)
    assert (world.job(job).last_status, world.job(job).status) == (ExecutionStatus.SCHEDULED, JobStatus.SCHEDULED)
    assert world.publisher.sent == []


def test_a_cancelled_execution_fails_with_no_retry_and_no_dead_letter(
    world: World, running: tuple[Job, ExecutionRecord]
) -> None:
    # Given a job with retries left, whose execution its worker stopped on a cancel message (cancel_other)
    job, record = running
    outcome = world.results.apply(signed(WorkerReport(
        execution_id=record.execution_id, job_id=job.job_id, success=False, scheduled_at=record.scheduled_at,
        attempt=1, error="cancelled: overlap policy cancel_other: the fire at 10:11 replaces it", cancelled=True),
        "alice"))
    # Then it is FAILED with the reason, never retried nor dead-lettered: a newer fire replaced it
    assert outcome == "cancelled"
    assert world.record(job, 1).status is ExecutionStatus.FAILED and "cancelled" in (world.record(job, 1).error or "")
    assert world.waiting() == [] and world.publisher.sent == []


@pytest.mark.parametrize("jitter", [0.0, 0.25, 0.999999])
def test_retry_is_due_between_half_the_base_and_the_base(jitter: float) -> None:
    world = World(jitter=jitter)
    job = world.submit()
    world.clock.set(FIRE)
    world.report(world.publish(job), False)
    [retry] = world.waiting()
    assert FIRE + timedelta(seconds=5) <= retry.due_at < FIRE + timedelta(seconds=10)


def test_later_attempts_back_off_longer(world: World, running: tuple[Job, ExecutionRecord]) -> None:
    job, _ = running
    world.clock.set(FIRE + timedelta(minutes=1))
    second = world.publish(job, attempt=2, trigger=Trigger.RETRY)
    assert world.report(second, False, "again") == "retrying"
    [retry] = world.waiting()
    assert (retry.attempt, retry.due_at) == (3, FIRE + timedelta(minutes=1, seconds=15))  # base 20 s


def test_failure_without_retries_left_is_dead_lettered(world: World) -> None:
    job = world.submit(retry=RetryPolicy(max_retries=0))
    world.clock.set(FIRE)
    record = world.publish(job)
    assert world.report(record, False, "KeyError: 'id'") == "dead_lettered"
    [letter] = world.publisher.sent
    assert (letter.topic, letter.key) == ("job-dlq", job.job_id)
    assert letter.value == {
        "execution_id": record.execution_id, "job_id": job.job_id, "user_id": "alice",
        "scheduled_at": "2026-11-22T10:10:00.000Z", "attempt": 1, "payload": {"report": "daily"},
        "error": "KeyError: 'id'",
    }
    assert letter.headers == {"execution_id": record.execution_id, "scheduled_at": "2026-11-22T10:10:00.000Z",
                              "attempt": "1"}
    assert world.record(job, 1).status is ExecutionStatus.FAILED
    assert world.waiting() == []
    assert (world.job(job).last_status, world.job(job).status) == (ExecutionStatus.FAILED, JobStatus.FAILED)


def test_last_attempt_failing_is_dead_lettered_to_the_configured_topic() -> None:
    world = World(settings={"JOBRUNNER_DLQ_TOPIC": "payroll-dlq"})
    job = world.submit()
    world.clock.set(FIRE + timedelta(minutes=2))
    third = world.publish(job, attempt=3, trigger=Trigger.RETRY)
    outcome = world.results.apply(signed(WorkerReport(third.execution_id, job.job_id, False, None, FIRE, 3), "alice"))
    assert outcome == "dead_lettered"
    [letter] = world.publisher.sent
    assert (letter.topic, letter.value["attempt"], letter.value["error"]) == ("payroll-dlq", 3, "failed")


def test_result_of_an_older_run_leaves_the_jobs_status_alone(world: World) -> None:
    # Given a recurring job whose 10:10 run was published, then its 10:11 run
    job = world.submit(schedule=Every(timedelta(minutes=1), start=FIRE))
    world.clock.set(FIRE)
    first = world.publish(job)
    world.clock.set(FIRE + timedelta(minutes=1))
    world.publish(job, scheduled_at=FIRE + timedelta(minutes=1))
    # When the 10:10 run reports
    assert world.report(first, True) == "succeeded"
    # Then its record is finished, and the job still shows its latest run as running
    assert world.record(job, 1).status is ExecutionStatus.SUCCESS
    assert world.job(job).last_status is ExecutionStatus.RUNNING


# -- results that change nothing ------------------------------------------------------------------------


def test_result_for_an_unknown_execution_is_ignored(world: World, running: tuple[Job, ExecutionRecord]) -> None:
    job, _ = running
    before = world.snapshot()
    outcome = world.results.apply(signed(WorkerReport("no-such-execution", job.job_id, False, "x"), "alice"))
    assert outcome == world.results.apply(signed(WorkerReport("x", "no-such-job", True, None, FIRE, 1), "alice")) \
        == "ignored_unknown"
    assert world.snapshot() == before
    assert world.results.counters.outcomes == {"ignored_unknown": 2}


@pytest.mark.parametrize("first", [True, False], ids=["after-success", "after-failure"])
@pytest.mark.parametrize("second", [True, False], ids=["success", "failure"])
def test_result_for_a_finished_execution_is_ignored(
    world: World, running: tuple[Job, ExecutionRecord], first: bool, second: bool
) -> None:
    _, record = running
    world.report(record, first, "boom")
    before = world.snapshot()
    world.clock.advance(timedelta(seconds=5))
    assert world.report(record, second, "again") == "ignored_finished"
    assert world.snapshot() == before  # no second retry, no second dead letter
    assert world.results.counters.outcomes["ignored_finished"] == 1


def test_result_for_a_cancelled_job_is_ignored(world: World, running: tuple[Job, ExecutionRecord]) -> None:
    job, record = running
    world.jobs.cancel("alice", job.job_id)
    before = world.snapshot()
    assert world.report(record, False, "boom") == "ignored_cancelled"
    assert world.snapshot() == before
    assert world.results.counters.outcomes == {"ignored_cancelled": 1}


def test_result_without_fire_and_attempt_is_found_by_execution_id(
    world: World, running: tuple[Job, ExecutionRecord]
) -> None:
    job, record = running
    assert world.report(record, True, hint=False) == "succeeded"
    assert world.record(job, 1).status is ExecutionStatus.SUCCESS


def test_result_with_a_wrong_hint_is_found_by_execution_id(
    world: World, running: tuple[Job, ExecutionRecord]
) -> None:
    job, record = running
    wrong = signed(WorkerReport(record.execution_id, job.job_id, True, None, FIRE + timedelta(seconds=1), 7), "alice",
                   attempt=1)  # the token of the execution the worker holds, whatever its report says
    assert world.results.apply(wrong) == "succeeded"
    assert world.record(job, 1).status is ExecutionStatus.SUCCESS


def test_outcomes_are_counted(world: World, running: tuple[Job, ExecutionRecord]) -> None:
    job, record = running
    world.report(record, False)
    world.report(record, False)
    world.results.apply(signed(WorkerReport("nope", job.job_id, True), "alice"))
    assert world.results.counters.outcomes == {"retrying": 1, "ignored_finished": 1, "ignored_unknown": 1}


# -- a batch of results ---------------------------------------------------------------------------------


def _mixed_batch(world: World) -> list[WorkerReport]:
    """Reports of six executions: successes, a failure with retries left, a last attempt failing, an unknown
    execution, one without its token, and one execution reported twice (with and without the hint)."""
    last = RetryPolicy(max_retries=0)
    jobs = [world.submit(), world.submit(), world.submit(retry=last), world.submit(), world.submit()]
    world.clock.set(FIRE)
    records = [world.publish(job) for job in jobs]
    world.clock.set(FIRE + timedelta(seconds=5))

    def report(record: ExecutionRecord, success: bool, hint: bool = True) -> WorkerReport:
        return signed(WorkerReport(record.execution_id, record.job_id, success, None if success else "boom",
                                   record.scheduled_at if hint else None, record.attempt if hint else None),
                      record.user_id, record.attempt)

    unsigned = replace(report(records[4], True), result_token=None)
    return [report(records[0], True), report(records[1], False), report(records[2], False),
            signed(WorkerReport("nope", jobs[0].job_id, True), "alice"), unsigned, report(records[3], True),
            report(records[3], False, hint=False), report(records[0], True)]


def test_a_batch_ends_each_execution_as_its_reports_one_by_one_would() -> None:
    # Given two identical worlds and the same reports
    one_by_one, batched = World(), World()
    reports, same = _mixed_batch(one_by_one), _mixed_batch(batched)
    # When one applies them one at a time and the other as one batch
    each = [one_by_one.results.apply(report) for report in reports]
    together = batched.results.apply_many(same)
    # Then every report has the same outcome, and both stores and topics end the same
    assert together == ["succeeded", "retrying", "dead_lettered", "ignored_unknown", "refused_token", "succeeded",
                        "ignored_finished", "ignored_finished"]
    assert each == together
    assert len(batched.store.records) == len(one_by_one.store.records) == 5
    assert sorted(r.status for r in batched.store.records.values()) == sorted(
        r.status for r in one_by_one.store.records.values())
    assert len(batched.store.rows) == len(one_by_one.store.rows) == 1  # the retry
    assert [m.topic for m in batched.publisher.sent] == [m.topic for m in one_by_one.publisher.sent] == ["job-dlq"]


def test_a_batch_reads_and_writes_in_a_few_round_trips() -> None:
    # Given 40 executions published, and a store that counts its calls
    world = World()
    jobs = [world.submit() for _ in range(40)]
    world.clock.set(FIRE)
    records = [world.publish(job) for job in jobs]
    world.clock.set(FIRE + timedelta(seconds=5))
    calls: list[str] = []
    store = world.store

    class Counting:
        def __getattr__(self, name: str) -> Any:
            calls.append(name)
            return getattr(store, name)

    results = memory_container(SETTINGS, clock=world.clock, store=Counting(), publisher=world.publisher,
                               leases=world.leases, jitter=lambda: JITTER).results
    # When their 40 reports (half failed) are applied as one batch
    outcomes = results.apply_many([signed(WorkerReport(r.execution_id, r.job_id, n % 2 == 0, "boom",
                                                       r.scheduled_at, r.attempt), r.user_id)
                                   for n, r in enumerate(records)])
    # Then one read of the records, one of the jobs, one write of the retries' rows and then one of the records
    # did it all (the rows first, checked in time, then the records: the store's writes are the same as when one
    # call wrote both)
    assert outcomes.count("succeeded") == 20 and outcomes.count("retrying") == 20
    assert calls == ["get_records", "get_jobs", "write_scheduled", "write_outcomes"]


# -- timeouts (the watchdog) ----------------------------------------------------------------------------


def watchdog_of(world: World, job: Job, record: ExecutionRecord) -> ScheduledExecution:
    assert job.spec.timeout_s is not None and record.published_at is not None
    return plan_execution(job, record.published_at + timedelta(seconds=job.spec.timeout_s),
                          world.clock.now(), 1, trigger=Trigger.TIMEOUT, attempt=record.attempt,
                          scheduled_at=record.scheduled_at)


def test_watchdog_fails_a_silent_execution_and_retries_it(world: World) -> None:
    job = world.submit(timeout_s=30)
    world.clock.set(FIRE)
    record = world.publish(job)
    world.clock.set(FIRE + timedelta(seconds=30))
    assert world.outcomes.expire(watchdog_of(world, job, record)) == "timed_out_retrying"
    failed = world.record(job, 1)
    assert (failed.status, failed.error, failed.finished_at) == (
        ExecutionStatus.FAILED, "no result within 30 s", FIRE + timedelta(seconds=30)
    )
    [retry] = world.waiting()
    assert (retry.trigger, retry.attempt, retry.due_at) == (Trigger.RETRY, 2, FIRE + timedelta(seconds=37.5))


def test_watchdog_of_the_last_attempt_dead_letters_it(world: World) -> None:
    job = world.submit(retry=RetryPolicy(max_retries=1), timeout_s=30)
    world.clock.set(FIRE + timedelta(minutes=1))
    record = world.publish(job, attempt=2, trigger=Trigger.RETRY)
    world.clock.advance(timedelta(seconds=30))
    assert world.outcomes.expire(watchdog_of(world, job, record)) == "timed_out_dead_lettered"
    [letter] = world.publisher.sent
    assert (letter.topic, letter.value["attempt"], letter.value["error"]) == ("job-dlq", 2, "no result within 30 s")
    assert world.waiting() == []


@pytest.mark.parametrize("success", [True, False])
def test_watchdog_of_a_reported_execution_is_cleared(world: World, success: bool) -> None:
    job = world.submit(timeout_s=30)
    world.clock.set(FIRE)
    record = world.publish(job)
    world.clock.advance(timedelta(seconds=10))
    world.report(record, success)
    before = world.snapshot()
    world.clock.advance(timedelta(seconds=20))
    assert world.outcomes.expire(watchdog_of(world, job, record)) == "watchdog_cleared"
    assert world.snapshot() == before


def test_watchdog_of_an_unknown_execution_is_cleared(world: World) -> None:
    job = world.submit(timeout_s=30)
    world.clock.set(FIRE)
    record = world.publish(job)
    world.store.records.clear()
    assert world.outcomes.expire(watchdog_of(world, job, record)) == "watchdog_cleared"


# -- stories: the whole loop with memory adapters ---------------------------------------------------------


def report_of(message: OutboundMessage, success: bool, error: str | None = None) -> WorkerReport:
    """What our worker sends back for ``message``."""
    value = message.value
    return WorkerReport(execution_id=value["execution_id"], job_id=value["job_id"], success=success, error=error,
                        scheduled_at=parse_instant(value["scheduled_at"], "scheduled_at"), attempt=value["attempt"],
                        result_token=value["result_token"])


def test_a_job_that_fails_twice_then_succeeds(world: World) -> None:
    # Given a one-time job with two retries (10 s initial delay, doubling) and a worker that fails twice
    job = world.submit()
    worker_says = {1: False, 2: False, 3: True}
    published: list[tuple[int, datetime, str]] = []
    reported: list[datetime] = []
    # When each execution's partition is scanned and the worker reports after the scan
    bucket = FIRE
    for _ in range(3):
        sent_before = len(world.publisher.sent)
        report = world.scan(bucket)
        [message] = world.publisher.sent[sent_before:]
        assert report.published == 1
        published_at = world.job(job).last_run_at
        assert published_at is not None
        published.append((message.value["attempt"], published_at, message.value["trigger"]))
        reported.append(world.clock.now())
        attempt = message.value["attempt"]
        world.results.apply(report_of(message, worker_says[attempt], None if worker_says[attempt] else "exit 1"))
        retries = world.waiting()
        if retries:
            [retry] = retries
            assert retry.lane is Lane.LATE
            bucket = retry.bucket
    # Then attempts 1, 2, 3 ran, each retry after its backoff (7.5 s, then 15 s, jitter 0.5)
    assert [(a, trigger) for a, _, trigger in published] == [(1, "SCHEDULE"), (2, "RETRY"), (3, "RETRY")]
    assert published[0][1] == FIRE
    assert published[1][1] - reported[0] == timedelta(seconds=7.5)
    assert published[2][1] - reported[1] == timedelta(seconds=15)
    # and the history shows them newest first: SUCCESS, FAILED, FAILED, all of the 10:10 fire
    history = world.store.history_page(job.job_id, 10)
    assert [(r.attempt, r.status, r.error) for r in history] == [
        (3, ExecutionStatus.SUCCESS, None),
        (2, ExecutionStatus.FAILED, "exit 1"),
        (1, ExecutionStatus.FAILED, "exit 1"),
    ]
    assert {r.scheduled_at for r in history} == {FIRE}
    assert len({r.execution_id for r in history}) == 3
    assert (world.job(job).status, world.job(job).last_execution_id) == (JobStatus.SUCCESS, history[0].execution_id)
    assert world.waiting() == []
    assert [m.topic for m in world.publisher.sent] == ["jobs"] * 3  # nothing dead-lettered
    assert world.results.counters.outcomes == {"retrying": 2, "succeeded": 1}


def test_a_job_whose_worker_never_reports_is_failed_by_its_watchdog_and_dead_lettered(world: World) -> None:
    # Given a one-time job with a 30 s timeout and one retry, and a worker that never reports
    job = world.submit(retry=RetryPolicy(max_retries=1, initial_delay_s=10), timeout_s=30)
    # When its minute is scanned: attempt 1 at 10:10:00, its watchdog at :30 fails it, attempt 2 at :37.5
    first = world.scan(FIRE)
    # and the next minute's scan meets attempt 2's watchdog at 10:11:07.5
    second = world.scan(FIRE + timedelta(minutes=1))
    # Then both attempts were published, each failed by its watchdog, and the last one dead-lettered
    jobs_sent = [m for m in world.publisher.sent if m.topic == "jobs"]
    assert [m.value["attempt"] for m in jobs_sent] == [1, 2]
    [letter] = [m for m in world.publisher.sent if m.topic == "job-dlq"]
    assert (letter.key, letter.value["attempt"], letter.value["error"]) == (job.job_id, 2, "no result within 30 s")
    assert letter.value["execution_id"] == jobs_sent[1].value["execution_id"]
    history = world.store.history_page(job.job_id, 10)
    assert [(r.attempt, r.status, r.error) for r in history] == [
        (2, ExecutionStatus.FAILED, "no result within 30 s"), (1, ExecutionStatus.FAILED, "no result within 30 s"),
    ]
    assert history[1].finished_at == FIRE + timedelta(seconds=30)
    assert history[0].published_at == FIRE + timedelta(seconds=37.5)
    assert history[0].finished_at == FIRE + timedelta(seconds=67.5)
    assert (first.published, first.expired, second.published, second.expired) == (2, 1, 0, 1)
    assert (world.job(job).status, world.job(job).last_status) == (JobStatus.FAILED, ExecutionStatus.FAILED)
    assert world.waiting() == []
    assert world.results.counters.outcomes == {"timed_out_retrying": 1, "timed_out_dead_lettered": 1}


class PromptClock(ManualClock):
    """A manual clock that lets a worker run whenever the scan waits: results arrive while it scans."""

    def __init__(self, start: datetime) -> None:
        super().__init__(start)
        self.worker: Callable[[], None] = lambda: None

    def sleep_until(self, instant: datetime) -> None:
        self.worker()
        super().sleep_until(instant)


def test_a_job_that_reports_in_time_is_left_alone_by_its_watchdog() -> None:
    # Given a job with a 30 s timeout and a worker that reports success as soon as the scan waits
    clock = PromptClock(NOW)
    world = World(clock=clock)
    job = world.submit(timeout_s=30)
    answered: list[OutboundMessage] = []

    def worker() -> None:
        for message in world.publisher.sent[len(answered):]:
            answered.append(message)
            world.results.apply(report_of(message, True))

    clock.worker = worker
    # When its minute is scanned
    report = world.scan(FIRE)
    # Then the watchdog comes due, finds the execution finished and does nothing more
    assert (report.published, report.expired) == (1, 1)
    assert world.results.counters.outcomes == {"succeeded": 1, "watchdog_cleared": 1}
    assert world.job(job).status is JobStatus.SUCCESS
    assert world.waiting() == []
    assert [m.topic for m in world.publisher.sent] == ["jobs"]


# -- a run now at the very instant of a scheduled fire: two executions, one (fire, attempt) ------------------


def run_now_at_the_fire(world: World, timeout_s: int | None = None) -> Job:
    """A recurring job with one retry, and a run now requested at the very millisecond of its 10:10 fire."""
    job = world.submit(Every(every=timedelta(hours=1), start=FIRE), retry=RetryPolicy(max_retries=1),
                       timeout_s=timeout_s)
    world.clock.set(FIRE)
    world.jobs.run_now("alice", job.job_id)
    return job


def test_a_run_now_at_the_instant_of_a_fire_has_both_results_applied(world: World) -> None:
    # Given a run now at the instant of the job's scheduled fire: same scheduled_at, same attempt
    job = run_now_at_the_fire(world)
    # When the minute is scanned and the worker fails both executions
    world.scan(FIRE)
    first = [m for m in world.publisher.sent if m.topic == "jobs"]
    assert sorted(m.value["trigger"] for m in first) == ["MANUAL", "SCHEDULE"]
    outcomes = [world.results.apply(report_of(m, False, "exit 1")) for m in first]
    # Then each failure is applied to its own execution and retried (none is "ignored_unknown")
    assert outcomes == ["retrying", "retrying"]
    # and the two retries are two executions, each published, failed and dead-lettered in turn
    retries = [r for r in world.waiting() if r.trigger is Trigger.RETRY]
    assert len({r.execution_id for r in retries}) == 2
    for bucket in sorted({r.bucket for r in retries}):
        world.scan(bucket)
    second = [m for m in world.publisher.sent if m.topic == "jobs"][2:]
    assert [m.value["attempt"] for m in second] == [2, 2]
    assert [world.results.apply(report_of(m, False, "exit 2")) for m in second] == ["dead_lettered"] * 2
    letters = [m for m in world.publisher.sent if m.topic == "job-dlq"]
    assert {m.value["execution_id"] for m in letters} == {m.value["execution_id"] for m in second}
    # and the history holds all four executions, each FAILED
    history = world.store.history_page(job.job_id, 10)
    assert {r.execution_id for r in history} == {m.value["execution_id"] for m in first + second}
    assert [r.status for r in history] == [ExecutionStatus.FAILED] * 4


def test_a_run_now_at_the_instant_of_a_fire_times_out_on_its_own_watchdog(world: World) -> None:
    # Given a run now at the instant of the fire of a job with a 30 s timeout, and a worker that never reports
    job = run_now_at_the_fire(world, timeout_s=30)
    # When the minute and the next are scanned (each execution's watchdog, then each retry's)
    world.scan(FIRE)
    world.scan(FIRE + timedelta(minutes=1))
    # Then each of the four executions was failed by its own watchdog: the first two retried, the retries
    # dead-lettered
    sent = [m for m in world.publisher.sent if m.topic == "jobs"]
    assert sorted((m.value["attempt"], m.value["trigger"]) for m in sent) == [
        (1, "MANUAL"), (1, "SCHEDULE"), (2, "RETRY"), (2, "RETRY")]
    assert world.results.counters.outcomes == {"timed_out_retrying": 2, "timed_out_dead_lettered": 2}
    letters = [m for m in world.publisher.sent if m.topic == "job-dlq"]
    assert sorted(m.value["execution_id"] for m in letters) == sorted(
        m.value["execution_id"] for m in sent if m.value["attempt"] == 2)
    history = world.store.history_page(job.job_id, 10)
    assert len({r.execution_id for r in history}) == 4
    assert {(r.status, r.error) for r in history} == {(ExecutionStatus.FAILED, "no result within 30 s")}


# -- forged results (DESIGN.md: a result is accepted only from a holder of that execution's message) ------


@pytest.mark.parametrize("token", ["missing", "wrong", "another execution's", "another key's"])
def test_a_result_without_its_executions_token_is_refused_and_changes_nothing(
    world: World, running: tuple[Job, ExecutionRecord], token: str
) -> None:
    # Given an execution in flight, and a result built from what anyone can see of it (ids, fire, attempt)
    job, record = running
    forged = WorkerReport(record.execution_id, job.job_id, True, None, FIRE, 1)
    other = world.publish(world.submit(), FIRE, 1)
    tokens = {"missing": None, "wrong": "x" * 43,
              "another execution's": signed(WorkerReport(other.execution_id, job.job_id, True), "alice").result_token,
              "another key's": signed(forged, "alice", key=b"a guessed key").result_token}
    before = (dict(world.store.records), dict(world.store.rows), dict(world.store.jobs))
    # When it reaches the results function, as SUCCESS and as FAILED
    outcomes = [world.results.apply(replace(forged, result_token=tokens[token], success=success))
                for success in (True, False)]
    # Then both are refused and counted, and nothing changed: no status, no retry, no dead letter
    assert outcomes == ["refused_token", "refused_token"]
    assert world.results.counters.outcomes == {"refused_token": 2}
    assert (dict(world.store.records), dict(world.store.rows), dict(world.store.jobs)) == before
    assert world.publisher.sent == []
    # and the worker that holds the message still gets its result applied
    assert world.report(record, True) == "succeeded"


def test_while_unsigned_results_are_accepted_a_wrong_token_is_still_refused() -> None:
    world = World(settings={"JOBRUNNER_ACCEPT_UNSIGNED_RESULTS": "true"})
    job = world.submit()
    world.clock.set(FIRE)
    record = world.publish(job)
    report = WorkerReport(record.execution_id, job.job_id, True, None, FIRE, 1)
    # A result from before tokens (during the upgrade) is applied; one with a token that does not fit is not
    assert world.results.apply(replace(report, result_token="x" * 43)) == "refused_token"
    assert world.results.apply(report) == "succeeded"


def test_a_token_made_for_another_attempt_is_refused_even_when_the_report_claims_that_attempt(
    world: World, running: tuple[Job, ExecutionRecord]
) -> None:
    # Given attempt 1 in flight, and a report with a token made for attempt 2 of its execution id, whose own
    # fields say attempt 2
    job, record = running
    claimed = WorkerReport(record.execution_id, job.job_id, False, "boom", FIRE, 2)
    before = world.snapshot()
    # When it arrives, then it is refused: the token is checked against the attempt the store holds
    assert world.results.apply(signed(claimed, "alice", 2)) == "refused_token"
    assert world.snapshot() == before
    # and the token of the attempt the store holds is taken, whatever the report claims
    assert world.results.apply(signed(claimed, "alice", 1)) == "retrying"


def test_a_token_made_for_another_tenant_is_refused(world: World, running: tuple[Job, ExecutionRecord]) -> None:
    # Given alice's execution in flight, and a token of the same execution id (and attempt) made for bob
    job, record = running
    report = WorkerReport(record.execution_id, job.job_id, True, None, FIRE, 1)
    before = world.snapshot()
    # Then bob's token is refused, and alice's is taken
    assert world.results.apply(signed(report, "bob")) == "refused_token"
    assert world.snapshot() == before
    assert world.results.apply(signed(report, "alice")) == "succeeded"


def _published_with_token(world: World) -> tuple[ExecutionRecord, WorkerReport]:
    """An execution the scan published, its record, and the report its worker sends back (its message's token)."""
    world.submit()
    world.scan(FIRE)
    [message] = world.publisher.sent
    report = report_of(message, True)
    [record] = [r for r in world.store.records.values() if r.execution_id == report.execution_id]
    return record, report


def test_a_messages_token_is_checked_against_the_tenant_the_store_holds_for_its_execution(world: World) -> None:
    # Given a published execution, whose record in the store names another tenant than its message was signed for
    record, report = _published_with_token(world)
    world.store.records[(record.job_id, record.scheduled_at, record.attempt, record.execution_id)] = replace(
        record, user_id="bob")
    before = world.snapshot()
    # When its worker's report comes back with the message's token, then it does not fit: nothing changes
    assert world.results.apply(report) == "refused_token"
    assert world.snapshot() == before


def test_a_messages_token_is_checked_against_the_attempt_the_store_holds_for_its_execution(world: World) -> None:
    # Given a published execution whose record in the store (found by its execution id) says attempt 2, while its
    # message (and the report, with the message's token) says attempt 1
    record, report = _published_with_token(world)
    del world.store.records[(record.job_id, record.scheduled_at, record.attempt, record.execution_id)]
    world.store.write_started([replace(record, attempt=2)])
    before = world.snapshot()
    # Then the token does not fit the stored attempt: refused, nothing changes
    assert world.results.apply(report) == "refused_token"
    assert world.snapshot() == before


def test_the_message_token_of_a_published_execution_is_taken(world: World) -> None:
    _, report = _published_with_token(world)
    assert world.results.apply(report) == "succeeded"


@pytest.mark.parametrize("token", ["none", "wrong", "a real one"])
def test_a_report_of_an_unknown_execution_changes_nothing_whatever_its_token(world: World, token: str) -> None:
    # Given a report for an execution the store does not hold (its token cannot be checked: the store holds no
    # tenant or attempt for it)
    job = world.submit()
    report = WorkerReport("no-such-execution", job.job_id, True, None, FIRE, 1)
    report = {"none": report, "wrong": replace(report, result_token="x" * 43),
              "a real one": signed(report, "alice")}[token]
    before = world.snapshot()
    # Then it changes nothing: refused without a token, as before; else ignored as unknown
    assert world.results.apply(report) == ("refused_token" if token == "none" else "ignored_unknown")
    assert world.snapshot() == before


@pytest.mark.parametrize("accept_v1", [True, False], ids=["accepted", "refused"])
def test_a_first_scheme_token_fits_only_its_own_execution_and_only_while_accepted(accept_v1: bool) -> None:
    # Given an execution published by an older scan, which signed its execution id alone (the first scheme)
    world = World(settings={"JOBRUNNER_ACCEPT_V1_RESULT_TOKENS": str(accept_v1).lower()})
    job = world.submit()
    world.clock.set(FIRE)
    record = world.publish(job)
    other = world.publish(world.submit())
    report = WorkerReport(record.execution_id, job.job_id, True, None, FIRE, 1)
    # Then another execution's first scheme token never fits
    assert world.results.apply(replace(report, result_token=v1_result_token(RESULT_KEY.encode(), other.execution_id))) \
        == "refused_token"
    # and its own fits while the upgrade accepts them, else it is refused like any token that does not fit
    own = replace(report, result_token=v1_result_token(RESULT_KEY.encode(), record.execution_id))
    assert world.results.apply(own) == ("succeeded" if accept_v1 else "refused_token")


@pytest.mark.parametrize("token", ["é" * 43, "\ud800" * 43], ids=["non-ascii", "surrogate"])
def test_a_token_that_cannot_be_one_is_refused_without_failing_the_batch(
    world: World, running: tuple[Job, ExecutionRecord], token: str
) -> None:
    job, record = running
    forged = WorkerReport(record.execution_id, job.job_id, True, None, FIRE, 1, result_token=token)
    assert world.results.apply_many([forged, signed(forged, "alice")]) == ["refused_token", "succeeded"]


class LateRetryStore(MemoryJobStore):
    """A store whose first write of rows returns ``took`` late (the rows it wrote landed behind what their scan
    has read: they are recorded in ``behind``), and whose second write raises (the re-placement fails)."""

    def __init__(self, clock: ManualClock, took: timedelta) -> None:
        super().__init__()
        self.clock, self.took = clock, took
        self.writes = 0
        self.behind: list[ScheduledExecution] = []

    def _rows_written(self, rows: list[ScheduledExecution]) -> None:
        self.writes += 1
        if self.writes == 2:
            raise Unavailable("write timeout: re-placing the late row")
        super().write_scheduled(rows)
        if self.writes == 1:
            self.behind += rows
            self.clock.advance(self.took)

    def write_scheduled(self, rows: Any) -> None:
        if any(r.trigger is Trigger.RETRY for r in rows):
            self._rows_written(list(rows))
        else:
            super().write_scheduled(rows)

    def write_outcomes(self, outcomes: Any) -> None:
        retries = [o.retry for o in outcomes if o.retry is not None]
        if retries:
            self._rows_written(retries)
        super().write_outcomes([replace(o, retry=None) for o in outcomes])


def test_a_failure_whose_retry_row_lands_late_keeps_its_retry_through_a_redelivery() -> None:
    # Given a published execution whose failure's retry row is written 2 s late (behind its scan's late-lane
    # window) and whose re-placement then fails: the results function's batch fails and Kafka delivers again
    world = World()
    world.store = LateRetryStore(world.clock, timedelta(seconds=2))
    world.__post_init__()
    job = world.submit(Every(timedelta(minutes=5), start=FIRE), retry=RetryPolicy(max_retries=1, initial_delay_s=1))
    world.clock.set(FIRE)
    record = world.publish(job)
    world.clock.set(FIRE + timedelta(seconds=1))
    with pytest.raises(Unavailable):
        world.report(record, success=False, error="boom")
    outcome = world.report(record, success=False, error="boom")
    # When the rows that landed behind their scan's reads are as good as lost, and the retry's minute is scanned
    store = world.store
    assert isinstance(store, LateRetryStore)
    store.delete_scheduled(store.behind)
    [retry] = [r for r in store.rows.values() if r.trigger is Trigger.RETRY]
    world.clock.set(retry.bucket - timedelta(seconds=30))
    world.scans.scan(ScanRequest(segment=0, bucket=retry.bucket))
    # Then the retry was published (issue #31: the FAILED record was written before its retry row was in time,
    # so the redelivery answered "ignored_finished" and the retry never ran)
    assert outcome == "retrying"
    assert [(m.value["attempt"], m.value["execution_id"]) for m in world.publisher.sent] == [
        (2, execution_id_for(job.job_id, FIRE, 2, Trigger.RETRY))]


def test_a_result_delivered_again_re_asserts_a_retry_whose_row_is_missing() -> None:
    # Given an execution that failed with a retry planned, whose retry row is then lost
    world = World()
    job = world.submit(Every(timedelta(minutes=5), start=FIRE), retry=RetryPolicy(max_retries=1, initial_delay_s=1))
    world.clock.set(FIRE)
    record = world.publish(job)
    assert world.report(record, success=False, error="boom") == "retrying"
    world.store.delete_scheduled([r for r in world.store.rows.values() if r.trigger is Trigger.RETRY])
    # When the result is delivered again
    assert world.report(record, success=False, error="boom") == "ignored_finished"
    # Then the retry's row is there again, under the retry's execution id, and it is published
    [retry] = [r for r in world.store.rows.values() if r.trigger is Trigger.RETRY]
    assert retry.execution_id == execution_id_for(job.job_id, FIRE, 2, Trigger.RETRY)
    world.clock.set(retry.bucket - timedelta(seconds=30))
    world.scans.scan(ScanRequest(segment=0, bucket=retry.bucket))
    assert [m.value["attempt"] for m in world.publisher.sent] == [2]


# -- failures that say how to retry (a delivery's outcome) ---------------------------------------------------


def test_a_failure_that_would_recur_is_dead_lettered_at_once_with_retries_left(
    world: World, running: tuple[Job, ExecutionRecord]
) -> None:
    # Given a job with two retries left, whose attempt failed in a way that would recur (a delivery's 404)
    job, record = running
    outcome = world.results.apply(signed(WorkerReport(
        execution_id=record.execution_id, job_id=job.job_id, success=False, error="HTTP 404: not found",
        scheduled_at=record.scheduled_at, attempt=1, retryable=False), "alice"))
    # Then it is dead-lettered now, no retry planned
    assert outcome == "dead_lettered"
    assert world.waiting() == []
    [letter] = world.publisher.sent
    assert (letter.topic, letter.value["error"]) == ("job-dlq", "HTTP 404: not found")


@pytest.mark.parametrize(("retry_after_s", "due_after_s"), [
    (None, 7.5),   # the job's own backoff (base 10 s, jitter 0.5)
    (3, 7.5),      # a shorter wait asked for: never sooner than the backoff
    (60, 60),      # a longer one: honoured
    (3600, 300),   # beyond the job's max_delay_s: bounded by it
])
def test_a_retry_after_lengthens_the_backoff_within_the_jobs_bounds(
    world: World, running: tuple[Job, ExecutionRecord], retry_after_s: int | None, due_after_s: float
) -> None:
    job, record = running
    now = world.clock.now()
    wait = timedelta(seconds=retry_after_s) if retry_after_s is not None else None
    outcome = world.results.apply(signed(WorkerReport(
        execution_id=record.execution_id, job_id=job.job_id, success=False, error="HTTP 429",
        scheduled_at=record.scheduled_at, attempt=1, retry_after=wait), "alice"))
    assert outcome == "retrying"
    [retry] = world.waiting()
    assert retry.due_at == now + timedelta(seconds=due_after_s)
