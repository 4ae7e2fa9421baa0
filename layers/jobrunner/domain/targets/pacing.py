"""A tenant's delivery rate: at most ``per_second`` deliveries of one tenant start in any one second.

A sliding window, exact rather than a token bucket's average: the next delivery may start when fewer than
``per_second`` started in the second before it, that is at once, or one second after the oldest of the last
``per_second`` starts. A burst of up to ``per_second`` goes at once, then each start waits for a slot to
free. ``services.delivery`` says where the window is kept (one per delivery function instance) and what
happens to a delivery that cannot start in time.
"""

from __future__ import annotations

import threading
from collections import deque
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

#: The window a rate is counted over.
SECOND = timedelta(seconds=1)


def next_start(starts: Sequence[datetime], per_second: int | None, now: datetime) -> datetime:
    """The earliest instant from ``now`` that a delivery may start, given the ``starts`` of the tenant's last
    deliveries (oldest first) and its rate (None: no rate)."""
    if per_second is None or len(starts) < per_second:
        return now
    return max(now, starts[-per_second] + SECOND)


class TenantPace:
    """The recent starts of each tenant's deliveries, to pace them under each tenant's rate (``next_start``).

    Thread-safe; it keeps at most ``per_second`` starts of a tenant, and forgets a tenant whose last start is
    more than a second old (``forget_idle``), so it stays as small as the tenants of the last second."""

    def __init__(self) -> None:
        self._starts: dict[str, deque[datetime]] = {}
        self._lock = threading.Lock()

    def next_start(self, tenant: str, per_second: int | None, now: datetime) -> datetime:
        """When the tenant's next delivery may start (``now`` when it may start at once)."""
        with self._lock:
            return next_start(self._starts.get(tenant, ()), per_second, now)

    def started(self, tenant: str, per_second: int | None, at: datetime) -> None:
        """Count a delivery of ``tenant`` started ``at`` (nothing is kept for a tenant without a rate)."""
        if per_second is None:
            return
        with self._lock:
            starts = self._starts.get(tenant)
            if starts is None or starts.maxlen != per_second:
                starts = self._starts[tenant] = deque(starts or (), maxlen=per_second)
            starts.append(at)

    def forget_idle(self, now: datetime) -> None:
        """Forget the tenants that started nothing in the second before ``now`` (they constrain nothing)."""
        with self._lock:
            for tenant in [t for t, starts in self._starts.items() if not starts or starts[-1] + SECOND <= now]:
                del self._starts[tenant]
