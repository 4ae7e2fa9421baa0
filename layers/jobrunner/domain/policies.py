"""The policies a recurring job's fires follow, as values: its catch-up window and its overlap policy, the
reasons a fire is skipped, and their bounds. What they decide for one fire is ``domain.policy_decisions``.

Both are properties of a job (``JobSpec.catch_up``, ``JobSpec.overlap``), applied by the scan to fires of the
schedule's lineage (``Trigger.SCHEDULE``); run-now, backfill and retry executions are requests, not fires,
and are never dropped by either (nor by the job's calendar, ``JobSpec.calendar``, ``domain.calendars``). A fire
a policy does not run is not silent: the scan writes it a history record with status ``SKIPPED`` whose
``error`` names the policy and the reason (``policy_decisions.skip_note``, read back by ``skip_reason_of``), so
the job's history and its firing ledger show it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from jobrunner.domain.errors import InvalidField


class SkipReason(StrEnum):
    """Why a fire of the schedule was not run (the prefix of its SKIPPED record's ``error``)."""

    #: Missed (its due instant more than ``MISFIRE_GRACE`` behind) and outside the job's catch-up window.
    CATCH_UP = "catch_up"
    #: Its job's previous execution had not reported yet, and the overlap policy says skip.
    OVERLAP = "overlap"
    #: A date its job's calendar excludes (``domain.calendars``).
    CALENDAR = "calendar"


#: A fire due less than this long ago is on time, whatever the catch-up window: only a fire left behind
#: by an outage (missed ticks, a scan that died, a pause resumed with catch-up) counts as missed.
MISFIRE_GRACE = timedelta(seconds=10)

#: The most missed fires a catch-up policy may keep (``CatchUp.most``), and its widest window.
MAX_CATCH_UP_FIRES = 1000
MAX_CATCH_UP_WINDOW_S = 366 * 24 * 3600


@dataclass(frozen=True)
class CatchUp:
    """Which missed fires of a recurring job are replayed (the misfire policy).

    A fire is missed when the scan reaches it more than ``MISFIRE_GRACE`` after its due instant. Of the
    missed fires, only those scheduled within ``window_s`` before the moment the scan reaches them are
    run (None: any age), and of those, only the latest ``most`` (None: all). So ``CatchUp()`` replays
    every missed fire (the default), ``CatchUp(most=1)`` only the latest, and ``CatchUp(window_s=3600)``
    those of the last hour. The fires left out are recorded SKIPPED (``SkipReason.CATCH_UP``)."""

    window_s: int | None = None
    most: int | None = None

    @property
    def replays_all(self) -> bool:
        return self.window_s is None and self.most is None

    def to_dict(self) -> dict[str, int]:
        out: dict[str, int] = {}
        if self.window_s is not None:
            out["window_s"] = self.window_s
        if self.most is not None:
            out["most"] = self.most
        return out

    @classmethod
    def from_dict(cls, data: dict[str, object] | None) -> CatchUp:
        if not data:
            return cls()
        window, most = data.get("window_s"), data.get("most")
        return cls(window_s=int(window) if window is not None else None,  # type: ignore[call-overload]
                   most=int(most) if most is not None else None)  # type: ignore[call-overload]


class Overlap(StrEnum):
    """What a fire does when the job's previous execution has not reported yet (Temporal's names)."""

    #: Run it anyway (the default): executions of one job may overlap.
    ALLOW_ALL = "allow_all"
    #: Do not run it: it is recorded SKIPPED (``SkipReason.OVERLAP``) and the schedule goes on.
    SKIP = "skip"
    #: Hold it until the previous execution reports, then run it; fires due while one is held are skipped.
    BUFFER_ONE = "buffer_one"
    #: Hold every fire until the one before it has reported, then run them one after another.
    BUFFER_ALL = "buffer_all"
    #: Ask the workers to cancel the previous execution (a cancel message), and run this one.
    CANCEL_OTHER = "cancel_other"



def check_catch_up(policy: CatchUp) -> CatchUp:
    """A catch-up policy as a request gives it, its fields within bounds (422 naming the field otherwise)."""
    if policy.window_s is not None and not 1 <= policy.window_s <= MAX_CATCH_UP_WINDOW_S:
        raise InvalidField("catch_up.window_s", f"must be between 1 and {MAX_CATCH_UP_WINDOW_S} seconds")
    if policy.most is not None and not 1 <= policy.most <= MAX_CATCH_UP_FIRES:
        raise InvalidField("catch_up.most", f"must be between 1 and {MAX_CATCH_UP_FIRES} fires")
    return policy
