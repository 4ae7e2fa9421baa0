"""Per-tenant limits: a default for every tenant (``*``) and overrides per tenant.

- ``submissions_per_second``: jobs a tenant may submit in one second (``POST /jobs``, counted per
  UTC second). Over it: 429 with ``Retry-After`` and the limit named. None: no limit.
- ``payload_bytes``: the largest payload a tenant's job may carry, at most the deployment's
  ``JOBRUNNER_MAX_PAYLOAD_BYTES``. Over it: 422 naming the limit (retrying would not help).
- ``history_days``: how long an execution's history record is kept after its last write (its publish,
  then its result), from 2 days (an execution may wait a day for its result) to 3650; 30 by default.
  ``*`` sets it for the deployment, an entry for a tenant. Written with each record (``USING TTL``).
- ``jobs_held``: recurring jobs a tenant may hold (active or paused, until cancelled). A one-time job
  is not held: it is bounded by the two rates, and leaves nothing standing once it has fired.
- ``executions_per_minute``: executions of a tenant's jobs that may be due in one minute. A recurring
  job reserves its most fires in any minute (``most_per_minute``) in every minute while it is held;
  a one-time job and a run now count in the minute they are due. A request that would take a minute
  past the limit gets 429 naming it. The bound is exact: the recurring reservations plus the one-time
  count of any minute never pass it (a recurring job is admitted only beside the fullest minute of
  one-time fires still ahead, see ``Standing``).

Both standing limits are counted (``QuotaChange``, through the ``TenantQuotas`` port) for every tenant
as soon as any tenant has one, so that a limit set later for one tenant starts from its true count
of what it created since. Jobs created while no tenant had the limit are not counted.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from jobrunner.domain.jobs import JobState
from jobrunner.domain.schedules import Every, RepeatingInterval
from jobrunner.domain.topics import EVERY_OTHER_TENANT

if TYPE_CHECKING:
    from collections.abc import Mapping

    from jobrunner.domain.jobs import Job
    from jobrunner.domain.schedules import Schedule


#: The largest payload a deployment accepts unless ``JOBRUNNER_MAX_PAYLOAD_BYTES`` says otherwise.
DEFAULT_MAX_PAYLOAD_BYTES = 64 * 1024
#: Deliveries of one tenant a delivery function instance starts a second unless the stage says otherwise
#: (``JOBRUNNER_DELIVERY_TENANT_RATE``): about what its ``tenant_concurrency`` of 4 calls in flight make of an
#: endpoint answering in 200 ms, so a tenant's own burst is spread, not refused.
DEFAULT_DELIVERY_TENANT_RATE = 20
#: How long history is kept unless the limits say otherwise, and the bounds of what they may say.
DEFAULT_HISTORY_DAYS = 30
HISTORY_DAYS = (2, 3650)


def payload_refusal(payload: Any, limit: int) -> str | None:
    """Why ``payload`` is refused under ``limit`` bytes (its compact JSON, UTF-8), or None."""
    size = len(json.dumps(payload, separators=(",", ":")).encode("utf-8"))
    return f"is {size} bytes; the limit is {limit}" if size > limit else None


@dataclass(frozen=True)
class Limits:
    submissions_per_second: int | None = None
    payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    jobs_held: int | None = None
    executions_per_minute: int | None = None
    history_days: int = DEFAULT_HISTORY_DAYS
    #: None: the stage's delivery rate (``DeliveryRates``).
    deliveries_per_second: int | None = None

    @property
    def history_ttl_s(self) -> int:
        """The time to live of a history record, in seconds."""
        return self.history_days * 86_400


@dataclass(frozen=True)
class TenantLimits:
    default: Limits = field(default_factory=Limits)
    overrides: Mapping[str, Limits] = field(default_factory=dict, compare=False)

    def of(self, tenant: str) -> Limits:
        return self.overrides.get(tenant, self.default)

    @property
    def rate_limited(self) -> bool:
        """Whether any tenant has a rate limit (else no quota counter is needed at all)."""
        return self._any("submissions_per_second")

    @property
    def counts_jobs(self) -> bool:
        """Whether any tenant has a ``jobs_held`` limit (then every tenant's recurring jobs are counted)."""
        return self._any("jobs_held")

    @property
    def counts_minutes(self) -> bool:
        """Whether any tenant has an ``executions_per_minute`` limit (then every tenant's fires are counted)."""
        return self._any("executions_per_minute")

    @property
    def counted(self) -> bool:
        """Whether a quota counter is needed at all."""
        return self.rate_limited or self.counts_jobs or self.counts_minutes

    def _any(self, name: str) -> bool:
        return any(getattr(limits, name) is not None for limits in (self.default, *self.overrides.values()))

    def holding(self, job: Job | None) -> Holding:
        """What ``job`` holds against its tenant's standing limits, counting only what some tenant limits."""
        if job is None or job.state in (JobState.CANCELLED, JobState.DELETED):
            return Holding()
        if job.spec.schedule.recurring:
            return Holding(jobs=1 if self.counts_jobs else 0,
                           per_minute=most_per_minute(job.spec.schedule) if self.counts_minutes else 0)
        fire = job.spec.schedule.first_fire(job.created_at)
        return Holding(minute=minute_of(fire) if self.counts_minutes and fire is not None else None)

    def change(self, old: Job | None, new: Job | None) -> QuotaChange:
        """The change of counts when ``old`` becomes ``new`` (None: no job)."""
        return QuotaChange.between(self.holding(old), self.holding(new))

    def run_now(self, now: datetime, fires: int = 1) -> QuotaChange:
        """The change of counts a run now (due ``now``) makes, or a backfill of ``fires`` fires."""
        return QuotaChange(add_minute=minute_of(now) if self.counts_minutes else None, fires=fires)

    @classmethod
    def parse(cls, entries: Mapping[str, Any], max_payload_bytes: int) -> TenantLimits:
        """``{"*": {"submissions_per_second": 20}, "payments": {"submissions_per_second": 200}}``: a
        tenant's entry overrides the fields it names, the others come from ``*`` (then the deployment)."""
        base = Limits(payload_bytes=max_payload_bytes)
        default = _merged(base, entries.get(EVERY_OTHER_TENANT, {}), EVERY_OTHER_TENANT, max_payload_bytes)
        overrides = {tenant: _merged(default, values, tenant, max_payload_bytes)
                     for tenant, values in entries.items() if tenant != EVERY_OTHER_TENANT}
        return cls(default, overrides)


#: The limits that are counts (a positive integer, or null: no limit).
_COUNTS = ("submissions_per_second", "jobs_held", "executions_per_minute")


def _merged(base: Limits, values: Any, tenant: str, max_payload_bytes: int) -> Limits:
    if not isinstance(values, dict):
        raise ValueError(f"tenant {tenant!r}: expected an object of limits, got {values!r}")
    unknown = sorted(set(values) - {*_COUNTS, "payload_bytes", "history_days", "deliveries_per_second"})
    if unknown:
        raise ValueError(f"tenant {tenant!r}: unknown limits {unknown}")
    limits = base
    for name in _COUNTS:
        if name in values:
            count = values[name]
            if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
                raise ValueError(f"tenant {tenant!r}: {name} must be a positive integer or null")
            counted: dict[str, Any] = {name: count}
            limits = replace(limits, **counted)
    if "payload_bytes" in values:
        size = values["payload_bytes"]
        if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= max_payload_bytes:
            raise ValueError(f"tenant {tenant!r}: payload_bytes must be between 1 and {max_payload_bytes}")
        limits = replace(limits, payload_bytes=size)
    if "history_days" in values:
        days, (low, high) = values["history_days"], HISTORY_DAYS
        if not isinstance(days, int) or isinstance(days, bool) or not low <= days <= high:
            raise ValueError(f"tenant {tenant!r}: history_days must be between {low} and {high}")
        limits = replace(limits, history_days=days)
    if "deliveries_per_second" in values:
        rate = values["deliveries_per_second"]
        if not isinstance(rate, int) or isinstance(rate, bool) or rate < 1:
            raise ValueError(f"tenant {tenant!r}: deliveries_per_second must be a positive integer")
        limits = replace(limits, deliveries_per_second=rate)
    return limits


@dataclass(frozen=True)
class DeliveryRates:
    """Deliveries of one tenant a delivery function instance starts a second: the stage's ``default`` (None: no
    rate), or the tenant's own ``deliveries_per_second`` (``JOBRUNNER_TENANT_LIMITS``: ``*`` for every tenant)."""

    default: int | None = None
    overrides: Mapping[str, int] = field(default_factory=dict)

    def of(self, tenant: str) -> int | None:
        return self.overrides.get(tenant, self.default)

    @classmethod
    def of_stage(cls, stage_rate: int, limits: TenantLimits) -> DeliveryRates:
        """The rates a stage sets: ``stage_rate`` (0: none) unless the tenant limits say otherwise."""
        default = limits.default.deliveries_per_second or stage_rate or None
        overrides = {tenant: own.deliveries_per_second for tenant, own in limits.overrides.items()
                     if own.deliveries_per_second is not None}
        return cls(default, overrides)


# -- standing limits: what jobs hold, and the counts the quota counter keeps --------------------------

MINUTE = timedelta(minutes=1)


def minute_of(instant: datetime) -> int:
    """The minute ``instant`` falls in, as the epoch second it starts at."""
    return int(instant.timestamp()) // 60 * 60


def most_per_minute(schedule: Schedule) -> int:
    """The most fires ``schedule`` can have in one UTC minute. Intervals are at least 10 s, so at most 6;
    a cron fires at most once a minute (a fixed time skipped by a daylight-saving change fires with the
    first minute after it, merged with that minute's own fire); a calendar duration fires at most once."""
    step: Any = None
    if isinstance(schedule, Every):
        step = schedule.every
    elif isinstance(schedule, RepeatingInterval):
        step = schedule.duration if schedule.duration is not None else _span(schedule)
    fires = math.ceil(MINUTE / step) if isinstance(step, timedelta) else 1
    count = getattr(schedule, "count", None)
    return min(fires, count) if count is not None else fires


def _span(schedule: RepeatingInterval) -> timedelta:
    assert schedule.start is not None and schedule.end is not None
    return schedule.end - schedule.start


@dataclass(frozen=True)
class Holding:
    """What one job holds against its tenant's standing limits."""

    #: 1 for a recurring job that is not cancelled (``jobs_held``).
    jobs: int = 0
    #: The most fires a recurring job can have in one minute, reserved in every minute while it is held.
    per_minute: int = 0
    #: The minute a one-time job fires in (``minute_of``), counted in that minute only.
    minute: int | None = None


@dataclass(frozen=True)
class QuotaChange:
    """A change of a tenant's counts: recurring jobs held, fires reserved in every minute, one more fire
    counted in ``add_minute`` and one fewer in ``drop_minute``."""

    jobs: int = 0
    per_minute: int = 0
    add_minute: int | None = None
    drop_minute: int | None = None
    #: How many fires ``add_minute`` takes (a backfill queues many at once).
    fires: int = 1

    @classmethod
    def between(cls, old: Holding, new: Holding) -> QuotaChange:
        moved = old.minute != new.minute
        return cls(jobs=new.jobs - old.jobs, per_minute=new.per_minute - old.per_minute,
                   add_minute=new.minute if moved else None, drop_minute=old.minute if moved else None)

    @property
    def empty(self) -> bool:
        return self == QuotaChange()

    @property
    def grows(self) -> bool:
        """Whether it takes anything a limit may refuse (else it only gives back, and is never refused)."""
        return self.jobs > 0 or self.per_minute > 0 or self.add_minute is not None

    def inverse(self) -> QuotaChange:
        """What undoes it, but for the number of fires: ``drop_minute`` of the inverse gives back ``fires``."""
        return QuotaChange(-self.jobs, -self.per_minute, add_minute=self.drop_minute, drop_minute=self.add_minute)


@dataclass(frozen=True)
class Standing:
    """A tenant's standing counts, as the quota counter keeps them.

    ``peak`` is at least the count of every minute from the current one to ``until`` that holds one-time
    fires (it only grows while such a minute is ahead, and starts again from 0 once ``until`` has passed):
    the fullest minute of one-time fires still ahead, which a new recurring reservation must fit beside.
    """

    jobs: int = 0
    per_minute: int = 0
    peak: int = 0
    until: int = 0

    def peak_ahead(self, now_minute: int) -> int:
        return self.peak if self.until >= now_minute else 0


def apply(standing: Standing, minute_count: int, change: QuotaChange, limits: Limits,
          now_minute: int) -> tuple[str | None, Standing, int]:
    """The counts after ``change`` (the tenant's ``standing`` and the count of ``change.add_minute``, as
    read), or the name of the limit it would pass (then nothing changes). Only what grows is checked;
    ``drop_minute`` is for the caller to give back. Counts never go below zero (jobs created before the
    counting started are not in them)."""
    jobs = max(0, standing.jobs + change.jobs)
    per_minute = max(0, standing.per_minute + change.per_minute)
    peak = standing.peak_ahead(now_minute)
    if change.jobs > 0 and limits.jobs_held is not None and jobs > limits.jobs_held:
        return "jobs_held", standing, minute_count
    bound = limits.executions_per_minute
    if bound is not None and change.per_minute > 0 and per_minute + peak > bound:
        return "executions_per_minute", standing, minute_count
    count = minute_count
    until = standing.until if peak else 0
    if change.add_minute is not None:
        count += change.fires
        if bound is not None and per_minute + count > bound:
            return "executions_per_minute", standing, minute_count
        if change.add_minute >= now_minute:
            peak, until = max(peak, count), max(until, change.add_minute)
    return None, Standing(jobs, per_minute, peak, until), count


def refusal_reason(limit: str, limits: Limits, change: QuotaChange) -> str:
    """What a 429 says about the limit ``apply`` named."""
    if limit == "jobs_held":
        return f"this tenant may hold at most {limits.jobs_held} recurring jobs; cancel one first"
    if change.add_minute is not None and change.per_minute <= 0:
        at = datetime.fromtimestamp(change.add_minute, UTC).strftime("%Y-%m-%dT%H:%MZ")
        return (f"this tenant may have at most {limits.executions_per_minute} executions due in one minute, "
                f"and the minute {at} is full")
    return (f"this tenant may have at most {limits.executions_per_minute} executions due in one minute; a "
            "recurring job reserves its most fires a minute beside the fullest minute of one-time fires ahead")
