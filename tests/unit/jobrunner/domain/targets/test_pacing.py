"""A tenant's delivery rate: at most ``per_second`` starts in any one second (a sliding window)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobrunner.domain.targets.pacing import TenantPace, next_start

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_without_a_rate_every_delivery_starts_at_once() -> None:
    assert next_start([T0] * 1000, None, T0) == T0


def test_a_burst_up_to_the_rate_starts_at_once_then_each_waits_for_the_oldest_to_leave_the_second() -> None:
    assert next_start([at(0), at(0.2)], 3, at(0.3)) == at(0.3)
    assert next_start([at(0), at(0.2), at(0.3)], 3, at(0.3)) == at(1)
    assert next_start([at(0), at(0.2), at(0.3), at(1)], 3, at(1)) == at(1.2)


def test_a_start_long_after_the_window_is_not_held() -> None:
    assert next_start([at(0), at(0.1)], 2, at(5)) == at(5)


def test_no_second_ever_holds_more_starts_than_the_rate() -> None:
    # Given a tenant paced at 4 a second, starting each delivery as soon as it may, 40 times
    pace, now, starts = TenantPace(), T0, []
    for _ in range(40):
        now = pace.next_start("a", 4, now)
        pace.started("a", 4, now)
        starts.append(now)
    # Then any one-second window holds at most 4 starts, and the 40 took 9 seconds (4 at once, then 4 a second)
    assert max(sum(s <= other < s + timedelta(seconds=1) for other in starts) for s in starts) == 4
    assert starts[-1] - starts[0] == timedelta(seconds=9)


def test_tenants_are_paced_apart() -> None:
    pace = TenantPace()
    pace.started("a", 1, T0)
    assert pace.next_start("a", 1, T0) == at(1)
    assert pace.next_start("b", 1, T0) == T0


def test_a_tenant_idle_for_a_second_is_forgotten_and_one_still_paced_is_kept() -> None:
    pace = TenantPace()
    pace.started("idle", 1, T0)
    pace.started("busy", 1, at(0.5))
    pace.forget_idle(at(1))
    assert pace.next_start("idle", 1, at(1)) == at(1)
    assert pace.next_start("busy", 1, at(1)) == at(1.5)


def test_a_rate_lowered_keeps_the_recent_starts() -> None:
    pace = TenantPace()
    for offset in (0, 0.1, 0.2):
        pace.started("a", 5, at(offset))
    pace.started("a", 2, at(0.3))
    assert pace.next_start("a", 2, at(0.3)) == at(1.2)
