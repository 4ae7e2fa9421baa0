"""The job use cases' quota bookkeeping: counted on the tenants' counters, or, with none, nothing counted."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.quotas.memory import MemoryTenantQuotas
from jobrunner.domain.errors import LimitReached, Unavailable
from jobrunner.domain.limits import QuotaChange, TenantLimits
from jobrunner.services.jobs import CountedQuotas, NoQuotas

NOW = datetime(2026, 11, 22, 10, 0, 10, tzinfo=UTC)
ONE_JOB = QuotaChange(jobs=1)


def failing() -> bool:
    raise Unavailable("the database is down")


def test_without_counters_a_write_goes_ahead_and_a_failed_one_is_not_read_back() -> None:
    # Given no counters, and a write that raises (it may have landed)
    reads: list[str] = []

    def landed() -> bool:
        reads.append("read")
        return True

    # When it is counted, Then the error is the write's, and nothing was read to settle a count there is not
    with pytest.raises(Unavailable):
        NoQuotas().counted("alice", ONE_JOB, failing, landed=landed)
    assert reads == []
    assert NoQuotas().counted("alice", ONE_JOB, lambda: True) is True


def test_without_counters_no_rate_refuses_and_a_batch_is_written_together() -> None:
    quotas = NoQuotas()
    for _ in range(1000):
        quotas.admit("alice", NOW, count=100)
    assert quotas.standing is False


def test_with_counters_creates_are_counted_one_at_a_time_only_under_standing_limits() -> None:
    clock = ManualClock(NOW)
    rate = TenantLimits.parse({"*": {"submissions_per_second": 5}}, 100)
    held = TenantLimits.parse({"*": {"jobs_held": 2}}, 100)
    assert CountedQuotas(MemoryTenantQuotas(), rate, clock).standing is False
    assert CountedQuotas(MemoryTenantQuotas(), held, clock).standing is True


def test_with_counters_a_write_over_a_standing_limit_is_refused_before_it_is_made() -> None:
    # Given a tenant that may hold one job, and holds one
    quotas = CountedQuotas(MemoryTenantQuotas(), TenantLimits.parse({"*": {"jobs_held": 1}}, 100), ManualClock(NOW))
    assert quotas.counted("alice", ONE_JOB, lambda: True)
    writes: list[str] = []

    def write() -> bool:
        writes.append("write")
        return True

    # When a second is created, Then it is refused and never written
    with pytest.raises(LimitReached):
        quotas.counted("alice", ONE_JOB, write)
    assert writes == []
