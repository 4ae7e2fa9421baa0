"""The reconciler: the safety net that walks the jobs and re-plans every execution it finds lost.

The job row is the truth and the scheduled rows (``task_schedule_v2``) an index of it: a row that is lost (never
written, written where no scan reads it, removed by mistake) loses its execution, and a recurring job's every later
fire with it. The reconciler finds such orphans (``domain.orphans``: a missed fire, a missed retry, a hold nothing
will release) and re-plans each under its own ``execution_id``, placed as of now, as any writer would (so a consumer
deduplicates a copy). In a healthy system it repairs nothing: each repair is logged with its job, fire and reason,
written to the job's change log (action ``repair``; the firing ledger shows the fire ``repaired``), and counted
(``Reconciled``, alarmed): a bug report.

One run (``run``, every ``ReconcileRules.interval``, in a function and with a concurrency of its own):
1. Reads the segments' watermarks (``domain.orphans.Scanned``): the horizon. The pass's window ends where every
   partition is done (and ``grace`` before now), and starts where the last pass ended.
2. Reads the PLANNED lane of every done partition of the window (pages, ``stale_ok``): the rows that were there.
3. Walks the jobs (``JobStore.walk_jobs``: pages at ``LOCAL_ONE``, at most ``rate`` rows a second, until the run's
   deadline; the cursor is kept for the next run). For each job, its schedule says without a read whether a fire
   fell due in the window (``domain.orphans.last_fire_due``); only when that fire's row was not among those read, or
   the job has retries or a buffer policy, is its newest history read (one page, ``stale_ok``) and examined.
4. Reads again, then examines, the jobs it watches: those with an execution in flight, or an execution it could not
   yet tell lost from late (the evidence it needs comes with a later run).
5. Before it writes, reads each orphan's job and record again (``LOCAL_QUORUM``): a job changed meanwhile, or a
   record that has appeared, means there is nothing to repair.
Its state (the pass's window and cursor, the previous run's horizon, what it watches) is one item of the heartbeat
table (``ports.ReconcilerStateStore``), so a stateless function resumes where the last run stopped.
"""

from jobrunner.services.reconcile.rules import ReconcileReport, ReconcileRules, ReconcileStores
from jobrunner.services.reconcile.service import ACTOR, LEASE_MARGIN, MAX_PLACEMENTS, ReconcileService

__all__ = ["ACTOR", "LEASE_MARGIN", "MAX_PLACEMENTS", "ReconcileReport", "ReconcileRules", "ReconcileService",
           "ReconcileStores"]
