"""The TenantQuotas contract, on memory and on DynamoDB (moto's server)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobrunner.ports import TenantQuotas


def test_a_window_admits_up_to_its_limit_then_refuses_without_counting(tenant_quotas: TenantQuotas) -> None:
    assert [tenant_quotas.admit("alice", 100, 3) for _ in range(5)] == [True, True, True, False, False]
    # a refusal counted nothing: a higher limit in the same window admits exactly the difference
    assert [tenant_quotas.admit("alice", 100, 4) for _ in range(2)] == [True, False]


def test_tenants_and_windows_are_counted_apart(tenant_quotas: TenantQuotas) -> None:
    assert tenant_quotas.admit("alice", 100, 1) and not tenant_quotas.admit("alice", 100, 1)
    assert tenant_quotas.admit("bob", 100, 1)
    assert tenant_quotas.admit("alice", 101, 1)


def test_racing_callers_never_get_past_the_limit_together(tenant_quotas: TenantQuotas) -> None:
    # Given 8 threads asking 80 admissions of one tenant in one window whose limit is 25
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: tenant_quotas.admit("carol", 7, 25), range(80)))
    # Then exactly 25 were admitted
    assert answers.count(True) == 25
