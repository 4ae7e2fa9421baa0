"""An Invoker that runs each scan in its own process (the fault suite kills them with SIGKILL).

A process takes seconds to start on a busy machine (a Lambda invoke, milliseconds), and a writer wakes a
partition's scan until that scan holds its lease (``services.wake``): a burst of late writes into one
partition would start a process for each. With ``one_per_partition``, a scan is not started while a
process of the same partition still runs: that process takes the lease (or finds it held by one that
reads the row), and if it has ended meanwhile, the tick dispatches the partition again within a minute.
That departs from the ``Invoker`` contract (two requests start two scans), knowingly: the contract tests run
this invoker without it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from jobrunner.adapters.invokers.lambda_ import scan_event
from jobrunner.ports import Invoker, ScanRequest

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class ScanProcess:
    request: ScanRequest
    process: subprocess.Popen[bytes]


class ProcessInvoker(Invoker):
    def __init__(self, env: dict[str, str], log_path: Path, *, one_per_partition: bool = False) -> None:
        self._env = env
        self._log_path = log_path
        self._one_per_partition = one_per_partition
        self._lock = threading.Lock()
        self.started: list[ScanProcess] = []
        #: Requests not started because a process of the same partition was running.
        self.skipped = 0

    def invoke_scan(self, request: ScanRequest) -> None:
        with self._lock:
            if self._one_per_partition and any(p.request == request and p.process.poll() is None
                                               for p in self.started):
                self.skipped += 1
                return
            self._log_path.parent.mkdir(parents=True, exist_ok=True)
            with self._log_path.open("ab") as log:
                process = subprocess.Popen(
                    [sys.executable, "-m", "devstack.scan_process", json.dumps(scan_event(request))],
                    cwd=ROOT, env=self._env, stdout=log, stderr=subprocess.STDOUT,
                )
            self.started.append(ScanProcess(request, process))

    def running(self) -> list[ScanProcess]:
        with self._lock:
            return [p for p in self.started if p.process.poll() is None]

    def stop_all(self) -> None:
        for scan in self.running():
            scan.process.kill()
        for scan in self.started:
            scan.process.wait()
