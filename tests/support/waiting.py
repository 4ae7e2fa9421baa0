"""The scheduled rows some scan will still read, in the in-memory stores."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobrunner.adapters.leases.memory import MemoryLeaseStore
    from jobrunner.adapters.stores.memory import MemoryJobStore
    from jobrunner.domain.jobs import ScheduledExecution


def waiting(store: MemoryJobStore, leases: MemoryLeaseStore) -> list[ScheduledExecution]:
    """Rows in partitions not marked done, in due order. A done PLANNED row is never deleted (it expires),
    but the partition that held it is done, so no scan reads it again."""
    rows = list(store.rows.values())
    done = {(p.segment, p.bucket) for p in leases.partitions((r.segment, r.bucket) for r in rows) if p.done}
    return sorted((r for r in rows if (r.segment, r.bucket) not in done), key=lambda r: (r.due_at, r.job_id))
