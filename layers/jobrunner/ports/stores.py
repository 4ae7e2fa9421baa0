"""The store ports: the jobs, the scheduled rows, the executions' history, the idempotency keys."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from jobrunner.domain.jobs import ExecutionRecord, Job, Lane, LanePosition, ScheduledExecution


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
    - Expiry (where the stage lets one-time jobs' rows expire, the default): every write of a one-time job's row
      (``create_job``, ``create_jobs``, ``update_job``) sets the instant it expires, ``domain.expiry.row_expires_at``
      of the job as written (none for a paused one), with no write of its own. Until that instant the job reads
      whole; from it, it is gone as if it had never been: no read, list or walk returns it, and a compare-and-set
      on it fails (it resurrects nothing). A recurring job never expires this way.
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
    def update_job(self, job: Job, rows: Sequence[ScheduledExecution], expected_version: int, *,
                   was_one_time: bool = False) -> bool:
        """Write ``rows`` (planned under ``job.schedule_version``), then overwrite the job's user-controlled
        fields only if the stored job is still at ``expected_version`` (a compare-and-set, linearizable).
        A change of schedule or state (``job.schedule_version == job.version``) writes them all (state,
        version, schedule_version, schedule, payload, topic, retry, timeout, paused_at, updated_at,
        next_run_at), and its next run stands until a scan completes a fire planned under it; that next run is
        also read back as the first fire of the schedule version (``Job.schedule_from``, None when the store
        cannot know it). Any other change writes only version, payload, topic, retry, timeout and updated_at:
        the job's next run and the first fire of its version stay as the store holds them, even if a scan's
        completion lands between the read and this write. Neither writes what its submit set: ``created_at`` and
        ``created_by`` stay as created.
        Returns False when it is not: the job is unchanged, and the rows stay where they are. They are never
        removed: the winner of the race took the same version number and may have planned the very same rows
        (two resumes of one fire), so removing them could remove the winner's; a row the job does not want is
        dropped by its scan (``services.scan``: the version, the state and the schedule decide). If it raises,
        the compare-and-set may land later (an accepted Paxos round committed by the next one on the
        partition): ``get_job_settled`` settles it.
        A one-time job's row (or, with ``was_one_time``, a job's that was one-time before this change: a PATCH
        of its schedule to a recurring one) is written whole, each column with its new instant (Expiry, above):
        ``job`` must then be the job as read with its changes (its ``created_at``, ``created_by`` and
        ``trace_parent`` are written again, as read), and the next run a change of anything else writes is the
        one the row holds (``job.schedule_from``)."""

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
