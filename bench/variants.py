"""Variants of the scan, built in the benchmark only (nothing in ``layers/`` changes), to put a measured
number next to each optimisation: the *before* of the ones the store adopted, the *what-if* of the rest.

Adopted (the baseline has it; this variant undoes it):
- ``driver-rows``: the driver's ``named_tuple_factory``, which builds a new ``namedtuple`` class for
  every result set (``adapters/stores/rows.py`` keeps one per column list);
- ``single-requests``: one CQL request per row, as the store sent them before 2026-11-26
  (``CassandraJobStore(batch_rows=1, in_keys=1)``): a job read per execution, a history write per execution,
  where the store now reads a tenant's jobs with one ``IN`` query and writes rows in unlogged batches.

What-if (not adopted; docs/benchmarks.md says why):
- ``prefetch``: the scan's job reads (``get_many``) done before the minute starts, as a scan that
  starts ~60 s early could do; the drain then only starts, publishes and completes;
- ``groups-2000``: ``ScanRules.group_size`` 2000 instead of 500, store concurrency 256 instead of 64;
- ``all``: ``prefetch`` and ``groups-2000`` together.

(The variants of the batch types, ``logged-start`` and ``unlogged``, were retired with the batches: the
execution path writes single rows only since 2026-11-24.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from jobrunner.domain.jobs import Job


@dataclass(frozen=True)
class Variant:
    name: str = "baseline"
    driver_rows: bool = False
    prefetch: bool = False
    group_size: int | None = None
    concurrency: int | None = None
    #: ``CassandraJobStore``'s ``batch_rows`` and ``in_keys`` (None: its defaults).
    single_requests: bool = False
    description: str = "the scan as `wiring.Container` builds it"

    def rules(self) -> dict[str, Any] | None:
        return {"group_size": self.group_size} if self.group_size else None


VARIANTS = {
    v.name: v for v in (
        Variant(),
        Variant("driver-rows", driver_rows=True,
                description="adopted change undone: the driver's row factory (a namedtuple class per result set)"),
        Variant("single-requests", single_requests=True,
                description="adopted change undone: one CQL request per row (no IN reads, no unlogged batches)"),
        Variant("prefetch", prefetch=True,
                description="what-if: job rows read before the minute starts (get_many ahead)"),
        Variant("groups-2000", group_size=2000, concurrency=256,
                description="what-if: groups of 2000 rows, store concurrency 256"),
        Variant("all", prefetch=True, group_size=2000, concurrency=256,
                description="what-if: prefetch and groups-2000 together"),
    )
}


def use_driver_rows(session: Any) -> None:
    from cassandra.cluster import EXEC_PROFILE_DEFAULT
    from cassandra.query import named_tuple_factory

    session.cluster.profile_manager.profiles[EXEC_PROFILE_DEFAULT].row_factory = named_tuple_factory


@dataclass
class PrefetchedJobs:
    """A store proxy whose ``get_many`` answers from jobs read before the clock started."""

    inner: Any
    jobs: dict[tuple[str, str], Job] = field(default_factory=dict)

    def prefetch(self, bucket: datetime, segment: int, chunk: int = 500) -> int:
        from jobrunner.domain.jobs import Lane

        keys = sorted({(r.user_id, r.job_id) for r in self.inner.lane_rows(bucket, segment, Lane.PLANNED)})
        for start in range(0, len(keys), chunk):
            self.jobs.update(self.inner.get_jobs(keys[start:start + chunk]))
        return len(keys)

    def get_jobs(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Job]:
        found = {key: self.jobs[key] for key in keys if key in self.jobs}
        missing = [key for key in keys if key not in self.jobs]
        if missing:
            found.update(self.inner.get_jobs(missing))
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
