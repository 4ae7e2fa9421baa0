"""The clock port: time, injected."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime


class Clock(ABC):
    """Time, injected so that tests never sleep on the wall clock."""

    @abstractmethod
    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""

    @abstractmethod
    def sleep_until(self, instant: datetime) -> None:
        """Block until ``now() >= instant`` (returns at once if it already is)."""
