"""An Invoker that runs each scan in its own process (the fault suite kills them with SIGKILL)."""

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
    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self._env = env
        self._log_path = log_path
        self._lock = threading.Lock()
        self.started: list[ScanProcess] = []

    def invoke_scan(self, request: ScanRequest) -> None:
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with self._log_path.open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "devstack.scan_process", json.dumps(scan_event(request))],
                cwd=ROOT, env=self._env, stdout=log, stderr=subprocess.STDOUT,
            )
        with self._lock:
            self.started.append(ScanProcess(request, process))

    def running(self) -> list[ScanProcess]:
        with self._lock:
            return [p for p in self.started if p.process.poll() is None]

    def stop_all(self) -> None:
        for scan in self.running():
            scan.process.kill()
        for scan in self.started:
            scan.process.wait()
