"""The segment scan: publish every execution of one (minute, segment) partition at its due instant.

One scan owns one partition through a lease. It streams the PLANNED lane in due order, polls the
LATE lane about every second (rows written by others after the scan may have started: each poll reads
the next window of due time, so each row once, ``domain.placement``), keeps in memory
the rows it writes into its own partition (the next fires of short-period jobs, watchdogs: written to
its PLANNED lane, which no poll reads, and read from there only by a scan taking over), and for each group of
due rows: reads their jobs, drops rows that are stale (cancelled job, or a fire re-planned under a
newer job version), publishes the rest, having first recorded each one as RUNNING (so that no worker
result can arrive for an execution the store does not know), then plans the next run. A done PLANNED
row is not deleted (it expires): the scan's progress through that lane (the position up to which every
row is settled) is kept in its lease item at each renewal, and a scan that takes the partition over
resumes from there.

Failure handling, in order of the steps:
- a read fails (the planned stream, a late poll, the jobs): retried with backoff within the scan; a
  broken planned stream resumes after the last row it yielded;
- publish fails: the rows stay in the partition and are retried with backoff within the scan; a row
  the broker refused ``max_publish_attempts`` times (a record too large for its topic, a permission
  lost), or whose topic is no longer allowed, is dead-lettered with its reason and recorded FAILED,
  so one bad row never holds its partition (and its segment's watermark) back. A row that only ever
  times out (a topic the broker does not know) is retried until the scan's budget ends; its
  partition is then parked by the tick, which raises the ParkedPartitions alarm;
- a row planned under a job version the job has not reached yet belongs to a change whose
  compare-and-set has not landed (a change writes its rows first): it waits up to ``change_grace``
  for it, and only then counts as the row of a change that lost its race (its writer removes it too);
- the history/next-run write fails: retried without publishing again, the next run placed anew at
  each attempt (a retried write must never land in a partition whose scan has finished);
- the lease: renewed before every publish so that it outlasts the publish's own bound; a scan that
  cannot renew stops publishing before its lease can lapse, so no second scan publishes beside it;
- anything left at the end of the scan's budget: the partition is not marked done, so its lease
  expires and the tick dispatches it again. Rows already published but not completed are then
  published again with the same ``execution_id`` (the one duplicate a crash can cause), except an
  execution whose result already came back, which is only completed: a scan of a partition leased
  before (its lease item counts the attempts) reads each row's history record before publishing it.
  It reads the PLANNED lane from the progress the last renewal kept, so the rows it sees again are
  those settled since then (about ``progress_every`` of them) and those never settled.

The history record written before the publish also carries what the job's run fields are derived from
(the schedule version and the next fire, ``domain.jobs.with_runs``): an execution writes nothing to the
job's row, so one tenant's jobs share no partition that every execution writes.

The package, layered bottom-up (each module imports only those above it in this list):
- ``rules``: what a scan is told, what it reports, the store ports it uses;
- ``due``: the rows due, handed out fairly between tenants, and the progress through the planned lane;
- ``lease``: the lease, renewed to outlast each publish, keeping the progress;
- ``late``: the polls of the late lane, each reading the next window of due time;
- ``history``: the reads of a job's history that its fires' policies need;
- ``state``: one scan's state in named parts (pending completions, publish failures, ``retry_later``);
- ``completions``: the completion writes, and where the rows a scan writes are placed;
- ``fire_gate``: the calendar, catch-up window and overlap policy of each fire;
- ``publishing``: triage, the write-ahead record, the send, the dead letter, the watchdogs;
- ``loop``: ``ScanService``, the loop of one scan from its lease to its end.
"""

from __future__ import annotations

from jobrunner.services.scan.loop import ScanService
from jobrunner.services.scan.rules import ScanReport, ScanRules, ScanStores

__all__ = ["ScanReport", "ScanRules", "ScanService", "ScanStores"]
