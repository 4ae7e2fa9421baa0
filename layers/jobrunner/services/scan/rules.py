"""What a scan is told (``ScanRules``), what it reports (``ScanReport``), the store ports it uses (``ScanStores``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from jobrunner.domain.placement import SETTLE
from jobrunner.ports import HistoryStore, JobStore, ScheduledRowStore

if TYPE_CHECKING:
    from jobrunner.domain.target_grants import TargetGrants
    from jobrunner.domain.topics import TopicGrants


@dataclass(frozen=True)
class ScanRules:
    segment_count: int
    lease_ttl: timedelta = timedelta(seconds=30)
    renew_every: timedelta = timedelta(seconds=10)
    #: How often a scan that has moved on keeps its progress (a renewal that carries it): a scan taking
    #: the partition over after a crash publishes again what was settled since (same ``execution_id``).
    progress_every: timedelta = timedelta(seconds=2)
    poll_every: timedelta = timedelta(seconds=1)
    settle: timedelta = SETTLE
    #: How long after its bucket ends a scan keeps retrying failures before leaving them to catch-up.
    overtime: timedelta = timedelta(minutes=3)
    group_size: int = 500
    #: The first group after the scan has caught up is this small, and each next one twice the last, up to
    #: ``group_size``: the first rows of a burst go out after a few round trips, not after a whole group
    #: has been read and recorded (about 5 s for 500 rows in each of 16 scans sharing two cores).
    first_group: int = 50
    #: Rows already due that a scan holds to share out between tenants (``DueRows``): one tenant's burst
    #: delays another's rows by at most one round of the tenants present, as long as the burst's backlog
    #: in the partition fits in this many rows (the memory it costs: about 1 KB a row).
    fair_window: int = 5_000
    retry_backoff: timedelta = timedelta(seconds=1)
    #: The longest one publish may take (the publisher's bound); the lease must outlast it.
    publish_timeout: timedelta = timedelta(seconds=10)
    #: Spare lease time kept beyond a publish's bound (clock skew, the renewal's own round trip).
    lease_margin: timedelta = timedelta(seconds=5)
    #: Publishes of one row the broker refuses for good before it is dead-lettered instead.
    max_publish_attempts: int = 5
    #: How long a row planned under a version the job has not reached yet waits for the change that
    #: planned it to land (its compare-and-set follows its rows) before it counts as a lost change's; and
    #: how long a row whose job cannot be read waits for the job's own write (a create writes the first run
    #: first) before it counts as the row of a create that failed.
    change_grace: timedelta = timedelta(seconds=30)
    #: Topics a row's tenant may still publish to (None: any); a row for another is dead-lettered at once
    #: (the topic left the deployment's allowed list, or the tenant's grant was taken back).
    topics: TopicGrants | None = None
    #: Where the executions of jobs with a target go, for the delivery function (no topic grant applies to it).
    delivery_topic: str = "job-deliveries"
    #: Targets a row's job may still be delivered to (None: any); a row for another is dead-lettered at once (the
    #: stage stopped allowing its kind, or took its function or queue off the allow-list).
    targets: TargetGrants | None = None
    dead_letter_topic: str = "job-dlq"
    #: The key that signs each message's result token (``domain.receipts``); the results function checks it.
    result_key: bytes = b""
    #: A scan with nothing to do for this long (its planned lane read, nothing due, nothing pending, no
    #: late row in its polls) gives its lease up and ends, unless its minute closes sooner anyway. Only
    #: where the writers of LATE rows wake the partition's scan (``services.wake``); None: never.
    idle_end: timedelta | None = None
    #: How long a scan uses a calendar it has read before reading it again: a change of a calendar applies
    #: to the fires published this long after it lands.
    calendar_refresh: timedelta = timedelta(seconds=10)



@dataclass
class ScanReport:
    segment: int
    bucket: datetime
    acquired: bool = False
    finished: bool = False
    lost_lease: bool = False
    published: int = 0
    dropped: int = 0
    errors: int = 0
    expired: int = 0  # watchdog rows handled
    dead_lettered: int = 0  # rows that could not be published, sent to the dead-letter topic instead
    replays_skipped: int = 0  # replayed rows whose execution had already ended: completed, not republished
    skipped: int = 0  # fires a policy did not run (a calendar's exclusion, ...): recorded SKIPPED, completed
    held: int = 0  # fires an overlap policy held (written again for later)
    cancels: int = 0  # cancel messages sent for a previous execution (overlap policy cancel_other)
    idle: bool = False  # ended early with nothing to do, the lease given up (``ScanRules.idle_end``)
    #: Late rows that landed behind a window of the late lane already read (a writer's clock more than
    #: ``domain.placement.CLOCK_SKEW`` off, or a write slower than it said): published late by the last look at
    #: the whole lane. 0 in a healthy system (the ``LateRowsBehindWindow`` alarm).
    behind_window: int = 0
    reported: int = 0  # published executions already added to the segment's heartbeat counters
    lateness_ms: list[float] = field(default_factory=list)

    def dealt_with(self) -> int:
        """Rows dealt with for good so far (published, dropped, dead-lettered, expired, replayed, skipped or held)."""
        return (self.published + self.dropped + self.dead_lettered + self.expired + self.replays_skipped
                + self.skipped + self.held)


class ScanStores(JobStore, ScheduledRowStore, HistoryStore, Protocol):
    """The store ports a scan uses: its partition's scheduled rows (read, settled, written), the jobs (read)
    and the executions' history (written before each publish, read for replays and overlap policies)."""
