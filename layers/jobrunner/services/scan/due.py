"""The rows a scan has to publish, handed out fairly between tenants (``DueRows``)."""

from __future__ import annotations

import heapq
import itertools
import logging
from collections import OrderedDict, deque
from typing import TYPE_CHECKING

from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import Lane, LanePosition, ScheduledExecution
from jobrunner.domain.publication import row_identity

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from datetime import datetime, timedelta

log = logging.getLogger(__name__)


class DueRows:
    """Rows waiting to be published (the planned stream merged with late polls and the rows the scan
    writes into its own partition), handed out fairly between tenants.

    **Fairness.** Rows that are due are moved, in order of due instant, into a window of at most
    ``window`` rows, one queue per tenant; ``take`` hands them out round-robin between the tenants in
    the window, each tenant's rows in order of due instant. So at the top of a minute one tenant's
    thousands of fires delay another tenant's few by at most one round (one row of each tenant present),
    not by the whole burst, which they did when rows came out in the partition's order (by job id
    within a second). Only a backlog larger than the window (per partition) makes a later tenant wait
    for the window to drain below it.

    The planned stream is read lazily, from ``start`` (the position a scan before this one settled the
    lane up to) on; when a read of it fails, it is reopened after the last row it yielded, once
    ``retry_at`` has come. Every planned row taken from the stream, and every row the scan writes into
    its own planned lane (``add_own``), is tracked until it is settled (``settle``); ``progress()`` is
    the position up to which every planned row is settled and none is still unread: the point a later
    scan resumes from."""

    def __init__(
        self, open_planned: Callable[[LanePosition | None], Iterator[ScheduledExecution]],
        start: LanePosition | None = None, window: int = 5_000,
    ) -> None:
        self._open = open_planned
        #: Due rows not taken yet, a queue per tenant, in the order the tenants take turns.
        self._window: OrderedDict[str, deque[ScheduledExecution]] = OrderedDict()
        self._window_rows = 0
        self._window_cap = max(1, window)
        self._planned: Iterator[ScheduledExecution] | None = None
        self._last_read: LanePosition | None = start
        #: Planned rows taken or written and not yet settled (a heap, with stale entries skipped lazily),
        #: and the settled positions not yet passed by the progress.
        self._unsettled: dict[tuple[object, ...], LanePosition] = {}
        self._unsettled_heap: list[tuple[LanePosition, tuple[object, ...]]] = []
        self._settled: list[LanePosition] = []
        self._progress: LanePosition | None = start
        #: Rows this scan wrote into its own planned lane: already in the heap, skipped if the stream yields them.
        self._own: set[tuple[object, ...]] = set()
        self._heap: list[tuple[datetime, int, ScheduledExecution]] = []
        self._order = itertools.count()
        self._head: ScheduledExecution | None = None
        #: When the broken planned stream is to be reopened (None: not broken).
        self.retry_at: datetime | None = None

    def open(self, now: datetime, backoff: timedelta) -> None:
        self._planned = self._open(self._last_read)
        self.retry_at = None
        self._advance_head(now, backoff)

    def _advance_head(self, now: datetime, backoff: timedelta) -> None:
        assert self._planned is not None
        while True:
            try:
                self._head = next(self._planned, None)
            except Unavailable as exc:
                log.warning("planned lane read failed, resuming in %s: %s", backoff, exc)
                self._head, self.retry_at = None, now + backoff
                return
            if self._head is None:
                return
            self._last_read = LanePosition.of(self._head)
            if row_identity(self._head) not in self._own:  # a row of our own is in the heap already
                return

    def add(self, row: ScheduledExecution, not_before: datetime | None = None) -> None:
        heapq.heappush(self._heap, (max(row.due_at, not_before or row.due_at), next(self._order), row))

    def add_own(self, row: ScheduledExecution) -> None:
        """A row this scan wrote into its own PLANNED lane: published from memory, tracked until settled."""
        identity = row_identity(row)
        if identity in self._own:
            return
        self._own.add(identity)
        self._track(row)
        self.add(row)

    def _track(self, row: ScheduledExecution) -> None:
        identity, position = row_identity(row), LanePosition.of(row)
        if identity not in self._unsettled:
            self._unsettled[identity] = position
            heapq.heappush(self._unsettled_heap, (position, identity))

    def next_at(self) -> datetime | None:
        candidates = [t for t in (self._head.due_at if self._head else None,
                                  self._heap[0][0] if self._heap else None, self.retry_at) if t is not None]
        if self._window:
            candidates.append(min(queue[0].due_at for queue in self._window.values()))
        return min(candidates) if candidates else None

    def take(self, now: datetime, limit: int, backoff: timedelta) -> list[ScheduledExecution]:
        """Up to ``limit`` due rows, round-robin between tenants (see the class's docstring)."""
        out: list[ScheduledExecution] = []
        while len(out) < limit:
            self._fill(now, backoff)
            if not self._window:
                break
            tenant, queue = next(iter(self._window.items()))
            out.append(queue.popleft())
            self._window_rows -= 1
            if queue:
                self._window.move_to_end(tenant)
            else:
                del self._window[tenant]
        return out

    def _fill(self, now: datetime, backoff: timedelta) -> None:
        """Move due rows into the window, earliest first, until it is full or nothing else is due."""
        while self._window_rows < self._window_cap:
            if self._heap and self._heap[0][0] <= now and (
                self._head is None or self._heap[0][0] <= self._head.due_at
            ):
                row = heapq.heappop(self._heap)[2]
            elif self._head is not None and self._head.due_at <= now:
                row = self._head
                self._track(row)
                self._advance_head(now, backoff)
            else:
                return
            queue = self._window.get(row.user_id)
            if queue is None:
                queue = self._window[row.user_id] = deque()
            queue.append(row)
            self._window_rows += 1

    def empty(self) -> bool:
        return self._head is None and not self._heap and not self._window and self.retry_at is None

    def settle(self, rows: Iterable[ScheduledExecution]) -> None:
        """Rows dealt with for good (completed, or dropped as stale)."""
        for row in rows:
            position = self._unsettled.pop(row_identity(row), None) if row.lane is Lane.PLANNED else None
            if position is not None:
                heapq.heappush(self._settled, position)

    def progress(self) -> LanePosition | None:
        """The position up to which every planned row is settled: past no unsettled row, and past no row
        the stream has not yielded yet (the head, or everything after the last row read while it is broken)."""
        while self._unsettled_heap and self._unsettled.get(self._unsettled_heap[0][1]) != self._unsettled_heap[0][0]:
            heapq.heappop(self._unsettled_heap)  # settled since it was pushed
        while self._settled:
            top = self._settled[0]
            if self._unsettled_heap and top >= self._unsettled_heap[0][0]:
                break
            if self._head is not None and top >= LanePosition.of(self._head):
                break
            if self.retry_at is not None and self._last_read is not None and top > self._last_read:
                break
            heapq.heappop(self._settled)
            self._progress = top if self._progress is None else max(self._progress, top)
        return self._progress
