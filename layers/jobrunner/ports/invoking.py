"""The invoker port: starting a scan asynchronously."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime


@dataclass(frozen=True)
class ScanRequest:
    segment: int
    bucket: datetime


class Invoker(ABC):
    """Starts a scan asynchronously (async Lambda invoke in production).

    Contract:
    - ``invoke_scan(request)`` returns once the request is durably accepted, without waiting for the scan: then a
      scan of the request's partition (its segment and bucket) runs, at least once. The scan function receives
      ``adapters.invokers.lambda_.scan_event(request)``.
    - A request may be delivered more than once, and one asked for twice starts twice (requests are never merged
      into one another); the scan's lease makes that harmless.
    - What the scan does, and how it fails, never reaches the caller.
    - A request that cannot be accepted (the function or its service cannot be reached, a throttled or refused
      invoke) raises ``jobrunner.domain.errors.Unavailable``: it may or may not have been accepted (the tick
      dispatches its partitions again the next minute).
    """

    @abstractmethod
    def invoke_scan(self, request: ScanRequest) -> None: ...
