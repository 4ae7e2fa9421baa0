"""Per-tenant limits: a default for every tenant (``*``) and overrides per tenant.

- ``submissions_per_second``: jobs a tenant may submit in one second (``POST /jobs``, counted per
  UTC second). Over it: 429 with ``Retry-After`` and the limit named. None: no limit.
- ``payload_bytes``: the largest payload a tenant's job may carry, at most the deployment's
  ``JOBRUNNER_MAX_PAYLOAD_BYTES``. Over it: 422 naming the limit (retrying would not help).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from jobrunner.domain.topics import EVERY_OTHER_TENANT

if TYPE_CHECKING:
    from collections.abc import Mapping


#: The largest payload a deployment accepts unless ``JOBRUNNER_MAX_PAYLOAD_BYTES`` says otherwise.
DEFAULT_MAX_PAYLOAD_BYTES = 64 * 1024


@dataclass(frozen=True)
class Limits:
    submissions_per_second: int | None = None
    payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES


@dataclass(frozen=True)
class TenantLimits:
    default: Limits = field(default_factory=Limits)
    overrides: Mapping[str, Limits] = field(default_factory=dict, compare=False)

    def of(self, tenant: str) -> Limits:
        return self.overrides.get(tenant, self.default)

    @property
    def rate_limited(self) -> bool:
        """Whether any tenant has a rate limit (else no quota counter is needed at all)."""
        return any(limits.submissions_per_second is not None for limits in (self.default, *self.overrides.values()))

    @classmethod
    def parse(cls, entries: Mapping[str, Any], max_payload_bytes: int) -> TenantLimits:
        """``{"*": {"submissions_per_second": 20}, "payments": {"submissions_per_second": 200}}``: a
        tenant's entry overrides the fields it names, the others come from ``*`` (then the deployment)."""
        base = Limits(payload_bytes=max_payload_bytes)
        default = _merged(base, entries.get(EVERY_OTHER_TENANT, {}), EVERY_OTHER_TENANT, max_payload_bytes)
        overrides = {tenant: _merged(default, values, tenant, max_payload_bytes)
                     for tenant, values in entries.items() if tenant != EVERY_OTHER_TENANT}
        return cls(default, overrides)


def _merged(base: Limits, values: Any, tenant: str, max_payload_bytes: int) -> Limits:
    if not isinstance(values, dict):
        raise ValueError(f"tenant {tenant!r}: expected an object of limits, got {values!r}")
    unknown = sorted(set(values) - {"submissions_per_second", "payload_bytes"})
    if unknown:
        raise ValueError(f"tenant {tenant!r}: unknown limits {unknown}")
    limits = base
    if "submissions_per_second" in values:
        rate = values["submissions_per_second"]
        if rate is not None and (not isinstance(rate, int) or isinstance(rate, bool) or rate < 1):
            raise ValueError(f"tenant {tenant!r}: submissions_per_second must be a positive integer or null")
        limits = replace(limits, submissions_per_second=rate)
    if "payload_bytes" in values:
        size = values["payload_bytes"]
        if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= max_payload_bytes:
            raise ValueError(f"tenant {tenant!r}: payload_bytes must be between 1 and {max_payload_bytes}")
        limits = replace(limits, payload_bytes=size)
    return limits
