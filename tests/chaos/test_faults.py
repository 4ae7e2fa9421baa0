"""The operations suite's faults (``chaos.faults``), with nodetool made up."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chaos.faults import CONFIGURED_WRITE_THREADS, WRITE_STAGE, CassandraWrites
from devstack import servers

if TYPE_CHECKING:
    import pytest


class Nodetool:
    """The write stage as nodetool reads and resizes it."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, host: str, port: int, *args: str) -> str:
        self.calls.append(args)
        if args[0] == "setconcurrency":
            self.threads = int(args[2])
        return f"Stage  CorePoolSize  MaximumPoolSize\n{WRITE_STAGE}  {self.threads}  {self.threads}\n"


def test_a_write_stage_left_stopped_by_an_earlier_run_is_opened_before_the_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a node reused from a run that was killed in the middle of its outage
    nodetool = Nodetool(threads=0)
    monkeypatch.setattr(servers, "nodetool", nodetool)
    writes = CassandraWrites()
    # When the run opens it
    writes.open()
    # Then it takes writes again, and the outage will resize it back to the configured size
    assert nodetool.threads == CONFIGURED_WRITE_THREADS == writes.threads


def test_stopping_the_writes_takes_one_nodetool_call_once_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given an open write stage of 8 threads (each nodetool call starts a JVM: seconds on a loaded machine)
    nodetool = Nodetool(threads=8)
    monkeypatch.setattr(servers, "nodetool", nodetool)
    writes = CassandraWrites()
    writes.open()
    nodetool.calls.clear()
    # When the outage stops the writes and resumes them
    writes.stop()
    assert nodetool.threads == 0 and nodetool.calls == [("setconcurrency", WRITE_STAGE, "0")]
    writes.resume()
    # Then the stage has its size back
    assert nodetool.threads == 8 and not writes.stopped
