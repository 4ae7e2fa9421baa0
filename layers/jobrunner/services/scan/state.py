"""One scan's working state (``Partition``), in named parts: the completions still to write
(``PendingCompletions``), the publishes that failed (``PublishFailures``), and the rows that wait (``retry_later``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from jobrunner.domain.jobs import Lane
from jobrunner.domain.publication import next_fire, row_identity

if TYPE_CHECKING:
    from collections.abc import Iterable

    from jobrunner.domain.calendars import Calendar
    from jobrunner.domain.jobs import Job, ScheduledExecution
    from jobrunner.services.scan.due import DueRows
    from jobrunner.services.scan.late import LateLane
    from jobrunner.services.scan.lease import Lease
    from jobrunner.services.scan.rules import ScanReport

log = logging.getLogger(__name__)

_MS = timedelta(milliseconds=1)


@dataclass
class PendingCompletions:
    """Rows dealt with (published, or recorded skipped, held, dead-lettered, or a replay already ended) whose
    completion (``ports.Completion``: the row settled, its next fire and its watchdog planned) is still to write."""

    #: The rows, with the job each was dealt with for.
    rows: list[tuple[ScheduledExecution, Job]] = field(default_factory=list)
    #: Rows whose execution has ended already (not published, or a replay): completed without a watchdog.
    ended: set[tuple[object, ...]] = field(default_factory=set)
    #: The fire to plan after a row, where a policy decided it (a catch-up window's resume, None for a fire held
    #: before, whose next fire was planned then); by row identity, until its completion is written.
    next_fires: dict[tuple[object, ...], datetime | None] = field(default_factory=dict)

    def add(self, row: ScheduledExecution, job: Job, *, ended: bool = False) -> None:
        if ended:
            self.ended.add(row_identity(row))
        self.rows.append((row, job))

    def plan_next(self, row: ScheduledExecution, at: datetime | None) -> None:
        """Plan ``at`` (None: nothing) after ``row`` instead of its schedule's next fire."""
        self.next_fires[row_identity(row)] = at

    def next_fire_of(self, row: ScheduledExecution, job: Job) -> datetime | None:
        return self.next_fires.get(row_identity(row), next_fire(row, job))

    def watched(self, row: ScheduledExecution) -> bool:
        """Whether ``row``'s execution gets a watchdog (it was published, and has not ended)."""
        return row_identity(row) not in self.ended

    def written(self, done: Iterable[ScheduledExecution]) -> None:
        """The completions of every pending row are written: forget them."""
        self.rows = []
        self.ended.clear()
        for row in done:
            self.next_fires.pop(row_identity(row), None)


@dataclass
class PublishFailures:
    """The publishes of rows that failed in this scan: when a row is dead-lettered instead of tried again."""

    #: Per row identity: failed publishes, and how many of them the broker refused (the dead-letter threshold).
    tries: dict[tuple[object, ...], tuple[int, int]] = field(default_factory=dict)
    #: Topics whose records the broker refused for good in this scan (their next rows: one refusal is enough).
    refusing_topics: set[str] = field(default_factory=set)
    #: Rows refused in a shared publish: published one at a time until the refusal is pinned on one.
    suspects: set[tuple[object, ...]] = field(default_factory=set)

    def suspected(self, row: ScheduledExecution) -> bool:
        return row_identity(row) in self.suspects

    def failed(self, row: ScheduledExecution, *, refused: bool, shared: bool) -> tuple[int, int]:
        """Count a failed publish of ``row``; (failed publishes, refusals) so far. Only a refusal of the row
        published alone counts towards its dead letter: a timeout or an unsent message says nothing against it,
        and a refusal in a shared publish may be another row's (Kafka's idempotent producer fails the whole call
        after one refusal): the row becomes a suspect, published alone next time."""
        identity = row_identity(row)
        tries, refusals = self.tries.get(identity, (0, 0))
        tries += 1
        if refused and shared:
            self.suspects.add(identity)
        elif refused:
            refusals += 1
        self.tries[identity] = (tries, refusals)
        return tries, refusals

    def enough(self, topic: str, max_attempts: int) -> int:
        """Refusals after which a row of ``topic`` is dead-lettered: a topic that already refused a row for good
        in this scan is not given ``max_attempts`` chances again."""
        return 1 if topic in self.refusing_topics else max_attempts

    def cleared(self, row: ScheduledExecution) -> None:
        """``row`` went out (or was dead-lettered): its failures are forgotten."""
        self.tries.pop(row_identity(row), None)
        self.suspects.discard(row_identity(row))


