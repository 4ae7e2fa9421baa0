"""The wall clock."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from jobrunner.domain.time import utc
from jobrunner.ports import Clock


class SystemClock(Clock):
    def now(self) -> datetime:
        return utc(datetime.now(UTC))

    def sleep_until(self, instant: datetime) -> None:
        delay = (instant - datetime.now(UTC)).total_seconds()
        if delay > 0:
            time.sleep(delay)
