"""Retry policy: exponential backoff with equal jitter, capped; ``max_retries`` counts retries, not attempts."""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrunner.domain.retry import next_attempt_delay, retry_delay, should_retry
from jobrunner.domain.spec import RetryPolicy

POLICY = RetryPolicy(max_retries=5, initial_delay_s=10.0, multiplier=2.0, max_delay_s=300.0)


@pytest.mark.parametrize(("failed_attempt", "base_s"), [(1, 10), (2, 20), (3, 40), (4, 80), (5, 160)])
def test_delay_lies_in_half_base_to_base(failed_attempt: int, base_s: float) -> None:
    assert retry_delay(POLICY, failed_attempt, 0.0) == timedelta(seconds=base_s / 2)
    assert retry_delay(POLICY, failed_attempt, 0.5) == timedelta(seconds=base_s * 3 / 4)
    # jitter is drawn from [0, 1): the delay approaches the base but never reaches it
    assert timedelta(seconds=base_s / 2) < retry_delay(POLICY, failed_attempt, 0.999999) < timedelta(seconds=base_s)


def test_delay_grows_by_the_multiplier() -> None:
    delays = [retry_delay(POLICY, attempt, 0.25) for attempt in range(1, 6)]
    assert [later / earlier for earlier, later in pairwise(delays)] == [2.0, 2.0, 2.0, 2.0]


@pytest.mark.parametrize("failed_attempt", [6, 7, 20])
def test_delay_is_capped_at_max_delay(failed_attempt: int) -> None:
    # 10 * 2**5 = 320 > 300: from the sixth failure on, the base is the cap
    assert retry_delay(POLICY, failed_attempt, 0.0) == timedelta(seconds=150)
    assert retry_delay(POLICY, failed_attempt, 0.999999) < timedelta(seconds=300)


def test_cap_holds_for_the_largest_policy_the_api_accepts() -> None:
    policy = RetryPolicy(max_retries=20, initial_delay_s=86_400, multiplier=10, max_delay_s=86_400)
    assert retry_delay(policy, 21, 0.0) == timedelta(seconds=43_200)


def test_multiplier_one_is_a_constant_delay() -> None:
    policy = RetryPolicy(max_retries=3, initial_delay_s=30, multiplier=1.0, max_delay_s=300)
    assert {retry_delay(policy, attempt, 0.0) for attempt in (1, 2, 3)} == {timedelta(seconds=15)}


def test_delay_never_collapses_to_zero() -> None:
    assert retry_delay(RetryPolicy(initial_delay_s=0.002), 1, 0.0) == timedelta(milliseconds=1)


@pytest.mark.parametrize(
    ("max_retries", "failed_attempt", "expected"),
    [(0, 1, False), (1, 1, True), (1, 2, False), (2, 1, True), (2, 2, True), (2, 3, False), (20, 20, True),
     (20, 21, False)],
)
def test_should_retry_counts_retries_after_the_first_attempt(
    max_retries: int, failed_attempt: int, expected: bool
) -> None:
    assert should_retry(RetryPolicy(max_retries=max_retries), failed_attempt) is expected


def test_with_two_retries_three_attempts_run() -> None:
    policy = RetryPolicy(max_retries=2)
    attempts = [1]
    while should_retry(policy, attempts[-1]):
        attempts.append(attempts[-1] + 1)
    assert attempts == [1, 2, 3]


def test_retry_after_lengthens_the_backoff_within_the_jobs_bounds() -> None:
    backoff = retry_delay(POLICY, 1, 0.5)  # 7.5 s
    assert next_attempt_delay(POLICY, 1, 0.5, None) == backoff
    assert next_attempt_delay(POLICY, 1, 0.5, timedelta(seconds=60)) == timedelta(seconds=60)
    # never sooner than the job's own backoff
    assert next_attempt_delay(POLICY, 1, 0.5, timedelta(seconds=1)) == backoff
    # never later than the job's max_delay_s
    assert next_attempt_delay(POLICY, 1, 0.5, timedelta(days=2)) == timedelta(seconds=300)


@given(st.integers(1, 20), st.floats(0, 0.999), st.integers(0, 10**6))
def test_the_delay_stays_within_the_backoff_and_the_cap(failed_attempt: int, jitter: float, asked_s: int) -> None:
    delay = next_attempt_delay(POLICY, failed_attempt, jitter, timedelta(seconds=asked_s))
    assert retry_delay(POLICY, failed_attempt, jitter) <= delay <= timedelta(seconds=POLICY.max_delay_s)
