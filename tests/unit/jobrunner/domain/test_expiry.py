"""When a one-time job's row may expire: after its last possible fire, every attempt and retry, and its history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from jobrunner.domain.expiry import EXPIRY_MARGIN, LATEST_EXPIRY, MAX_TTL_S, execution_span, row_expires_at, ttl_seconds
from jobrunner.domain.jobs import Job, JobState
from jobrunner.domain.retry import next_attempt_delay
from jobrunner.domain.schedules import At, Every
from jobrunner.domain.spec import MAX_JITTER_S, MAX_RETRIES, MAX_TIMEOUT_S, JobSpec, RetryPolicy

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
AT = NOW + timedelta(hours=2)
HISTORY = timedelta(days=30)


def one_time(**changes: object) -> Job:
    job = Job(user_id="alice", job_id="j1", spec=JobSpec(schedule=At(AT), payload={}), created_at=NOW, updated_at=NOW)
    return job.with_changes(**changes)


def test_a_one_time_job_expires_after_its_fire_its_executions_a_margin_and_its_history() -> None:
    job = one_time(timeout_s=60, retry=RetryPolicy(max_retries=2, max_delay_s=300), jitter_s=30)
    # each attempt up to its timeout, each retry's longest wait; twice (a fire may wait behind one execution)
    span = 3 * timedelta(seconds=60) + 2 * timedelta(seconds=300)
    assert execution_span(job.spec) == span
    assert row_expires_at(job, HISTORY) == AT + timedelta(seconds=30) + 2 * span + EXPIRY_MARGIN + HISTORY


def test_an_execution_without_a_timeout_is_bounded_by_the_longest_timeout_a_job_may_set() -> None:
    assert execution_span(one_time().spec) == timedelta(seconds=MAX_TIMEOUT_S)


def test_recurring_and_paused_jobs_have_no_instant() -> None:
    recurring = one_time(schedule=Every(every=timedelta(minutes=1), start=NOW))
    assert row_expires_at(recurring, HISTORY) is None
    assert row_expires_at(one_time(state=JobState.PAUSED, paused_at=NOW), HISTORY) is None
    # and resumed, it has one again
    assert row_expires_at(one_time(state=JobState.ACTIVE), HISTORY) is not None


def test_a_write_after_the_fire_moves_the_instant_from_that_write() -> None:
    # (a run now, a backfill, a cancel or a PATCH after the fire: the work it asks may run from then)
    before = row_expires_at(one_time(), HISTORY)
    later = AT + timedelta(days=3)
    after = row_expires_at(one_time(updated_at=later), HISTORY)
    assert before is not None and after is not None
    assert after - before == later - AT


def test_a_patch_of_the_time_or_of_the_retries_moves_the_instant() -> None:
    base = row_expires_at(one_time(), HISTORY)
    moved = row_expires_at(one_time(schedule=At(AT + timedelta(days=1))), HISTORY)
    more_retries = row_expires_at(one_time(retry=RetryPolicy(max_retries=3)), HISTORY)
    assert base is not None and moved is not None and more_retries is not None
    assert moved - base == timedelta(days=1)
    assert more_retries > base


@given(
    retries=st.integers(0, MAX_RETRIES), timeout_s=st.none() | st.integers(1, MAX_TIMEOUT_S),
    max_delay_s=st.floats(0.001, 24 * 3600), jitter_s=st.none() | st.integers(1, MAX_JITTER_S),
    history_days=st.integers(2, 3650), draws=st.lists(st.floats(0, 0.999999), min_size=MAX_RETRIES,
                                                      max_size=MAX_RETRIES),
    asked_after=st.none() | st.floats(0, 24 * 3600),
)
def test_the_instant_is_after_every_attempt_and_retry_the_fire_can_have_and_its_history(
    retries: int, timeout_s: int | None, max_delay_s: float, jitter_s: int | None, history_days: int,
    draws: list[float], asked_after: float | None,
) -> None:
    # Given a one-time job with any policy, fired as late as its jitter allows
    policy = RetryPolicy(max_retries=retries, initial_delay_s=min(10.0, max_delay_s), max_delay_s=max_delay_s)
    job = one_time(retry=policy, timeout_s=timeout_s, jitter_s=jitter_s)
    published = AT + timedelta(seconds=jitter_s or 0)
    # When every attempt runs to its timeout (or the longest one), each retry waiting as long as it may, even
    # asked longer by the target (a Retry-After)
    end = published
    for failed in range(1, retries + 2):
        end += timedelta(seconds=timeout_s or MAX_TIMEOUT_S)
        if failed <= retries:
            ask = None if asked_after is None else timedelta(seconds=asked_after)
            end += next_attempt_delay(policy, failed, draws[failed - 1], ask)
    # Then its row outlives the last attempt's end and the history it wrote then
    history = timedelta(days=history_days)
    expires = row_expires_at(job, history)
    assert expires is not None
    assert expires >= end + EXPIRY_MARGIN + history


def test_the_time_to_live_counts_to_the_instant_from_now() -> None:
    assert ttl_seconds(None, NOW) == 0
    assert ttl_seconds(NOW + timedelta(seconds=2.2), NOW) == 3  # (never before the instant)
    assert ttl_seconds(NOW - timedelta(seconds=5), NOW) == 1  # (passed: goes at once, never kept)
    assert ttl_seconds(NOW + timedelta(seconds=MAX_TTL_S + 1), NOW) == 0  # beyond the stores' longest: kept
    assert ttl_seconds(LATEST_EXPIRY, NOW) == 0  # (Cassandra refuses an expiry past 2038)
    assert ttl_seconds(LATEST_EXPIRY - timedelta(seconds=1), NOW) > 0
