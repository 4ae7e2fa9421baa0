"""Waking a partition's scan after writing into its late lane.

A scan with nothing left to do ends early (``ScanRules.idle_end``) instead of polling its late lane until
its minute closes, so whoever writes a LATE row (a run now, a change planning a near fire, a retry, a
scan planning into the next minute) asks for a scan of that partition once the write has returned. A
scan that is still running holds the lease and the new one leaves at once; a scan that ended idle has
released it and the new one takes the partition. If the request fails, nothing is lost: the partition is
not done, so the tick dispatches it again within a minute and that scan publishes the row, late.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import Lane
from jobrunner.ports import ScanRequest

if TYPE_CHECKING:
    from collections.abc import Iterable

    from jobrunner.domain.jobs import ScheduledExecution
    from jobrunner.ports import Invoker

log = logging.getLogger(__name__)


def wake(invoker: Invoker | None, rows: Iterable[ScheduledExecution]) -> int:
    """Request a scan of every partition one of ``rows`` was written to in its LATE lane; returns how many."""
    if invoker is None:
        return 0
    partitions = sorted({(row.segment, row.bucket) for row in rows if row.lane is Lane.LATE})
    for segment, bucket in partitions:
        try:
            invoker.invoke_scan(ScanRequest(segment=segment, bucket=bucket))
        except Unavailable as exc:  # the tick's next dispatch finds the row (up to a minute late)
            log.warning("could not wake the scan of %s/%s: %s", segment, bucket.isoformat(), exc)
    return len(partitions)
