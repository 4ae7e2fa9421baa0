"""The reconciler's progress between runs (``ports.ReconcilerStateStore``), as JSON: the pass under way, where the last
one ended, the horizons of earlier runs, and what it watches."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from jobrunner.domain.orphans import Scanned
from jobrunner.domain.time import from_epoch_ms, to_epoch_ms

if TYPE_CHECKING:
    from jobrunner.domain.jobs import Job


@dataclass
class Pass:
    """A pass's window of due instants, (start, end], and where its walk of the jobs is."""

    start: datetime
    end: datetime
    cursor: str | None = None


@dataclass
class ReconcilerState:
    """The reconciler's progress, kept between runs (``ports.ReconcilerStateStore``), as JSON."""

    pass_: Pass | None = None
    #: Where the last pass's window ended: the next one starts there.
    examined_to: datetime | None = None
    #: The horizons read at the start of earlier runs, oldest first (``HORIZONS`` of them, ``HORIZON_SPACING`` apart).
    earlier: list[Scanned] = field(default_factory=list)
    #: Jobs to read again, "user_id|job_id" -> when.
    watch: dict[str, datetime] = field(default_factory=dict)
    sightings: dict[str, datetime] = field(default_factory=dict)
    #: Executions this reconciler re-planned, by id -> when.
    repaired: dict[str, datetime] = field(default_factory=dict)

    def dumps(self) -> str:
        def ms(values: dict[str, datetime]) -> dict[str, int]:
            return {key: to_epoch_ms(value) for key, value in values.items()}

        data: dict[str, Any] = {
            "v": 1, "examined_to": to_epoch_ms(self.examined_to) if self.examined_to else None,
            "earlier": [scanned.to_dict() for scanned in self.earlier],
            "watch": ms(self.watch), "sightings": ms(self.sightings), "repaired": ms(self.repaired),
            "pass": None if self.pass_ is None else {"start": to_epoch_ms(self.pass_.start),
                                                     "end": to_epoch_ms(self.pass_.end), "cursor": self.pass_.cursor},
        }
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def loads(cls, text: str | None) -> ReconcilerState:
        if not text:
            return cls()
        data = json.loads(text)

        def instants(values: dict[str, int] | None) -> dict[str, datetime]:
            return {key: from_epoch_ms(int(value)) for key, value in (values or {}).items()}

        raw = data.get("pass")
        window = None if raw is None else Pass(from_epoch_ms(raw["start"]), from_epoch_ms(raw["end"]), raw["cursor"])
        examined = data.get("examined_to")
        return cls(window, from_epoch_ms(examined) if examined is not None else None,
                   [Scanned.from_dict(scanned) for scanned in data.get("earlier") or ()],
                   instants(data.get("watch")), instants(data.get("sightings")), instants(data.get("repaired")))


#: Horizons kept from earlier runs, at least ``HORIZON_SPACING`` apart: an execution planned by a completion is decided
#: once the earliest of them that saw its partition done is behind the scans (about 8 to 16 minutes of them).
HORIZONS = 16
HORIZON_SPACING = timedelta(seconds=30)
#: A horizon with more parked partitions than this is kept without them, and unusable (its state would grow too big).
MAX_PARKED_KEPT = 200


def kept_horizons(earlier: list[Scanned], scanned: Scanned) -> list[Scanned]:
    """``earlier`` with this run's horizon after them (unless the last is less than ``HORIZON_SPACING`` older), the
    ``HORIZONS`` newest."""
    if len(scanned.parked) > MAX_PARKED_KEPT:
        scanned = Scanned(scanned.at, None)
    if earlier and scanned.at - earlier[-1].at < HORIZON_SPACING:
        return earlier
    return [*earlier, scanned][-HORIZONS:]


def watch_key(job: Job) -> str:
    return f"{job.user_id}|{job.job_id}"
