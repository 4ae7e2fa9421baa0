"""Stopping the local stack's scans as a Lambda would be cut off: a clock whose sleep raises once told to stop."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from jobrunner.adapters.clocks.system import SystemClock

if TYPE_CHECKING:
    import threading


class Stopping(Exception):
    """Raised inside running scans when the local stack stops (like a Lambda cut off mid-scan)."""


class StoppableClock(SystemClock):
    """The wall clock, except that sleeping raises ``Stopping`` once the stack is stopping."""

    def __init__(self, stop: threading.Event) -> None:
        self._stop = stop

    def sleep_until(self, instant: datetime) -> None:
        delay = (instant - datetime.now(UTC)).total_seconds()
        if self._stop.wait(max(0.0, delay)) or self._stop.is_set():
            raise Stopping
