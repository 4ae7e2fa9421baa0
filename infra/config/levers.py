"""The cost levers (issue #33; docs/scaling.md, "Cost levers"): a stage sized for its rate, and the choices of what
it pays for at rest (point-in-time recovery, tracing, Keyspaces capacity).

What ``expected_executions_per_day`` makes of ``segments``, ``kafka_partitions`` and ``results_pollers`` when they
are ``"auto"`` is decided here. ``Sizing`` holds the options that sizing reads, checked once: ``DeploymentConfig``
inherits them, and ``from_context`` reads them first, since ``segments`` (a runtime setting) must be a number before
``Settings`` checks it.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, field_validator

from infra.config.types import a_whole, whole

#: A busy minute: all of a minute's executions due at its first second, published and answered within this.
BUSY_MINUTE_DRAIN_S = 15
#: Executions a second one scan publishes per vCPU (CPU-bound: ≈ 0.44 ms of CPU an execution, docs/benchmarks.md;
#: ≈ 640/s at 512 MB), and results one results invocation applies (one per Kafka partition; issue #33).
SCAN_EXECUTIONS_PER_VCPU_S = 2_270
RESULTS_PER_PARTITION_S = 667
#: Lambda's whole vCPU is 1,769 MB; capacity is sized this much above a busy minute's need.
FULL_VCPU_MB = 1769
SIZING_HEADROOM = 1.25
#: What "auto" gives a stage that does not say its rate (the values before issue #33), and the fewest
#: partitions a topic gets (the workers of a group consume in parallel up to one per partition).
UNSIZED_SEGMENTS = 16
UNSIZED_PARTITIONS = 3
MIN_PARTITIONS = 3
#: Segments one stack runs at most: its scan function reserves about two concurrent scans per segment.
MAX_SEGMENTS = 1024
#: Partitions of a topic the stack creates at most.
MAX_PARTITIONS = 200
#: The most executions a day a stage may say it expects.
MAX_EXECUTIONS_PER_DAY = 100_000_000_000
#: Tables whose rows nothing rebuilds: jobs and calendars (what users declared), the history (the only record of
#: each execution: what ran, its outcome, the RUNNING record the results and the watchdog read) and the change log
#: (the audit trail). Not task_schedule_v2, an index the reconciler rebuilds from jobs and history, nor
#: job_idempotency (a day's submit keys, stale by the time a restore lands).
PITR_TABLES = ("job_table_v2", "calendars", "task_history_v2", "job_changes")
#: ``xray_tracing``: every function traces actively; the busy ones only when their caller's trace is sampled; none.
XRAY_MODES = ("active", "sampled", "off")
KEYSPACES_CAPACITY = ("on-demand", "provisioned")


def busy_minute_rate(executions_per_day: float) -> float:
    """Executions a second a busy minute asks for: a minute's share of the day, due at once, out in 15 s."""
    return executions_per_day / 1440 / BUSY_MINUTE_DRAIN_S


def segments_for(executions_per_day: float, scan_memory_mb: int) -> int:
    """The fewest segments whose scans publish a busy minute (with headroom), as a power of two: a divisor or a
    multiple of the job table's 16 shards, so a scan reads each tenant's jobs of a page from as few shards as it can."""
    per_scan = min(scan_memory_mb / FULL_VCPU_MB, 1.0) * SCAN_EXECUTIONS_PER_VCPU_S
    needed = max(1, math.ceil(busy_minute_rate(executions_per_day) * SIZING_HEADROOM / per_scan))
    return 1 << (needed - 1).bit_length()


def partitions_for(executions_per_day: float) -> int:
    """Partitions for the results function (one invocation each) to apply a busy minute's results, with headroom."""
    needed = math.ceil(busy_minute_rate(executions_per_day) * SIZING_HEADROOM / RESULTS_PER_PARTITION_S)
    return max(MIN_PARTITIONS, needed)


def sized_segments(value: Any, executions_per_day: int | None, scan_memory_mb: int) -> Any:
    """``segments`` "auto" as a number: the fewest that publish a busy minute, 16 when the rate is unknown (a
    number given is left to ``Settings``, which checks it)."""
    if value != "auto":
        return value
    if executions_per_day is None:
        return UNSIZED_SEGMENTS
    return min(segments_for(executions_per_day, scan_memory_mb), MAX_SEGMENTS)


def sized_partitions(value: Any, executions_per_day: int | None) -> Any:
    """``kafka_partitions`` "auto" as a number: enough for a busy minute's results, 3 when the rate is unknown (a
    number given is left to the field's type)."""
    if value != "auto":
        return value
    return UNSIZED_PARTITIONS if executions_per_day is None else min(partitions_for(executions_per_day), MAX_PARTITIONS)


def one_poller_keeps_up(executions_per_day: int | None) -> bool:
    """One on-demand poller (one results invocation at a time) applies a busy minute's results in time."""
    return executions_per_day is not None and busy_minute_rate(executions_per_day) <= RESULTS_PER_PARTITION_S


class Sizing(BaseModel):
    """The options a stage's size is derived from; ``DeploymentConfig`` inherits them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Executions a day the stage is sized for; None: unknown (16 segments, 3 partitions, as before issue #33).
    expected_executions_per_day: int | None
    scan_memory_mb: Annotated[int, whole(128, 10_240)]

    @field_validator("expected_executions_per_day", mode="before")
    @classmethod
    def _expected(cls, value: Any) -> int | None:
        """null: unknown; else a whole number of executions a day."""
        return None if value is None else a_whole(value, 1, MAX_EXECUTIONS_PER_DAY)
