"""``at``: one fire at an instant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from jobrunner.domain.time import rfc3339

if TYPE_CHECKING:
    from datetime import datetime


@dataclass(frozen=True)
class At:
    at: datetime
    kind: ClassVar[str] = "at"

    @property
    def recurring(self) -> bool:
        return False

    def first_fire(self, now: datetime) -> datetime | None:
        return self.at

    def next_fire_after(self, instant: datetime) -> datetime | None:
        return self.at if self.at > instant else None

    def to_dict(self) -> dict[str, Any]:
        return {"at": rfc3339(self.at)}
