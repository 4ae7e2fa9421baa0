"""The service graph a deployment builds, built by the wiring's container on memory adapters.

A test names what it varies as a deployment does, in settings (``JOBRUNNER_SEGMENTS``, topics, limits),
and gives the adapters it watches or breaks; every other port is in memory, and a part of the deployment
it leaves out is absent as it is there: no counters, nothing counted; no change log, none kept (unless
``changes`` is given, the change log is off); no invoker, no scan woken. A rule no setting names (a scan's
fair window, the tick's catch-up, the outcomes' jitter) is varied through the container's overrides, so that
every world is the deployment's service graph."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.config import Settings
from jobrunner.wiring import Container

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from jobrunner.ports import (
        CalendarStore,
        ChangeLog,
        Clock,
        Deliverer,
        Invoker,
        LeaseStore,
        Publisher,
        Stores,
        TenantQuotas,
        WebhookSecrets,
    )
    from jobrunner.services.scan import ScanRules
    from jobrunner.services.tick import TickRules


def memory_container(
    env: Mapping[str, str] | None = None, *, clock: Clock, store: Stores | None = None,
    leases: LeaseStore | None = None, publisher: Publisher | None = None, invoker: Invoker | None = None,
    quotas: TenantQuotas | None = None, changes: ChangeLog | None = None, calendars: CalendarStore | None = None,
    scan_rules: Callable[[ScanRules], ScanRules] | None = None,
    tick_rules: Callable[[TickRules], TickRules] | None = None, jitter: Callable[[], float] = random.random,
    deliverer: Deliverer | None = None, webhook_secrets: WebhookSecrets | None = None,
) -> Container:
    """Wiring's ``Container`` with the settings ``env`` and the ports given, the others in memory, and the rules
    no setting names varied by ``scan_rules``, ``tick_rules`` and ``jitter`` (see ``Container``). Limits that
    are counted need ``quotas`` (the container would reach for DynamoDB otherwise)."""
    settings = Settings.from_env({"JOBRUNNER_CHANGE_LOG": "off", **(env or {})})
    assert quotas is not None or not settings.tenant_limits.counted, "counted limits need quotas in memory"
    # (one-time jobs' rows expire by the container's clock, as the stage's setting says: ``domain.expiry``)
    store = store or MemoryJobStore(clock, history_ttl_s=lambda tenant: settings.tenant_limits.of(tenant).history_ttl_s,
                                    one_time_rows_expire=settings.one_time_rows_expire)
    return Container(settings, store=store, publisher=publisher or MemoryPublisher(),
                     leases=leases or MemoryLeaseStore(), invoker=invoker, clock=clock, quotas=quotas,
                     changes=changes, calendars=calendars, scan_rules=scan_rules, tick_rules=tick_rules,
                     jitter=jitter, deliverer=deliverer, webhook_secrets=webhook_secrets)
