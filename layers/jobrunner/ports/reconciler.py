"""The reconciler's state port: its progress between invocations."""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import UTC, datetime

#: The largest reconciler state a ``ReconcilerStateStore`` keeps (a DynamoDB item holds at most 400 KB).
MAX_RECONCILER_STATE = 300_000
#: The "segment" of the reconciler's items in the heartbeat table, which no segment has: its state, and the lease
#: (``LeaseStore.acquire`` of this segment and ``RECONCILER_LEASE``) that lets one run at a time.
RECONCILER_SEGMENT = -2
RECONCILER_LEASE = datetime(1970, 1, 1, 0, 1, tzinfo=UTC)


class ReconcilerStateStore(ABC):
    """Where the reconciler keeps its progress between invocations: where its walk of the jobs is, the window
    and horizon of its pass, what it watches (the heartbeat table in production, one item of its own).

    Contract:
    - ``load_reconciler_state`` returns the text ``save_reconciler_state`` last stored, or None before the first.
    - ``save_reconciler_state`` replaces it whole (one reconciler runs at a time: its function's concurrency is
      one); the text is opaque to the store, at most ``MAX_RECONCILER_STATE`` bytes (``ValueError`` beyond).
    - Backend failures raise ``jobrunner.domain.errors.Unavailable``; a save that raised may or may not have
      landed (the reconciler then resumes from the earlier state, which only repeats reads).
    """

    @abstractmethod
    def load_reconciler_state(self) -> str | None: ...

    @abstractmethod
    def save_reconciler_state(self, state: str) -> None: ...
