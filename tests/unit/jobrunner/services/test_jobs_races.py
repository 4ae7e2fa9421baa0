"""JobService under requests that race each other and writes whose outcome is unknown (issue #31).

The rules these stories hold the service to (docs/reliability.md): never delete what another writer may own;
settle an unknown outcome by reading, not by waiting; verify, then commit; every idempotent path re-asserts
its row. Each story ends with the scan of the partition concerned (memory adapters, manual clock): what a
change means is what the scan then publishes.
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.quotas.memory import MemoryTenantQuotas
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.domain.errors import Conflict, InvalidField, JobNotFound, LimitReached, Unavailable
from jobrunner.domain.jobs import Job, JobState, Trigger, execution_id_for
from jobrunner.domain.schedules import At, Every, RepeatingInterval
from jobrunner.domain.segments import segment_of
from jobrunner.domain.spec import JobSpec, SpecChange
from jobrunner.ports import ScanRequest
from tests.support.memory import memory_container

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from jobrunner.domain.jobs import ScheduledExecution
    from jobrunner.ports import OutboundMessage
    from jobrunner.services.jobs import JobService

NOW = datetime(2026, 11, 22, 10, 0, 10, tzinfo=UTC)
SEGMENTS = 16
SETTINGS = {"JOBRUNNER_SEGMENTS": str(SEGMENTS)}
#: A bucket far enough ahead of NOW that a row written now goes to its planned lane.
BUCKET = datetime(2026, 11, 22, 10, 10, tzinfo=UTC)


class DoubtfulStore(MemoryJobStore):
    """A store whose job updates can be raced and left in doubt, as a Cassandra cluster's can:

    - ``before_update``: callables run at the next ``update_job`` calls, after its rows are written and before
      its compare-and-set (another request's whole update lands in between: a double click);
    - ``limbo``: the next ``update_job`` writes its rows, leaves its compare-and-set accepted but not committed,
      and raises (a timed-out lightweight transaction); the next ``update_job`` or ``retire_job`` of the job, or
      a ``get_job_settled`` of it, commits it first (as the next Paxos round on the partition does);
    - ``fail_after``: the next write of these names lands, then raises (the answer was lost);
    - ``slow_update``: the next ``update_job`` lands, and returns this late (on this clock);
    - ``fail_before``: the next write (or ``get_job``) of these names raises, writing nothing.
    """

    def __init__(self) -> None:
        super().__init__()
        self.before_update: list[Callable[[], object]] = []
        self.limbo = False
        self.pending: list[tuple[Job, int]] = []
        self.fail_after: set[str] = set()
        self.slow_update: tuple[ManualClock, timedelta] | None = None
        self.fail_before: set[str] = set()
        self.settling_reads = 0

    def _commit_pending(self, job_id: str) -> None:
        for job, expected in [p for p in self.pending if p[0].job_id == job_id]:
            self.pending.remove((job, expected))
            super().update_job(job, [], expected)

    def update_job(self, job: Job, rows: Sequence[ScheduledExecution], expected_version: int, *,
                   was_one_time: bool = False) -> bool:
        self._commit_pending(job.job_id)
        if self.limbo:
            self.limbo = False
            self.write_scheduled(rows)
            self.pending.append((job, expected_version))
            raise Unavailable("write timeout: the compare-and-set's outcome is unknown")
        if self.before_update:
            self.write_scheduled(rows)  # as the store does: the rows first, then the compare-and-set
            self.before_update.pop(0)()
        landed = super().update_job(job, rows, expected_version)
        if self.slow_update is not None:
            (clock, late), self.slow_update = self.slow_update, None
            clock.advance(late)
        self._fail_after("update_job")
        return landed

    def write_scheduled(self, rows: Sequence[ScheduledExecution]) -> None:
        if "write_scheduled" in self.fail_before:
            self.fail_before.discard("write_scheduled")
            raise Unavailable("write_scheduled: unavailable")
        super().write_scheduled(rows)

    def get_job(self, user_id: str, job_id: str) -> Job | None:
        if "get_job" in self.fail_before:
            self.fail_before.discard("get_job")
            raise Unavailable("get_job: unavailable")
        return super().get_job(user_id, job_id)

    def retire_job(self, job: Job, expected_version: int, ttl_s: int) -> bool:
        self._commit_pending(job.job_id)
        return super().retire_job(job, expected_version, ttl_s)

    def get_job_settled(self, user_id: str, job_id: str) -> Job | None:
        self.settling_reads += 1
        self._commit_pending(job_id)
        return super().get_job_settled(user_id, job_id)

    def create_job(self, job: Job, first: ScheduledExecution | None) -> None:
        super().create_job(job, first)
        self._fail_after("create_job")

    def _fail_after(self, name: str) -> None:
        if name in self.fail_after:
            self.fail_after.discard(name)
            raise Unavailable(f"{name}: the write landed, its answer was lost")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def store() -> DoubtfulStore:
    return DoubtfulStore()


def scan(store: MemoryJobStore, clock: ManualClock, job: Job, bucket: datetime) -> list[OutboundMessage]:
    """The scan of ``bucket`` in ``job``'s segment, started by its tick ahead of time, run to its end."""
    clock.set(max(clock.now(), bucket - timedelta(seconds=30)))
    publisher = MemoryPublisher()
    scans = memory_container(SETTINGS, clock=clock, store=store, publisher=publisher).scans
    scans.scan(ScanRequest(segment=segment_of(job.job_id, SEGMENTS), bucket=bucket))
    return publisher.sent


def fires(sent: Sequence[OutboundMessage], job: Job) -> list[str]:
    return [m.value["scheduled_at"] for m in sent if m.value["job_id"] == job.job_id]


def paused_every_minute(service: JobService) -> Job:
    """A job every minute from BUCKET, paused at once (version 2)."""
    job = service.submit("alice", JobSpec(Every(timedelta(minutes=1), start=BUCKET), {"n": 1}))[0]
    return service.pause("alice", job.job_id)


def test_two_resumes_of_one_version_leave_the_winners_row(store: DoubtfulStore, clock: ManualClock) -> None:
    # Given a paused job, and two resumes that both read its version (a double click): the second lands while
    # the first is between writing its row and its compare-and-set, and plans the very same row
    service = memory_container(SETTINGS, clock=clock, store=store).jobs
    job = paused_every_minute(service)
    store.before_update.append(lambda: service.resume("alice", job.job_id))
    # When the first one's compare-and-set then loses, and it reads the job again (now active)
    resumed = service.resume("alice", job.job_id)
    # Then the job is active, and its first fire after the resume is published: the loser removed nothing
    assert resumed.state is JobState.ACTIVE and resumed.next_run_at == BUCKET
    assert fires(scan(store, clock, job, BUCKET), job) == ["2026-11-22T10:10:00.000Z"]


def test_a_resume_with_catch_up_that_loses_to_a_plain_resume_replays_nothing_of_the_pause(
    store: DoubtfulStore, clock: ManualClock
) -> None:
    # Given a job every minute, paused before its first fire and left paused over five of them
    service = memory_container(SETTINGS, clock=clock, store=store).jobs
    start = datetime(2026, 11, 22, 10, 1, tzinfo=UTC)
    job = service.submit("alice", JobSpec(Every(timedelta(minutes=1), start=start), {"n": 1}))[0]
    service.pause("alice", job.job_id)
    clock.set(datetime(2026, 11, 22, 10, 5, 30, tzinfo=UTC))
    # and two resumes that read the same version: one with catch-up, whose row of the pause's first fire is
    # written (rows first) when a plain resume's compare-and-set lands before its own
    store.before_update.append(lambda: service.resume("alice", job.job_id))
    # When the one with catch-up then loses, reads the job again (active) and answers
    resumed = service.resume("alice", job.job_id, catch_up=True)
    assert (resumed.state, resumed.version, resumed.next_run_at) == (JobState.ACTIVE, 3, start + timedelta(minutes=5))
    loser = [row for row in store.rows.values() if row.scheduled_at == start and row.job_version == 3]
    assert loser  # its row stayed, under the winner's version number
    # Then the scans over the minutes publish the winner's fires only: none of the pause (the winner asked for none)
    sent = [m for bucket in range(5, 9) for m in scan(store, clock, job, start.replace(minute=bucket))]
    assert fires(sent, job) == ["2026-11-22T10:06:00.000Z", "2026-11-22T10:07:00.000Z", "2026-11-22T10:08:00.000Z"]


def test_a_resume_whose_compare_and_set_times_out_is_settled_by_reading(
    store: DoubtfulStore, clock: ManualClock
) -> None:
    # Given a paused job whose resume's compare-and-set times out, accepted but not committed yet
    service = memory_container(SETTINGS, clock=clock, store=store).jobs
    job = paused_every_minute(service)
    store.limbo = True
    # When the resume is sent (and, if it answered an error, sent again as the README advises)
    with contextlib.suppress(Unavailable):
        service.resume("alice", job.job_id)
    resumed = service.resume("alice", job.job_id)
    # Then the job is active at one version more, and its fire is published
    assert (resumed.state, resumed.version) == (JobState.ACTIVE, 3)
    assert fires(scan(store, clock, job, BUCKET), job) == ["2026-11-22T10:10:00.000Z"]


def test_an_unknown_outcome_is_settled_by_one_linearizable_read_and_answered(
    store: DoubtfulStore, clock: ManualClock
) -> None:
    # Given a paused job whose resume's compare-and-set times out
    service = memory_container(SETTINGS, clock=clock, store=store).jobs
    job = paused_every_minute(service)
    store.limbo = True
    # When the resume is sent once
    resumed = service.resume("alice", job.job_id)
    # Then it is answered (no 503): a settling read found the change landed, and its row is there
    assert store.settling_reads == 1 and resumed.state is JobState.ACTIVE
    assert store.jobs[("alice", job.job_id)].version == resumed.version == 3
    assert fires(scan(store, clock, job, BUCKET), job) == ["2026-11-22T10:10:00.000Z"]


def test_a_resume_of_an_active_job_re_asserts_its_next_run(store: DoubtfulStore, clock: ManualClock) -> None:
    # Given an active job whose planned row was lost (deleted behind the service's back)
    service = memory_container(SETTINGS, clock=clock, store=store).jobs
    job = service.submit("alice", JobSpec(Every(timedelta(minutes=1), start=BUCKET), {"n": 1}))[0]
    store.delete_scheduled(list(store.rows.values()))
    # When it is resumed (nothing to change)
    assert service.resume("alice", job.job_id).version == 1
    # Then its next run's row is written again, under the same execution id, and it fires
    [row] = store.rows.values()
    assert row.execution_id == execution_id_for(job.job_id, BUCKET, 1, Trigger.SCHEDULE)
    assert fires(scan(store, clock, job, BUCKET), job) == ["2026-11-22T10:10:00.000Z"]


def test_a_resume_of_an_active_job_whose_fire_is_recorded_writes_nothing(
    store: DoubtfulStore, clock: ManualClock
) -> None:
    # Given an active job whose first fire has been published (its record exists, the next fire is planned)
    service = memory_container(SETTINGS, clock=clock, store=store).jobs
    job = service.submit("alice", JobSpec(At(BUCKET), {"n": 1}))[0]
    assert fires(scan(store, clock, job, BUCKET), job) == ["2026-11-22T10:10:00.000Z"]
    rows = dict(store.rows)
    # When it is resumed: nothing to re-assert (a one-time job that has fired has no next run)
    service.resume("alice", job.job_id)
    assert store.rows == rows


def test_a_repeated_submit_re_asserts_the_first_run(store: DoubtfulStore, clock: ManualClock) -> None:
    # Given a submission with a key whose write landed but answered an error (503)
    service = memory_container(SETTINGS, clock=clock, store=store).jobs
    new = JobSpec(At(BUCKET), {"n": 1})
    store.fail_after.add("create_job")
    with pytest.raises(Unavailable):
        service.submit("alice", new, "key-1")
    store.delete_scheduled(list(store.rows.values()))  # (its row landed too late for its scan: as good as lost)
    # When the client sends it again with the same key
    job, created = service.submit("alice", new, "key-1")
    # Then the same job is answered, and its first run is written again: it fires
    assert not created
    assert fires(scan(store, clock, job, BUCKET), job) == ["2026-11-22T10:10:00.000Z"]


def test_a_submit_retried_with_its_key_after_the_jobs_last_fire_answers_the_job(
    store: DoubtfulStore, clock: ManualClock,
) -> None:
    # Given a job firing twice, 10 s apart, from 10:00:30, whose write landed but answered an error (503)
    service = memory_container(SETTINGS, clock=clock, store=store).jobs
    new = JobSpec(RepeatingInterval(2, start=NOW + timedelta(seconds=20), duration=timedelta(seconds=10)), {"n": 1})
    store.fail_after.add("create_job")
    with pytest.raises(Unavailable):
        service.submit("alice", new, "key-1")
    [first] = store.jobs.values()
    # When the client retries with the same key after the job's last fire (found by the model's search)
    clock.set(NOW + timedelta(minutes=1))
    job, created = service.submit("alice", new, "key-1")
    # Then the key answers the job its first request made, not 422 "never fires after now"
    assert (job.job_id, created) == (first.job_id, False)
    # and a request that is not a repeat is still judged as of now (nothing claimed)
    with pytest.raises(InvalidField, match="never fires after now"):
        service.submit("alice", new, "key-2")
    with pytest.raises(InvalidField, match="never fires after now"):
        service.submit("alice", JobSpec(new.schedule, {"n": 2}), "key-1")
    assert ("alice", "key-2") not in store.idempotency


def test_a_batch_retried_with_its_keys_after_a_jobs_last_fire_answers_the_job(
    store: DoubtfulStore, clock: ManualClock,
) -> None:
    # Given a batch of two keyed jobs, one firing once at 10:00:30, that landed
    service = memory_container(SETTINGS, clock=clock, store=store).jobs
    soon, later = JobSpec(At(NOW + timedelta(seconds=20)), {}), JobSpec(At(BUCKET), {})
    made = service.submit_many("alice", [(soon, "key-1"), (later, "key-2")])
    # When the batch is sent again 10 minutes later
    clock.set(NOW + timedelta(minutes=10))
    again = service.submit_many("alice", [(soon, "key-1"), (later, "key-2")])
    # Then each key answers its job (the first one's "at" is long past: 422 as a new request)
    assert [(job.job_id, created) for job, created in again] == [(job.job_id, False) for job, _ in made]


STANDING = {"JOBRUNNER_MAX_PAYLOAD_BYTES": "1000", "JOBRUNNER_TENANT_LIMITS": json.dumps({"*": {"jobs_held": 2}})}


def test_a_submit_that_landed_but_answered_an_error_stays_counted(store: DoubtfulStore, clock: ManualClock) -> None:
    # Given a tenant holding at most 2 recurring jobs, and a submission whose write lands but answers an error
    quotas = MemoryTenantQuotas()
    service = memory_container(STANDING, clock=clock, store=store, quotas=quotas).jobs
    new = JobSpec(Every(timedelta(hours=1)), {})
    store.fail_after.add("create_job")
    with pytest.raises(Unavailable):
        service.submit("alice", new, "key-1")
    # When it is sent again with its key (answered 200), and the tenant submits two more
    assert not service.submit("alice", new, "key-1")[1]
    assert service.submit("alice", new)[1]
    # Then the job that exists is counted: the third is refused, and the count is the jobs held
    with pytest.raises(LimitReached) as refused:
        service.submit("alice", new)
    assert refused.value.limit == "jobs_held"
    assert quotas.standing["alice"].jobs == 2 == len(store.jobs)


def test_a_submit_whose_write_and_settling_read_both_failed_is_counted_again_by_its_repeat(
    store: DoubtfulStore, clock: ManualClock,
) -> None:
    # Given a tenant holding at most 2 recurring jobs, and a keyed submission whose write lands but answers an
    # error, and whose settling read fails too: it cannot tell, and gives its count back (found by the model's
    # long search on the final code of #31: the tenant then held a job it was never counted for)
    quotas = MemoryTenantQuotas()
    service = memory_container(STANDING, clock=clock, store=store, quotas=quotas).jobs
    new = JobSpec(Every(timedelta(hours=1)), {})
    store.fail_after.add("create_job")
    store.fail_before.add("get_job")
    with pytest.raises(Unavailable):
        service.submit("alice", new, "key-1")
    assert quotas.standing["alice"].jobs == 0 and len(store.jobs) == 1
    # When it is sent again with its key (answered 200: the job it made), twice, and the tenant submits one more
    assert not service.submit("alice", new, "key-1")[1]
    assert not service.submit("alice", new, "key-1")[1]
    assert service.submit("alice", new)[1]
    # Then the repeat counted the job it found, once: a third job is refused, and the count is the jobs held
    with pytest.raises(LimitReached):
        service.submit("alice", new)
    assert quotas.standing["alice"].jobs == 2 == len(store.jobs)


def test_a_cancel_that_landed_but_answered_an_error_gives_its_place_back(
    store: DoubtfulStore, clock: ManualClock
) -> None:
    # Given a tenant holding 2 recurring jobs (its limit), and a cancel whose write lands but answers an error
    quotas = MemoryTenantQuotas()
    service = memory_container(STANDING, clock=clock, store=store, quotas=quotas).jobs
    held = [service.submit("alice", JobSpec(Every(timedelta(hours=1)), {}))[0] for _ in range(2)]
    store.fail_after.add("update_job")
    # When the cancel is sent (and sent again if it answered an error)
    with contextlib.suppress(Unavailable):
        service.cancel("alice", held[0].job_id)
    service.cancel("alice", held[0].job_id)
    # Then the cancelled job's place is given back
    assert store.jobs[("alice", held[0].job_id)].state is JobState.CANCELLED
    assert quotas.standing["alice"].jobs == 1


def test_a_change_that_landed_but_whose_row_could_not_be_placed_again_stays_counted(
    store: DoubtfulStore, clock: ManualClock,
) -> None:
    # Given a tenant counted for the recurring jobs it holds, and a one-time job about to fire
    quotas = MemoryTenantQuotas()
    service = memory_container(STANDING, clock=clock, store=store, quotas=quotas).jobs
    job = service.submit("alice", JobSpec(At(NOW + timedelta(seconds=20)), {}))[0]
    assert "alice" not in quotas.standing
    # When it is changed to fire every 10 s: the change lands, but its write returns 3 s late (its row behind the
    # scan's read) and placing the row again fails: 503 (found by the model's widened search, #31)
    store.slow_update = (clock, timedelta(seconds=3))
    store.fail_before.add("write_scheduled")
    with pytest.raises(Unavailable):
        service.change("alice", job.job_id, SpecChange(schedule=Every(timedelta(seconds=10))))
    # Then the job it now is stays counted (its count was given back, though the change stands)
    assert store.jobs[("alice", job.job_id)].spec.schedule.recurring
    assert quotas.standing["alice"].jobs == 1


def test_a_change_sent_again_after_it_landed_re_asserts_the_next_run(store: DoubtfulStore, clock: ManualClock) -> None:
    # Given a change to fire every 10 s from 10:00:30 that landed but answered 503: its write returned 3 s late
    # (its row behind the scan's read of the lane: as good as lost) and placing the row again failed
    service = memory_container(SETTINGS, clock=clock, store=store).jobs
    job = service.submit("alice", JobSpec(At(BUCKET), {"n": 1}))[0]
    every = Every(timedelta(seconds=10), start=NOW + timedelta(seconds=20))
    store.slow_update = (clock, timedelta(seconds=3))
    store.fail_before.add("write_scheduled")
    with pytest.raises(Unavailable):
        service.change("alice", job.job_id, SpecChange(schedule=every))
    store.delete_scheduled(list(store.rows.values()))
    # When the client sends it again: nothing is left to change
    changed = service.change("alice", job.job_id, SpecChange(schedule=every))
    # Then its next run is written again, and the job fires (every idempotent path re-asserts its row)
    assert changed.next_run_at == NOW + timedelta(seconds=20)
    assert fires(scan(store, clock, changed, NOW.replace(second=0)), changed)[:1] == ["2026-11-22T10:00:30.000Z"]


def test_a_change_that_frees_fires_and_landed_but_answered_an_error_gives_them_back(
    store: DoubtfulStore, clock: ManualClock,
) -> None:
    # Given a tenant whose fires a minute are counted, holding a job every 10 s (6 a minute)
    quotas = MemoryTenantQuotas()
    limits = {"JOBRUNNER_MAX_PAYLOAD_BYTES": "1000",
              "JOBRUNNER_TENANT_LIMITS": json.dumps({"*": {"executions_per_minute": 30}})}
    service = memory_container(limits, clock=clock, store=store, quotas=quotas).jobs
    job = service.submit("alice", JobSpec(Every(timedelta(seconds=10), start=NOW + timedelta(seconds=20)), {}))[0]
    assert quotas.standing["alice"].per_minute == 6
    # When it is changed to every 20 s: the change lands, its write returns 3 s late and placing its row again
    # fails (503); the client sends it again (found by the model's long search, #31)
    every_20 = SpecChange(schedule=Every(timedelta(seconds=20), start=NOW + timedelta(seconds=20)))
    store.slow_update = (clock, timedelta(seconds=3))
    store.fail_before.add("write_scheduled")
    with pytest.raises(Unavailable):
        service.change("alice", job.job_id, every_20)
    service.change("alice", job.job_id, every_20)
    # Then what the change freed is given back: the job reserves 3 a minute
    assert quotas.standing["alice"].per_minute == 3


class SlowCreateStore(DoubtfulStore):
    """A store whose next ``create_job``/``create_jobs`` lands, lets ``meanwhile`` run (another request on the
    job just made), and returns ``late`` later (on ``clock``): too late for the first run's row to be sure to be
    read, so the submit places it again."""

    def __init__(self, clock: ManualClock, late: timedelta) -> None:
        super().__init__()
        self.clock, self.late = clock, late
        self.meanwhile: list[Callable[[Job], object]] = []

    def create_job(self, job: Job, first: ScheduledExecution | None) -> None:
        MemoryJobStore.create_job(self, job, first)
        self._slow(job)

    def create_jobs(self, pairs: Sequence[tuple[Job, ScheduledExecution | None]]) -> None:
        super().create_jobs(pairs)
        for job, _ in pairs:
            self._slow(job)

    def _slow(self, job: Job) -> None:
        if self.meanwhile:
            self.meanwhile.pop(0)(job)
            self.clock.advance(self.late)


@pytest.mark.parametrize("batch", [False, True])
def test_a_cancel_landing_while_a_submit_places_its_first_run_again_stands(clock: ManualClock, batch: bool) -> None:
    # Given a job every 10 s whose create lands, is cancelled by a request that sees it at once (a bulk cancel by
    # tag), and returns 3 s late: the submit places its first run again (found by the model's long search on the
    # final code of #31: it wrote the whole job again, ACTIVE, over the cancel, and the job fired after it)
    store = SlowCreateStore(clock, timedelta(seconds=3))
    service = memory_container(SETTINGS, clock=clock, store=store).jobs
    store.meanwhile.append(lambda job: service.cancel("alice", job.job_id))
    new = JobSpec(Every(timedelta(seconds=10)), {})
    [(job, created)] = service.submit_many("alice", [(new, None)]) if batch else [service.submit("alice", new)]
    # Then the cancel stands, and nothing of the job is published
    assert created and store.jobs[("alice", job.job_id)].state is JobState.CANCELLED
    assert scan(store, clock, job, NOW.replace(second=0)) == []
    assert scan(store, clock, job, NOW.replace(second=0) + timedelta(minutes=1)) == []


def test_a_change_in_doubt_is_not_taken_for_another_writers_of_the_same_version_and_millisecond(
    store: DoubtfulStore, clock: ManualClock
) -> None:
    # Given a job whose PATCH's compare-and-set fails with its outcome unknown (it never landed), while another
    # writer moved the job to the same next version in the same millisecond: its retirement after its last fire
    # (found by the model-based test's long run, its clock's instants shared by the two)
    service = memory_container(SETTINGS, clock=clock, store=store).jobs
    job = service.submit("alice", JobSpec(At(BUCKET), {"v": 1}, delete_after_last=True))[0]

    def retired_then_in_doubt(updated: Job, rows: Sequence[ScheduledExecution], expected_version: int, *,
                              was_one_time: bool = False) -> bool:
        current = store.jobs[("alice", job.job_id)]
        retired = current.with_changes(state=JobState.DELETED, version=current.version + 1,
                                       updated_at=clock.now(), next_run_at=None)
        assert MemoryJobStore.retire_job(store, retired, current.version, 3600)
        raise Unavailable("write timeout: the compare-and-set's outcome is unknown")

    store.update_job = retired_then_in_doubt  # type: ignore[method-assign]
    # When the PATCH of its payload is sent
    with pytest.raises((JobNotFound, Conflict)):
        service.change("alice", job.job_id, SpecChange(payload={"v": 5}))
    # Then it is not acknowledged as applied: the job is as its retirement left it, the payload never written
    stored = store.jobs[("alice", job.job_id)]
    assert (stored.state, stored.spec.payload) == (JobState.DELETED, {"v": 1})
