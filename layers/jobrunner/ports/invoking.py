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

    Contract: ``invoke_scan`` returns once the request is durably accepted; it does not wait for the
    scan. A request may be delivered more than once; the scan's lease makes that harmless.
    """

    @abstractmethod
    def invoke_scan(self, request: ScanRequest) -> None: ...
