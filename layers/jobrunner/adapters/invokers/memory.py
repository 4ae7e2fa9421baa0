"""An Invoker that only records requests; tests run the scans themselves."""

from __future__ import annotations

from jobrunner.ports import Invoker, ScanRequest


class RecordingInvoker(Invoker):
    def __init__(self) -> None:
        self.requests: list[ScanRequest] = []

    def invoke_scan(self, request: ScanRequest) -> None:
        self.requests.append(request)
