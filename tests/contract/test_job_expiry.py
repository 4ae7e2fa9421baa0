"""One-time jobs' rows expire by themselves (``JobStore``, "Expiry"; ``domain.expiry``), on every store alike.

Each store counts a row's time to live from its clock: the memory store expires the row when its clock reaches
the instant; Cassandra from the time to live it wrote (the instant less the clock's now), in real time. So the
tests set the clock a couple of seconds before the instant they look at, and let that much time pass
(``let_pass``: the clock moved, and on Cassandra the wall clock waited)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.stores.cassandra import CassandraJobStore
from jobrunner.adapters.stores.codec import job_key
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.domain.expiry import row_expires_at
from jobrunner.domain.jobs import Job, JobState
from jobrunner.domain.schedules import At, Every
from jobrunner.domain.spec import JobSpec, RetryPolicy

if TYPE_CHECKING:
    from typing import Any

    from jobrunner.ports import Stores

NOW = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
AT = NOW + timedelta(minutes=5)
HISTORY_S = 2 * 86_400
#: How long before the instant a test's clock is set: the row's time to live on Cassandra.
LEAD = timedelta(seconds=2)


@dataclass
class Expiring:
    store: Stores
    clock: ManualClock
    real_time: bool

    def let_pass(self, delta: timedelta) -> None:
        self.clock.advance(delta)
        if self.real_time:
            time.sleep(delta.total_seconds())

    def instant(self, job: Job) -> datetime:
        expires = row_expires_at(job, timedelta(seconds=HISTORY_S))
        assert expires is not None
        return expires


@pytest.fixture(params=["memory", pytest.param("cassandra", marks=pytest.mark.integration)])
def expiring(request: pytest.FixtureRequest) -> Expiring:
    clock = ManualClock(NOW)
    if request.param == "memory":
        return Expiring(MemoryJobStore(clock, history_ttl_s=lambda _t: HISTORY_S), clock, real_time=False)
    store = CassandraJobStore(request.getfixturevalue("cassandra_session"), history_ttl_s=lambda _t: HISTORY_S,
                              now=clock.now)
    return Expiring(store, clock, real_time=True)


def one_time(**changes: object) -> Job:
    job = Job(user_id=f"user-{uuid.uuid4().hex[:6]}", job_id=str(uuid.uuid4()),
              spec=JobSpec(schedule=At(AT), payload={"n": 1}, topic="jobs", retry=RetryPolicy(max_retries=1),
                           timeout_s=60),
              created_at=NOW, updated_at=NOW, next_run_at=AT, created_by="ops")
    return job.with_changes(**changes)


def gone(store: Stores, job: Job) -> bool:
    listed, _ = store.list_jobs(job.user_id, 10, None)
    return (store.get_job(job.user_id, job.job_id) is None and store.get_job_settled(job.user_id, job.job_id) is None
            and not store.get_jobs([(job.user_id, job.job_id)]) and listed == [])


def walked(store: Stores) -> set[str]:
    """The ids of every job a whole walk returns (``JobStore.walk_jobs``, the reconciler's)."""
    ids: set[str] = set()
    cursor: str | None = None
    while True:
        page, cursor = store.walk_jobs(cursor, 1000)
        ids |= {j.job_id for j in page}
        if cursor is None:
            return ids


def test_a_one_time_job_reads_whole_until_its_instant_and_is_gone_after(expiring: Expiring) -> None:
    # Given a one-time job written a little before its row's instant
    job = one_time()
    expiring.clock.set(expiring.instant(job) - LEAD)
    expiring.store.create_job(job, None)
    # Then it reads as written, and the reconciler's walk finds it
    assert expiring.store.get_job(job.user_id, job.job_id) == job.with_changes(schedule_from=AT)
    assert job.job_id in walked(expiring.store)
    # When its instant passes
    expiring.let_pass(LEAD + timedelta(seconds=1))
    # Then it is gone from every read, the reconciler's walk included (it repairs nothing of a job it never sees),
    # and a change racing the expiry lands nothing (no half row comes back)
    assert gone(expiring.store, job)
    assert job.job_id not in walked(expiring.store)
    assert not expiring.store.update_job(job.with_changes(version=2, payload={"n": 2}), [], expected_version=1)
    assert not expiring.store.update_job(job.with_changes(version=2, schedule_version=2), [], expected_version=1)
    assert gone(expiring.store, job)


def test_a_paused_one_time_job_never_expires_and_its_resume_gives_it_an_instant_again(expiring: Expiring) -> None:
    # Given a one-time job paused a little before its row's instant
    job = one_time()
    expiring.clock.set(expiring.instant(job) - LEAD)
    expiring.store.create_job(job, None)
    paused = job.with_changes(version=2, schedule_version=2, state=JobState.PAUSED, paused_at=NOW, next_run_at=None)
    assert expiring.store.update_job(paused, [], expected_version=1)
    # When its instant passes: it is still there
    expiring.let_pass(LEAD + timedelta(seconds=1))
    assert expiring.store.get_job(job.user_id, job.job_id) == paused
    # When it is resumed (its row written with an instant again, here a couple of seconds away)
    resumed = paused.with_changes(version=3, schedule_version=3, state=JobState.ACTIVE, next_run_at=AT)
    expiring.clock.set(expiring.instant(resumed) - LEAD)
    assert expiring.store.update_job(resumed, [], expected_version=2)
    assert expiring.store.get_job(job.user_id, job.job_id) == resumed.with_changes(schedule_from=AT)
    # Then it expires at that instant
    expiring.let_pass(LEAD + timedelta(seconds=1))
    assert gone(expiring.store, job)


@pytest.mark.parametrize("change", ["at", "retry", "written later"])
def test_a_change_moves_the_instant(expiring: Expiring, change: str) -> None:
    # Given a one-time job a little before its row's instant
    job = one_time()
    expiring.clock.set(expiring.instant(job) - LEAD)
    expiring.store.create_job(job, None)
    read = expiring.store.get_job(job.user_id, job.job_id)  # (a change writes the job as read: ``update_job``)
    assert read is not None
    # When a PATCH of its time or of its retries, or a write after its fire (a run now's), lands
    if change == "at":
        changed = read.with_changes(version=2, schedule_version=2, schedule=At(AT + timedelta(hours=1)),
                                   next_run_at=AT + timedelta(hours=1))
    elif change == "retry":
        changed = read.with_changes(version=2, retry=RetryPolicy(max_retries=3))
    else:
        changed = read.with_changes(version=2, updated_at=AT + timedelta(days=1))
    assert expiring.instant(changed) > expiring.instant(job)
    assert expiring.store.update_job(changed, [], expected_version=1)
    # Then the old instant passes and the job is still there, whole
    expiring.let_pass(LEAD + timedelta(seconds=1))
    stored = expiring.store.get_job(job.user_id, job.job_id)
    assert stored is not None and stored.version == 2 and stored.spec == changed.spec
    assert (stored.created_at, stored.created_by, stored.next_run_at) == (NOW, "ops", changed.next_run_at)


def test_a_recurring_job_never_expires_this_way(expiring: Expiring) -> None:
    job = one_time(schedule=Every(every=timedelta(minutes=1), start=AT))
    expiring.store.create_job(job, None)
    expiring.let_pass(timedelta(seconds=1))
    expiring.clock.advance(timedelta(days=3650))
    assert expiring.store.get_job(job.user_id, job.job_id) is not None


def test_a_one_time_job_deleted_after_its_last_fire_is_retired_as_before(expiring: Expiring) -> None:
    job = one_time()
    expiring.store.create_job(job, None)
    deleted = job.with_changes(state=JobState.DELETED, version=2, schedule_version=2, next_run_at=None)
    assert expiring.store.retire_job(deleted, expected_version=1, ttl_s=2)
    stored = expiring.store.get_job(job.user_id, job.job_id)
    assert stored is not None and (stored.state, stored.created_by) == (JobState.DELETED, "ops")
    expiring.let_pass(timedelta(seconds=3))  # (the retire's time to live: its history's)
    assert gone(expiring.store, job)


# -- on the real store: every cell carries one time to live, and the row goes whole ------------------------------

_COLUMNS = ("schedule", "payload", "topic", "state", "version", "schedule_version", "schedule_version_set_at",
            "retry", "timeout_s", "paused_at", "trace_parent", "created_at", "updated_at", "next_run_at", "jitter_s",
            "tags", "policies", "created_by")


def _ttls(session: Any, job: Job) -> set[int | None]:
    """The time to live of every cell of the job's row that holds a value."""
    row = session.execute(f"SELECT {', '.join(f'{c}, TTL({c})' for c in _COLUMNS)} FROM job_table_v2"
                          " WHERE user_id = %s AND shard = %s AND job_id = %s", job_key(job.user_id, job.job_id)).one()
    values = list(row)
    return {values[i + 1] for i in range(0, len(values), 2) if values[i] is not None}


@pytest.mark.integration
def test_every_cell_of_a_one_time_jobs_row_has_the_same_time_to_live_and_a_pause_clears_it(
    cassandra_session: Any,
) -> None:
    clock = ManualClock(NOW)
    store = CassandraJobStore(cassandra_session, history_ttl_s=lambda _t: HISTORY_S, now=clock.now)
    job = one_time(trace_parent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tags={"a": "b"}, jitter_s=5)
    instant = row_expires_at(job, timedelta(seconds=HISTORY_S))
    assert instant is not None
    clock.set(instant - timedelta(hours=1))
    store.create_job(job, None)
    [ttl] = _ttls(cassandra_session, job)  # one time to live, on every column written
    assert 3590 <= ttl <= 3600
    paused = job.with_changes(version=2, schedule_version=2, state=JobState.PAUSED, paused_at=NOW, next_run_at=None)
    assert store.update_job(paused, [], expected_version=1)
    assert _ttls(cassandra_session, job) == {None}  # none on any cell
    resumed = paused.with_changes(version=3, schedule_version=3, state=JobState.ACTIVE, paused_at=None,
                                  next_run_at=AT)
    clock.set(row_expires_at(resumed, timedelta(seconds=HISTORY_S)) - timedelta(hours=2))  # type: ignore[operator]
    assert store.update_job(resumed, [], expected_version=2)
    [ttl] = _ttls(cassandra_session, job)
    assert 7190 <= ttl <= 7200
    # a change of anything else writes every cell again too
    assert store.update_job(resumed.with_changes(version=4, payload={"n": 2}), [], expected_version=3)
    [ttl] = _ttls(cassandra_session, job)
    assert 7190 <= ttl <= 7200


@pytest.mark.integration
def test_a_one_time_jobs_row_expires_whole_never_half(cassandra_session: Any) -> None:
    # Given a one-time job whose row expires in 2 s, changed once (every cell written again)
    clock = ManualClock(NOW)
    store = CassandraJobStore(cassandra_session, history_ttl_s=lambda _t: HISTORY_S, now=clock.now)
    job = one_time(tags={"a": "b"})
    clock.set(row_expires_at(job, timedelta(seconds=HISTORY_S)) - timedelta(seconds=10))  # type: ignore[operator]
    store.create_job(job, None)
    changed = job.with_changes(version=2, payload={"n": 2})
    clock.set(row_expires_at(changed, timedelta(seconds=HISTORY_S)) - timedelta(seconds=2))  # type: ignore[operator]
    assert store.update_job(changed, [], expected_version=1)
    # When it is read over and over as it expires
    seen: list[Job | None] = []
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        seen.append(store.get_job(job.user_id, job.job_id))
        raw = cassandra_session.execute("SELECT * FROM job_table_v2 WHERE user_id = %s AND shard = %s AND job_id = %s",
                                        job_key(job.user_id, job.job_id)).one()
        # Then the raw row is either whole or absent: never a key with some columns gone
        assert raw is None or all(getattr(raw, c) is not None for c in ("state", "schedule", "created_at", "tags"))
        time.sleep(0.05)
    # and the job read whole, then not at all
    assert seen[0] is not None and seen[-1] is None
    first_gone = seen.index(None)
    assert all(s is not None and s.spec.payload == {"n": 2} for s in seen[:first_gone])
    assert all(s is None for s in seen[first_gone:])


def test_a_one_time_job_due_to_expire_past_2038_is_kept_and_written(expiring: Expiring) -> None:
    # (Cassandra refuses an expiry past 2038-01-19 by default: such a row is written with none, as before)
    far = datetime(2037, 12, 1, tzinfo=UTC)
    job = one_time(schedule=At(far), next_run_at=far)
    expiring.store.create_job(job, None)
    assert expiring.store.update_job(job.with_changes(version=2, schedule_version=2), [], expected_version=1)
    expiring.clock.advance(timedelta(days=3650))
    assert expiring.store.get_job(job.user_id, job.job_id) is not None
