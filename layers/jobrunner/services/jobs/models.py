"""What the job use cases take and answer: the rules they apply, a new job, a PATCH, a backfill's and a bulk
change's outcome."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from jobrunner.domain.jobs import RetryChange, RetryPolicy
from jobrunner.domain.limits import DEFAULT_MAX_PAYLOAD_BYTES, TenantLimits
from jobrunner.domain.policies import CatchUp, Overlap
from jobrunner.domain.topics import TopicGrants

if TYPE_CHECKING:
    from datetime import datetime

    from jobrunner.domain.schedules import Schedule


@dataclass(frozen=True)
class JobRules:
    segment_count: int
    #: Which topics each tenant may name (``domain.topics``); by default only ``jobs``, for every tenant.
    topics: TopicGrants = field(default_factory=lambda: TopicGrants("jobs", frozenset({"jobs"})))
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    #: Per-tenant limits (``domain.limits``); the payload bound is the lower of theirs and the one above.
    limits: TenantLimits = field(default_factory=TenantLimits)


@dataclass(frozen=True)
class NewJob:
    schedule: Schedule
    payload: Any
    topic: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_s: int | None = None
    trace_parent: str | None = None
    jitter_s: int | None = None
    tags: dict[str, str] = field(default_factory=dict)
    calendar: str | None = None
    delete_after_last: bool = False
    overlap: Overlap = Overlap.ALLOW_ALL
    catch_up: CatchUp = field(default_factory=CatchUp)

    def fingerprint(self) -> str:
        """Digest of the request, to tell a retried submission from a different one with the same key."""
        body = {"schedule": self.schedule.to_dict(), "payload": self.payload, "topic": self.topic,
                "retry": asdict(self.retry), "timeout_s": self.timeout_s}
        if self.jitter_s is not None:  # so that requests from before jitter and tags keep their digest
            body["jitter_s"] = self.jitter_s
        if self.tags:
            body["tags"] = self.tags
        if self.calendar is not None:
            body["calendar"] = self.calendar
        if self.delete_after_last:
            body["delete_after_last"] = True
        if self.overlap is not Overlap.ALLOW_ALL:
            body["overlap"] = self.overlap.value
        if not self.catch_up.replays_all:
            body["catch_up"] = self.catch_up.to_dict()
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


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


@dataclass(frozen=True)
class JobChanges:
    """A PATCH: only the fields given change; they take effect from the next fire."""

    schedule: Schedule | None = None
    payload: Any = None
    payload_set: bool = False
    topic: str | None = None
    #: The retries' fields the request named (None: leave them), merged with the job read in the CAS loop.
    retry: RetryChange | None = None
    timeout_s: int | None = None
    timeout_set: bool = False
    jitter_s: int | None = None
    jitter_set: bool = False
    #: The job's whole set of tags, replacing the one it has (None: leave them).
    tags: dict[str, str] | None = None
    calendar: str | None = None
    calendar_set: bool = False
    delete_after_last: bool | None = None
    overlap: Overlap | None = None
    #: The job's catch-up window, replacing its own (``CatchUp()``: replay every missed fire again).
    catch_up: CatchUp | None = None
