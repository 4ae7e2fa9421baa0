"""Scans in processes of their own: at most one running process per partition when asked."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from devstack import process_invoker
from devstack.process_invoker import ProcessInvoker
from jobrunner.ports import ScanRequest

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

MINUTE = datetime(2026, 11, 26, 12, 10, tzinfo=UTC)


class FakeProcess:
    started: list[FakeProcess] = []

    def __init__(self, command: list[str], **_: Any) -> None:
        self.command = command
        self.returncode: int | None = None
        FakeProcess.started.append(self)

    def poll(self) -> int | None:
        return self.returncode


def test_a_partition_whose_scan_process_still_runs_gets_no_second_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_invoker.subprocess, "Popen", FakeProcess)
    FakeProcess.started = []
    invoker = ProcessInvoker({}, tmp_path / "scans.log", one_per_partition=True)
    # Given a scan of segment 3 running, when its partition is woken again and another partition once
    invoker.invoke_scan(ScanRequest(segment=3, bucket=MINUTE))
    invoker.invoke_scan(ScanRequest(segment=3, bucket=MINUTE))
    invoker.invoke_scan(ScanRequest(segment=4, bucket=MINUTE))
    # Then one process each
    assert (len(FakeProcess.started), invoker.skipped) == (2, 1)
    # And once the first has ended, its partition gets a new one
    FakeProcess.started[0].returncode = 0
    invoker.invoke_scan(ScanRequest(segment=3, bucket=MINUTE))
    assert len(FakeProcess.started) == 3


def test_by_default_every_request_gets_its_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_invoker.subprocess, "Popen", FakeProcess)
    FakeProcess.started = []
    invoker = ProcessInvoker({}, tmp_path / "scans.log")
    for _ in range(3):
        invoker.invoke_scan(ScanRequest(segment=3, bucket=MINUTE))
    assert len(FakeProcess.started) == 3
