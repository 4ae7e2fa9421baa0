"""Backoff between attempts: exponential, capped, with jitter so retries of a burst spread out."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobrunner.domain.spec import RetryPolicy


def retry_delay(policy: RetryPolicy, failed_attempt: int, jitter: float) -> timedelta:
    """Delay before the attempt after ``failed_attempt`` (1-based); ``jitter`` is uniform in [0, 1).

    The base delay is ``initial * multiplier ** (failed_attempt - 1)`` capped at ``max_delay``; the
    delay is drawn from [base / 2, base) ("equal jitter"), so it never collapses to zero.
    """
    base = min(policy.max_delay_s, policy.initial_delay_s * policy.multiplier ** (failed_attempt - 1))
    return timedelta(seconds=base / 2 + base / 2 * jitter)


def should_retry(policy: RetryPolicy, failed_attempt: int) -> bool:
    """``max_retries`` counts retries: with 2, attempts 1, 2 and 3 run, then the execution is dead-lettered."""
    return failed_attempt <= policy.max_retries


def next_attempt_delay(policy: RetryPolicy, failed_attempt: int, jitter: float,
                       retry_after: timedelta | None) -> timedelta:
    """The wait before the attempt after ``failed_attempt``: the job's backoff (``retry_delay``), lengthened to
    ``retry_after`` (what the failed attempt asked for: a target's ``Retry-After``, a worker's ``retry_after_s``)
    if that is more, but never past the job's ``max_delay_s``: a result cannot make a job retry sooner than its
    policy, nor later than its bounds."""
    backoff = retry_delay(policy, failed_attempt, jitter)
    if retry_after is None:
        return backoff
    return max(backoff, min(retry_after, timedelta(seconds=policy.max_delay_s)))
