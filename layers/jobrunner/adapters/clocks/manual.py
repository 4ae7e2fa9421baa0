"""A clock that moves only when told to (or when something sleeps on it): for tests, no real waiting."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from jobrunner.domain.time import utc
from jobrunner.ports import Clock

if TYPE_CHECKING:
    from datetime import datetime, timedelta


class ManualClock(Clock):
    """``sleep_until`` jumps the clock forward instead of waiting, so scans run instantly in tests."""

    def __init__(self, start: datetime) -> None:
        self._now = utc(start)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta) -> None:
        with self._lock:
            self._now = self._now + delta

    def set(self, instant: datetime) -> None:
        with self._lock:
            self._now = utc(instant)

    def sleep_until(self, instant: datetime) -> None:
        with self._lock:
            if instant > self._now:
                self._now = utc(instant)
