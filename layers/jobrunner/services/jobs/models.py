"""What the job use cases take and answer: the rules they apply, a backfill's and a bulk change's outcome. (A new
job is a ``domain.spec.JobSpec``; a PATCH, a ``domain.spec.SpecChange``.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobrunner.domain.limits import DEFAULT_MAX_PAYLOAD_BYTES, TenantLimits
from jobrunner.domain.target_grants import TargetGrants
from jobrunner.domain.topics import TopicGrants

if TYPE_CHECKING:
    from datetime import datetime


@dataclass(frozen=True)
class JobRules:
    segment_count: int
    #: Which topics each tenant may name (``domain.topics``); by default only ``jobs``, for every tenant.
    topics: TopicGrants = field(default_factory=lambda: TopicGrants("jobs", frozenset({"jobs"})))
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    #: Per-tenant limits (``domain.limits``); the payload bound is the lower of theirs and the one above.
    limits: TenantLimits = field(default_factory=TenantLimits)
    #: Which targets a job may name (``domain.target_grants``); by default every kind, no function nor queue.
    targets: TargetGrants = field(default_factory=TargetGrants)
    #: One-time jobs' rows expire by themselves (``domain.expiry``): a run now or a backfill of one first moves
    #: the instant its row expires (a write of the row), so that the row outlives the run.
    one_time_rows_expire: bool = True


@dataclass(frozen=True)
class Backfill:
    """What a backfill request found and did."""

    #: The fires the job's schedule had in the range.
    fires: list[datetime]
    #: Those this request queued (none for a dry run; a fire already backfilled is not queued again).
    queued: list[datetime]


@dataclass
class BulkResult:
    """What a bulk change did to each job it selected."""

    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
