"""Waking a partition's scan after writing into its late lane.

A scan with nothing left to do ends early (``ScanRules.idle_end``) instead of polling its late lane until
its minute closes, so whoever writes a LATE row (a run now, a change planning a near fire, a retry, a
scan planning into the next minute) makes sure, once the write has returned, that a scan of that
partition will read it:
- a partition a scan holds (a live lease) needs nothing: that scan reads the row in its polls, or, if it
  gives its lease up after the write landed, in the look at its late lane it takes after the release;
- a done partition needs nothing either: a write that returned in time for it (``domain.placement``) was
  read by its last poll, and one that did not is placed again, in a later partition, by its writer;
- any other (never leased yet, given up idle, or whose scan died) gets a scan requested.
The lease is read after the write (a consistent read), so no release can fall between the two unnoticed.
If the read fails, the scan is requested anyway; if the request fails, nothing is lost: the partition is
not done, so the tick dispatches it again within a minute and that scan publishes the row, late.

``ScanWaker`` wakes them; ``NoWaker`` stands where scans are not woken (``JOBRUNNER_WAKE_SCANS`` unset, no invoker).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import Lane
from jobrunner.ports import ScanRequest

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime

    from jobrunner.domain.jobs import ScheduledExecution
    from jobrunner.ports import Clock, Invoker, LeaseStore, PartitionState


log = logging.getLogger(__name__)


class Waker(ABC):
    """What a writer of LATE rows wakes their partitions' scans with.

    Contract:
    - ``wake(rows)`` requests a scan of each partition that one of ``rows`` was written to in its LATE lane and
      that needs one (see the module), and returns how many it requested. Never raises: a wake that fails
      only leaves the row to the tick's next dispatch.
    - ``wakes`` is whether it wakes anything: where it does not, no scan may end before its minute closes
      (``ScanRules.idle_end``), since none would be woken for a row written after it ended.
    """

    @property
    @abstractmethod
    def wakes(self) -> bool: ...

    @abstractmethod
    def wake(self, rows: Iterable[ScheduledExecution]) -> int: ...


class NoWaker(Waker):
    """Scans are not woken: a LATE row waits for the scan polling its lane, or the tick's next dispatch."""

    @property
    def wakes(self) -> bool:
        return False

    def wake(self, rows: Iterable[ScheduledExecution]) -> int:
        return 0


class ScanWaker(Waker):
    """Wakes them through the invoker, after reading their leases."""

    def __init__(self, invoker: Invoker, leases: LeaseStore, clock: Clock) -> None:
        self._invoker = invoker
        self._leases = leases
        self._clock = clock

    @property
    def wakes(self) -> bool:
        return True

    def wake(self, rows: Iterable[ScheduledExecution]) -> int:
        """Request a scan of every partition one of ``rows`` was written to in its LATE lane that no scan
        holds and that is not done; returns how many were requested."""
        partitions = sorted({(row.segment, row.bucket) for row in rows if row.lane is Lane.LATE})
        if not partitions:
            return 0
        try:
            states = {(s.segment, s.bucket): s for s in self._leases.partitions(partitions)}
        except Unavailable as exc:  # unknown: request them all (a held one's new scan leaves at once)
            log.warning("could not read the leases of %d partitions: %s", len(partitions), exc)
            states = {}
        now = self._clock.now()
        woken = 0
        for segment, bucket in partitions:
            state = states.get((segment, bucket))
            if state is not None and (state.done or _held(state, now)):
                continue
            try:
                self._invoker.invoke_scan(ScanRequest(segment=segment, bucket=bucket))
                woken += 1
            except Unavailable as exc:  # the tick's next dispatch finds the row (up to a minute late)
                log.warning("could not wake the scan of %s/%s: %s", segment, bucket.isoformat(), exc)
        return woken


def _held(state: PartitionState, now: datetime) -> bool:
    """A live lease (a lease given up has expired at the epoch, whatever the reader's clock says)."""
    return state.owner is not None and state.lease_expires_at is not None and state.lease_expires_at > now
