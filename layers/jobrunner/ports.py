"""The ports: every interface the services need from the outside world, with its contract.

Adapters live in ``jobrunner.adapters.<kind>.<backend>``; each has an in-memory twin, and the
contract tests in ``tests/contract`` run the same assertions against both.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from jobrunner.domain.calendars import Calendar
    from jobrunner.domain.changes import JobChange
    from jobrunner.domain.jobs import ExecutionRecord, Job, Lane, LanePosition, ScheduledExecution
    from jobrunner.domain.limits import Limits, QuotaChange


class Clock(ABC):
    """Time, injected so that tests never sleep on the wall clock."""

    @abstractmethod
    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""

    @abstractmethod
    def sleep_until(self, instant: datetime) -> None:
        """Block until ``now() >= instant`` (returns at once if it already is)."""


@dataclass(frozen=True)
class Completion:
    """Everything that follows one published execution, written by ``ScheduledRowStore.settle_published``."""

    done: ScheduledExecution
    following: ScheduledExecution | None
    #: The TIMEOUT row that fails the execution if it has not reported in time (jobs with a timeout).
    watchdog: ScheduledExecution | None = None


# -- the store ports -------------------------------------------------------------------------------------------
#
# Four small ports, one per concern, each over one table of the schema (``cql/``): the jobs, the scheduled
# rows the scans publish, the executions' history, the idempotency keys. One backend adapter implements all
# four (``adapters.stores.memory``, ``adapters.stores.cassandra``): they share a session and a lock, and a
# few writes span two concerns in a fixed order (a job's first run before the job, a retry row before the
# record that ends its execution). So method names are unique across the four ports, and each names the
# concept it touches. Each service declares the ports it uses (``Stores`` is all of them, for the wiring).
# They are Protocols, where the other ports are ABCs, so that a service's own combination of them
# (``services.scan.ScanStores``) is met by the one adapter without the adapter naming it; the adapters still
# subclass the four, so one missing a method fails when it is built.
#
# Common to the four: reads reflect every write that returned before them (LOCAL_QUORUM in production), and
# backend failures raise ``jobrunner.domain.errors.Unavailable``.


class JobStore(Protocol):
    """The jobs themselves, as the API writes them (``job_table_v2`` in production).

    Contract:
    - ``create_job`` writes the job and its first scheduled row: after it returns the job exists with
      a run that some scan will see; if it raises, the job may exist (then with its first run) or not
      (then its first run may, which no scan publishes without its job). A retried create with the same
      job is idempotent.
    - No execution writes the job: ``get_job`` and ``get_jobs`` return the job row as the API last wrote it,
      and its run fields come from ``HistoryStore.latest_records`` (``domain.jobs.with_runs``).
    """

    @abstractmethod
    def create_job(self, job: Job, first: ScheduledExecution | None) -> None: ...

    @abstractmethod
    def create_jobs(self, jobs: Sequence[tuple[Job, ScheduledExecution | None]]) -> None:
        """``create_job`` of each (job, first run), each as atomic as ``create_job``; if it raises, some may
        exist."""

    @abstractmethod
    def get_job(self, user_id: str, job_id: str) -> Job | None: ...

    @abstractmethod
    def get_jobs(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Job]:
        """Jobs by (user_id, job_id); missing ones are absent from the result."""

    @abstractmethod
    def list_jobs(self, user_id: str, limit: int, cursor: str | None) -> tuple[list[Job], str | None]:
        """A page of the tenant's jobs in job_id order, and the opaque cursor of the next page (None at
        the end). A cursor is only meaningful to the store that made it."""

    @abstractmethod
    def get_job_settled(self, user_id: str, job_id: str) -> Job | None:
        """The job as a linearizable read sees it: a compare-and-set on it whose outcome its writer could not
        learn (``update_job`` or ``retire_job`` raised) has either landed by the time this returns, and shows,
        or will never land. The way to settle an unknown outcome (by reading, never by waiting): LOCAL_SERIAL on
        Cassandra (a Paxos read, which completes or supersedes a round left in progress); on Amazon Keyspaces,
        whose reads take no serial level, LOCAL_QUORUM, which its documentation says reflects every write that
        succeeded before it (its conditional writes leave no round in progress). Costs more than ``get_job``: for
        doubts only."""

    @abstractmethod
    def update_job(self, job: Job, rows: Sequence[ScheduledExecution], expected_version: int) -> bool:
        """Write ``rows`` (planned under ``job.schedule_version``), then overwrite the job's user-controlled
        fields only if the stored job is still at ``expected_version`` (a compare-and-set, linearizable).
        A change of schedule or state (``job.schedule_version == job.version``) writes them all (state,
        version, schedule_version, schedule, payload, topic, retry, timeout, paused_at, updated_at,
        next_run_at), and its next run stands until a scan completes a fire planned under it. Any other
        change writes only version, payload, topic, retry, timeout and updated_at: the job's next run
        stays as the store holds it, even if a scan's completion lands between the read and this write.
        Returns False when it is not: the job is unchanged, and the rows stay where they are. They are never
        removed: the winner of the race took the same version number and may have planned the very same rows
        (two resumes of one fire), so removing them could remove the winner's; a row the job does not want is
        dropped by its scan (``services.scan``: the version, the state and the schedule decide). If it raises,
        the compare-and-set may land later (an accepted Paxos round committed by the next one on the
        partition): ``get_job_settled`` settles it."""

    @abstractmethod
    def walk_jobs(self, after: str | None, limit: int) -> tuple[list[Job], str | None]:
        """A page of every tenant's jobs, for a reader that visits them all (the reconciler): at most ``limit``
        jobs in the store's own order, starting after the opaque cursor ``after`` (None: from the start), and
        the cursor of the next page (None once the walk has passed the last job).

        Walking from None and following the cursors returns every job that exists for the whole walk exactly
        once, however its pages are cut (a tenant's partition may span pages); a job created or deleted during
        the walk may or may not be returned. Pages are read at the lowest consistency (``LOCAL_ONE`` in
        production) and may miss a write that returned just before: the reader must read a job again
        (``get_jobs``) before acting on it. A cursor is only meaningful to the store that made it, and stays
        valid across processes (the walk resumes in the next invocation)."""

    @abstractmethod
    def retire_job(self, job: Job, expected_version: int, ttl_s: int) -> bool:
        """Mark the job deleted (``job``, in state DELETED, as its new version), only if the stored job is still at
        ``expected_version`` (a compare-and-set, linearizable); False when it is not. Then its row is written
        to expire after ``ttl_s`` (its history's retention), as its history records do. Nothing writes a
        deleted job again: the API does not find it, and what is still in flight (a run now, a retry) reads
        it as it stands."""


class ScheduledRowStore(Protocol):
    """The scheduled rows: each execution to publish (a fire, a run now, a retry, a watchdog), in the lanes of
    its (minute bucket, segment) partition (``task_schedule_v2`` in production).

    Contract:
    - A scheduled row is identified by its partition (bucket, segment), lane, ``due_at``, ``job_id``,
      ``execution_id`` and ``job_version``: re-planning one fire under a new job version writes a
      second row, so removing the stale one never removes the new one.
    - ``lane_rows`` yields the rows of one lane of one (bucket, segment) partition, ordered by
      their key (``due_at`` first), reading page by page (memory stays bounded by the page size);
      with ``after``, only the rows that sort after that position (to resume a broken read, or a
      partition a scan settled up to there); with ``since`` and/or ``until``, only the rows due at
      or after ``since`` and before ``until`` (a window of the late lane), reading no row outside it. With
      ``stale_ok`` the read is made at the lowest consistency and may miss rows written just before (for a
      reader that only takes the rows it finds as evidence, the reconciler).
    - Every scheduled row is written to expire ``domain.placement.KEEP_ROWS`` after its scan may close
      (``domain.placement.row_ttl``): a done row of the PLANNED lane is never deleted.
    - ``write_scheduled`` inserts rows (manual runs, retries placed anew, held fires); idempotent.
    - ``settle_published``, after the publish, writes the following execution (if any) and the watchdog. It
      removes nothing: the scan removes a settled row of the LATE lane (which a scan taking the partition over
      reads from its start) with ``delete_scheduled`` only once the rows that follow it are known to be where
      their scans will read them (``domain.placement.placed_in_time``, placed anew when they are not); a PLANNED
      row stays until it expires, and the scan keeps its progress past it (``LeaseStore.renew``). Replaying
      it is harmless. A row stays scheduled until it is settled, so a retry or the next scan of the partition
      publishes it again (same ``execution_id``).
    - ``delete_scheduled`` removes rows without publishing them (stale version, cancelled job).
    """

    @abstractmethod
    def lane_rows(
        self, bucket: datetime, segment: int, lane: Lane, after: LanePosition | None = None, *,
        since: datetime | None = None, until: datetime | None = None, stale_ok: bool = False,
    ) -> Iterator[ScheduledExecution]: ...

    @abstractmethod
    def write_scheduled(self, rows: Sequence[ScheduledExecution]) -> None: ...

    @abstractmethod
    def settle_published(self, completions: Sequence[Completion]) -> None: ...

    @abstractmethod
    def delete_scheduled(self, rows: Sequence[ScheduledExecution]) -> None: ...


class HistoryStore(Protocol):
    """Each job's execution records: one per execution, from its publish to its end (``task_history_v2`` in
    production).

    Contract:
    - A history record is identified by ``job_id``, ``scheduled_at``, ``attempt`` and ``execution_id``
      (``RecordKey``): two executions of one fire and attempt (a run now requested at the instant of a
      scheduled fire, and their retries) keep a record each, so neither's result can be lost to the other's.
    - History order: newest ``scheduled_at`` first, then highest ``attempt``, then ``execution_id`` ascending.
    - ``write_started`` records, before an execution is published, its history row (RUNNING), so that a
      worker's result can never arrive for an execution the store does not know. It never moves a
      record's status backwards: a record that already ended (SUCCESS, FAILED) keeps its status, end
      time and error. It is idempotent.
    - Every record is written to expire after its tenant's history retention.
    """

    @abstractmethod
    def write_started(self, records: Sequence[ExecutionRecord]) -> None: ...

    @abstractmethod
    def write_outcomes(self, outcomes: Sequence[Outcome]) -> None:
        """Write executions' outcomes: their retry rows (if any, as ``ScheduledRowStore.write_scheduled``), then
        their records; a record that has ended with a retry planned is only ever stored once its retry row is.
        Idempotent: if it raises, some of the outcomes may be written, and writing them all again is harmless."""

    @abstractmethod
    def history_page(
        self, job_id: str, limit: int, before: tuple[datetime, int, str | None] | None = None
    ) -> list[ExecutionRecord]:
        """The first ``limit`` execution records of a job in history order. With ``before`` (the scheduled_at,
        attempt and execution_id of a record), only the records after that one in this order (the next
        page): paging from the last record of each page returns every record exactly once. An
        execution_id of None stands after every record of that (scheduled_at, attempt) (the cursors of
        an older API, which named no execution)."""

    @abstractmethod
    def latest_records(
        self, job_ids: Sequence[str], limit: int, *, stale_ok: bool = False
    ) -> dict[str, list[ExecutionRecord]]:
        """The first ``limit`` records of each job's history (``history_page``'s order), by job id. With
        ``stale_ok`` they are read at the lowest consistency and may miss a record written just before (for a
        reader that reads again before it acts, the reconciler)."""

    @abstractmethod
    def get_record(
        self, job_id: str, scheduled_at: datetime, attempt: int, execution_id: str
    ) -> ExecutionRecord | None:
        """The record of one execution (a point read by its whole key), or None if there is none."""

    @abstractmethod
    def get_records(self, keys: Sequence[RecordKey]) -> dict[RecordKey, ExecutionRecord]:
        """The records of several executions by their whole keys (``get_record``'s arguments, in order); keys
        without a record are absent from the result."""

    @abstractmethod
    def record_by_execution_id(self, job_id: str, execution_id: str, scan_limit: int = 1000) -> ExecutionRecord | None:
        """The record with ``execution_id`` among the job's newest ``scan_limit`` records (no whole key known)."""


class IdempotencyStore(Protocol):
    """The tenants' idempotency keys, each bound to the job its first request made (``job_idempotency`` in
    production)."""

    @abstractmethod
    def claim_idempotency_key(self, claim: IdempotencyClaim) -> IdempotencyClaim:
        """Bind (tenant, key) to ``claim`` unless already bound; returns the binding that won (this one, or
        the earlier one with its own job id, fingerprint and instant). Linearizable: of concurrent claims
        exactly one wins (a lightweight transaction at LOCAL_SERIAL in production)."""

    @abstractmethod
    def idempotency_key(self, user_id: str, key: str) -> IdempotencyClaim | None:
        """The binding of (tenant, key), or None if no claim of it has won. Settled, like ``get_job_settled``: a
        claim whose outcome was in doubt is decided by the read (nothing written)."""


class Stores(JobStore, ScheduledRowStore, HistoryStore, IdempotencyStore, Protocol):
    """All four store ports, as one backend adapter implements them (the wiring's type; a service names
    only the ports it uses)."""


#: A history record's whole key: job_id, scheduled_at, attempt, execution_id.
RecordKey = tuple[str, datetime, int, str]


@dataclass(frozen=True)
class IdempotencyClaim:
    """A (tenant, idempotency key) bound to the job the first request made, and the instant that request
    was taken at: a retry rebuilds the very same job (same id, same first fire) from it."""

    user_id: str
    key: str
    job_id: str
    fingerprint: str
    claimed_at: datetime


@dataclass(frozen=True)
class Outcome:
    """What a result (or a timeout) changes."""

    record: ExecutionRecord
    retry: ScheduledExecution | None


@dataclass(frozen=True)
class OutboundMessage:
    topic: str
    key: str
    value: dict[str, Any]
    headers: dict[str, str]
    #: The traceparent of the span this message's own ``traceparent`` header descends from (the job's),
    #: for a tracing publisher to link the two; never sent.
    parent_trace: str | None = None


class PublishError(Exception):
    """Some messages were not acknowledged; ``failed`` holds their indexes in the published batch, and
    ``rejected`` those of them the broker refused for good (a record it will never take: too large for
    its topic, not authorized, a topic the cluster does not have), as opposed to ones that timed out or
    were not sent."""

    def __init__(self, failed: Sequence[int], cause: str, rejected: Sequence[int] = ()) -> None:
        super().__init__(f"{len(failed)} message(s) not acknowledged: {cause}")
        self.failed = list(failed)
        self.rejected = sorted(set(rejected) & set(self.failed))


class Publisher(ABC):
    """The message bus (Kafka / MSK in production).

    Contract:
    - ``publish(messages, timeout_s)`` sends each message to its ``topic`` with its ``key``, its ``value`` (a JSON
      object: a consumer reads back an equal one) and its ``headers``; ``parent_trace`` is not sent.
    - It returns only when every message is acknowledged by the broker (acks=all). Otherwise it raises
      ``PublishError``: ``failed`` names the unacknowledged ones, which the caller must treat as not published
      (they may still have been written: at-least-once); every message it does not name was acknowledged.
      ``rejected`` names those of them refused for good (too large for their topic, not authorized, a topic the
      cluster does not have), which are not written; the others timed out or were not sent, and may go through
      when published again. A refusal may fail other messages of its call too (Kafka's idempotent producer
      fails the records after it), so a caller blames a message only once it is refused alone; it does not
      affect later calls. A broker that cannot be reached fails every message, none of them ``rejected``.
      Nothing else is raised for a failure of the bus.
    - Messages of one topic and key are delivered in the order they were published: in a call's order, and a
      call's after those of the calls that returned before it.
    - It returns or raises within about ``timeout_s`` (the publisher's own bound when None), also when it must
      first connect; and once it has, none of its messages is still queued or retried by the publisher: each
      was acknowledged or has definitively failed (a request already on the wire may still be applied, as for
      any at-least-once send). A scan relies on this to stop publishing before its lease can lapse.
    - ``close`` releases the connections, once what is in flight is settled; closing again is harmless, and a
      publish after it connects again.
    """

    @abstractmethod
    def publish(self, messages: Sequence[OutboundMessage], timeout_s: float | None = None) -> None: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections (flushes first)."""


@dataclass(frozen=True)
class SegmentState:
    segment: int
    watermark: datetime | None
    last_heartbeat: datetime | None = None
    last_owner: str | None = None
    published_total: int = 0
    #: Partitions set aside after failing again and again (``LeaseStore.park``), until done.
    parked: frozenset[datetime] = frozenset()


@dataclass(frozen=True)
class PartitionState:
    segment: int
    bucket: datetime
    owner: str | None
    lease_expires_at: datetime | None
    done: bool
    published: int = 0
    #: How many times a scan has leased this partition (each successful ``acquire``).
    attempts: int = 0
    #: The scan's progress through the PLANNED lane, as kept by its last renewal (opaque to the store).
    progress: str | None = None


#: The expiry of a lease given up (``LeaseStore.release``).
RELEASED = datetime(1970, 1, 1, tzinfo=UTC)


class LeaseStore(ABC):
    """Leases, heartbeats and watermarks of the scans (DynamoDB in production).

    Contract:
    - A lease is per (segment, bucket). ``acquire`` succeeds for at most one owner at a time: when
      there is no lease, the lease has expired, or the caller already owns it; never once the
      partition is done. Each success adds one to the partition's ``attempts`` (a refusal does not).
    - ``renew`` extends the caller's lease and returns False when the caller no longer owns it
      (the scan must then stop publishing). With ``progress``, it also keeps that string on the
      partition (``PartitionState.progress``) in the same conditional write, so only the lease owner
      ever moves it; ``acquire`` leaves it as it is.
    - ``mark_done`` marks the partition done, only for the lease owner (returns False otherwise).
    - ``release`` gives the caller's lease up without finishing (a scan with nothing to do ending
      early): the lease expires at ``RELEASED`` (the epoch, past for every clock), so the partition can
      be acquired again at once, the progress is kept as ``renew`` keeps
      it, and the lease no longer counts as an attempt (so ``attempts`` says how many scans held the
      partition and did not leave it cleanly). Returns False when the caller does not own it.
    - ``advance_watermark`` only ever moves a segment's watermark forward.
    - ``beat`` records a heartbeat and adds to the segment's counters.
    - ``park`` adds partitions to the segment's ``parked`` set and ``unpark`` removes them; both are
      idempotent and leave the rest of the segment's state alone (``unpark`` of a segment never seen
      creates nothing). The tick parks a partition that keeps failing before moving the watermark past
      it, and unparks it only once it is done, so a partition behind the watermark is done or parked.
    - ``record_segment_count`` records a segment count in use and returns the highest ever recorded:
      the record only moves up, so the segments of a larger, earlier count are still scanned.
    - Conditional refusals are answers (False), never errors. Backend failures (throttling, timeouts,
      an unreachable endpoint, any other service error) raise ``jobrunner.domain.errors.Unavailable``,
      from every method, so the caller may retry; a write that raised may or may not have happened.
    """

    @abstractmethod
    def acquire(self, segment: int, bucket: datetime, owner: str, now: datetime, ttl_s: float) -> bool: ...

    @abstractmethod
    def renew(
        self, segment: int, bucket: datetime, owner: str, now: datetime, ttl_s: float, progress: str | None = None
    ) -> bool: ...

    @abstractmethod
    def mark_done(self, segment: int, bucket: datetime, owner: str, now: datetime, published: int) -> bool: ...

    @abstractmethod
    def release(
        self, segment: int, bucket: datetime, owner: str, now: datetime, progress: str | None = None
    ) -> bool: ...

    @abstractmethod
    def segments(self, segments: Iterable[int]) -> list[SegmentState]:
        """States of the given segments, in segment order; ones never written are absent."""

    @abstractmethod
    def partitions(self, keys: Iterable[tuple[int, datetime]]) -> list[PartitionState]:
        """States of the given (segment, bucket) partitions; ones never leased are absent."""

    @abstractmethod
    def advance_watermark(self, segment: int, bucket: datetime) -> None: ...

    @abstractmethod
    def beat(self, segment: int, owner: str, now: datetime, published: int) -> None: ...

    @abstractmethod
    def park(self, segment: int, buckets: Iterable[datetime]) -> None: ...

    @abstractmethod
    def unpark(self, segment: int, buckets: Iterable[datetime]) -> None: ...

    @abstractmethod
    def record_segment_count(self, count: int) -> int: ...


#: The largest reconciler state a ``ReconcilerStateStore`` keeps (a DynamoDB item holds at most 400 KB).
MAX_RECONCILER_STATE = 300_000
#: The "segment" of the reconciler's items in the heartbeat table, which no segment has: its state, and the lease
#: (``LeaseStore.acquire`` of this segment and ``RECONCILER_LEASE``) that lets one run at a time.
RECONCILER_SEGMENT = -2
RECONCILER_LEASE = datetime(1970, 1, 1, 0, 1, tzinfo=UTC)


class ReconcilerStateStore(ABC):
    """Where the reconciler keeps its progress between invocations: where its walk of the jobs is, the window
    and horizon of its pass, what it watches (the heartbeat table in production, one item of its own).

    Contract:
    - ``load_reconciler_state`` returns the text ``save_reconciler_state`` last stored, or None before the first.
    - ``save_reconciler_state`` replaces it whole (one reconciler runs at a time: its function's concurrency is
      one); the text is opaque to the store, at most ``MAX_RECONCILER_STATE`` bytes (``ValueError`` beyond).
    - Backend failures raise ``jobrunner.domain.errors.Unavailable``; a save that raised may or may not have
      landed (the reconciler then resumes from the earlier state, which only repeats reads).
    """

    @abstractmethod
    def load_reconciler_state(self) -> str | None: ...

    @abstractmethod
    def save_reconciler_state(self, state: str) -> None: ...


class ChangeLog(ABC):
    """Each job's change log, an audit trail of the requests that changed it (Cassandra in production).

    Contract:
    - ``record`` stores an entry, ``record_many`` several; recording the same (job_id, changed_at,
      change_id) again overwrites it with the same values (a retried write is harmless). An entry expires
      after the retention its writer gives it (the tenant's history retention).
    - ``changes(job_id, limit, before)`` returns up to ``limit`` entries of the job, newest first; with
      ``before`` (an entry's (changed_at, change_id)), only those after it in that order (the next page).
    - Backend failures raise ``jobrunner.domain.errors.Unavailable``.
    """

    @abstractmethod
    def record(self, change: JobChange) -> None: ...

    @abstractmethod
    def record_many(self, changes: Sequence[JobChange]) -> None: ...

    @abstractmethod
    def changes(self, job_id: str, limit: int, before: tuple[datetime, str] | None = None) -> list[JobChange]: ...


class CalendarStore(ABC):
    """Each tenant's calendars (``domain.calendars``), by name (Cassandra / Keyspaces in production).

    Contract:
    - ``put`` stores a calendar, replacing the tenant's calendar of that name whole (the last write wins).
    - ``get(user_id, name)`` returns it, or None; a calendar is only ever found under its own tenant.
    - ``list(user_id, limit, after)`` returns up to ``limit`` of the tenant's calendars in name order, those
      after the name ``after`` when given (the next page).
    - ``delete`` removes it (removing one that is not there is no error).
    - Reads reflect every write that returned before them (LOCAL_QUORUM in production).
    - Backend failures raise ``jobrunner.domain.errors.Unavailable``.
    """

    @abstractmethod
    def put(self, calendar: Calendar) -> None: ...

    @abstractmethod
    def get(self, user_id: str, name: str) -> Calendar | None: ...

    @abstractmethod
    def list(self, user_id: str, limit: int, after: str | None = None) -> list[Calendar]: ...

    @abstractmethod
    def delete(self, user_id: str, name: str) -> None: ...


class TenantQuotas(ABC):
    """Counters of what each tenant was admitted to do, per fixed window (DynamoDB in production).

    Contract:
    - ``admit(tenant, window, limit, count=1)`` counts ``count`` admissions of ``tenant`` in ``window`` (any
      integer naming the window, e.g. an epoch second) and returns True when at most ``limit - count`` had
      been counted in that window; otherwise it counts nothing and returns False. However many callers
      race, no window ever admits more than ``limit`` (one conditional write per call).
    - Tenants and windows are independent; a window's counter may be forgotten once it has passed.
    - Backend failures raise ``jobrunner.domain.errors.Unavailable``; an admission that raised may or
      may not have been counted.
    - ``take(tenant, change, limits, now_minute)`` applies ``change`` (``domain.limits.QuotaChange``) to
      the tenant's standing counts as ``domain.limits.apply`` rules, atomically: it returns None when
      applied, or the name of the limit the change would pass, and then changes nothing. Racing takes
      of one tenant are applied one after the other, so together they never pass a limit either. A
      change that only gives back is never refused; its ``drop_minute`` is given back on a best-effort
      basis (a failure there leaves the minute counted too high, which can only refuse more).
    - ``give_back(tenant, change)`` undoes a ``change`` taken before (its write failed): unchecked.
    - With a ``key`` (a job's create, under its job id), ``take`` and ``give_back`` are idempotent: a take under
      a key already counted changes nothing and returns None; a give-back under a key not counted (never taken,
      or given back already) changes nothing, and one that gives back forgets the key, which a later take counts
      again. So a request that could not tell whether its write landed gives back, and a repeat of it that finds
      its job counts it again, once (#31). A key is remembered for a day, as an idempotency key.
    """

    @abstractmethod
    def admit(self, tenant: str, window: int, limit: int, count: int = 1) -> bool: ...

    @abstractmethod
    def take(self, tenant: str, change: QuotaChange, limits: Limits, now_minute: int,
             key: str | None = None) -> str | None: ...

    @abstractmethod
    def give_back(self, tenant: str, change: QuotaChange, key: str | None = None) -> None: ...


@dataclass(frozen=True)
class ScanRequest:
    segment: int
    bucket: datetime


class Invoker(ABC):
    """Starts a scan asynchronously (async Lambda invoke in production).

    Contract:
    - ``invoke_scan(request)`` returns once the request is durably accepted, without waiting for the scan: then a
      scan of the request's partition (its segment and bucket) runs, at least once. The scan function receives
      ``adapters.invokers.lambda_.scan_event(request)``.
    - A request may be delivered more than once, and one asked for twice starts twice (requests are never merged
      into one another); the scan's lease makes that harmless.
    - What the scan does, and how it fails, never reaches the caller.
    - A request that cannot be accepted (the function or its service cannot be reached, a throttled or refused
      invoke) raises ``jobrunner.domain.errors.Unavailable``: it may or may not have been accepted (the tick
      dispatches its partitions again the next minute).
    """

    @abstractmethod
    def invoke_scan(self, request: ScanRequest) -> None: ...