@dataclass
class Partition:
    """One scan's working state: its partition, lease, due rows and late lane, and the named parts each step keeps."""

    report: ScanReport
    due: DueRows
    lease: Lease
    late: LateLane
    #: The partition was leased before (a crash, a lost lease, a budget run out): its rows may be replays.
    replaying: bool = False
    completions: PendingCompletions = field(default_factory=PendingCompletions)
    failures: PublishFailures = field(default_factory=PublishFailures)
    #: Rows planned under a job version the job has not reached yet, and when each was first seen.
    ahead: dict[tuple[object, ...], datetime] = field(default_factory=dict)
    #: The executions this scan has published, with the job version of the row published: a second row of one
    #: of them (a copy re-asserted by a writer under the same execution_id, keyed elsewhere in the partition) is
    #: dropped, not published again; one of another version (a change that landed late planned the same fire
    #: again) is only completed, so that its next fire is planned under that version.
    published_ids: dict[str, int] = field(default_factory=dict)
    #: The calendars read by this scan (``FireGate``), by (tenant, name), with when each was read.
    calendars: dict[tuple[str, str], tuple[Calendar | None, datetime]] = field(default_factory=dict)
    #: Set when this scan wrote a row into its own partition: another late poll is needed before done.
    wrote_here: bool = False
    #: When the rows of the group being published that must wait are due again (``retry_later``).
    retry_at: datetime | None = None

    @property
    def segment(self) -> int:
        return self.report.segment

    @property
    def bucket(self) -> datetime:
        return self.report.bucket

    def retry_later(self, rows: Iterable[ScheduledExecution], why: str, exc: Exception,
                    extra: dict[str, object] | None = None) -> None:
        """A step failed for ``rows`` (``why``, ``exc``): log it, count an error, and take them again at
        ``retry_at``, after the backoff."""
        log.warning("%s, retrying: %s", why, exc, extra=extra)
        self.report.errors += 1
        self.postpone(rows)

    def postpone(self, rows: Iterable[ScheduledExecution], until: datetime | None = None) -> None:
        """Take ``rows`` again at ``until`` (``retry_at`` if not given), with no error counted."""
        not_before = until or self.retry_at
        assert not_before is not None
        for row in rows:
            self.due.add(row, not_before=not_before)

    def owns(self, row: ScheduledExecution) -> bool:
        """Whether ``row`` is in this scan's partition."""
        return row.bucket == self.bucket and row.segment == self.segment

    def own(self, row: ScheduledExecution, due_at: datetime, now: datetime) -> ScheduledExecution:
        """A row for the scan's own partition goes to its PLANNED lane, which only this scan reads while it holds
        the lease: it publishes the row from memory (no poll reads it, so it needs no late lane's lead), and a
        scan taking over reads it from the kept progress. Its key is its due instant ``due_at``, but no earlier
        than just after ``now`` and after the progress (the one this scan started from included, which another
        host's clock may have put ahead of ``now``), so it sorts after every row settled so far and no progress
        kept can have passed it."""
        if not self.owns(row):
            return row
        floor = self.due.progress()
        due_at = max(due_at, now + _MS, floor.due_at + _MS if floor is not None else due_at)
        return replace(row, lane=Lane.PLANNED, due_at=due_at)
