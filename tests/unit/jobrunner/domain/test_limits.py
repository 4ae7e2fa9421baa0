"""Per-tenant limits: a default for every tenant and overrides, parsed strictly."""

from __future__ import annotations

import pytest

from jobrunner.domain.limits import Limits, TenantLimits


def test_a_tenants_entry_overrides_only_the_limits_it_names() -> None:
    limits = TenantLimits.parse({"*": {"submissions_per_second": 20, "payload_bytes": 4096},
                                 "payments": {"submissions_per_second": 200}}, max_payload_bytes=65536)
    assert limits.of("payments") == Limits(submissions_per_second=200, payload_bytes=4096)
    assert limits.of("anyone") == Limits(submissions_per_second=20, payload_bytes=4096)
    assert limits.rate_limited


def test_without_entries_there_is_no_rate_limit_and_the_deployments_payload_bound() -> None:
    limits = TenantLimits.parse({}, max_payload_bytes=1000)
    assert limits.of("anyone") == Limits(submissions_per_second=None, payload_bytes=1000)
    assert not limits.rate_limited
    # a tenant may also be exempted from a default rate
    exempt = TenantLimits.parse({"*": {"submissions_per_second": 5}, "ops": {"submissions_per_second": None}}, 1000)
    assert (exempt.of("ops").submissions_per_second, exempt.of("x").submissions_per_second) == (None, 5)


@pytest.mark.parametrize(("entries", "message"), [
    ({"*": {"submissions_per_second": 0}}, "submissions_per_second must be a positive integer or null"),
    ({"a": {"submissions_per_second": True}}, "submissions_per_second must be a positive integer or null"),
    ({"a": {"payload_bytes": 70000}}, "payload_bytes must be between 1 and 65536"),
    ({"a": {"jobs": 3}}, r"unknown limits \['jobs'\]"),
    ({"a": 3}, "expected an object of limits"),
])
def test_a_wrong_limit_names_the_tenant_and_why(entries: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TenantLimits.parse(entries, max_payload_bytes=65536)
