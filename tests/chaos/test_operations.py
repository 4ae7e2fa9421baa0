"""The operations suite makes happen what its small run's test checks (``chaos.operations``), on a made-up API
and a made-up write stage, without servers: the write outage meets a change it refuses, the operations last
until the faults and races are over, and every kind of change is made at least once."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from chaos import operations
from chaos.operations import SMALL, Operations, Reply

if TYPE_CHECKING:
    import pytest

JOBS = ("job-a", "job-b", "job-c")


class Writes:
    """The write stage: stopped between ``stop`` and ``resume``."""

    def __init__(self) -> None:
        self.threads = 8
        self.stopped = False
        self.calls: list[str] = []

    def stop(self) -> None:
        self.stopped = True
        self.calls.append("stop")

    def resume(self) -> None:
        self.stopped = False
        self.calls.append("resume")


class Api:
    """Just enough of the API: changes answer the job as it now stands; 503 while ``refuse()`` says so."""

    def __init__(self, refuse: Any = lambda: False) -> None:
        self.refuse = refuse
        self.jobs = {job_id: job(job_id) for job_id in JOBS}
        self.sent: list[tuple[str, str]] = []

    def call(self, method: str, path: str, body: Any = None, barrier: threading.Barrier | None = None) -> Reply:
        now = datetime.now(UTC)
        job_id = path.split("/")[2]
        current = self.jobs[job_id]
        if method == "GET":
            return Reply(200, dict(current), now, now)
        self.sent.append((method, path))
        if self.refuse():
            return Reply(503, {"error": "unavailable"}, now, now)
        changed = {**current, "version": current["version"] + 1}
        if path.endswith("/pause"):
            changed["state"] = "PAUSED"
        elif path.endswith("/resume"):
            changed["state"] = "ACTIVE"
        elif method == "DELETE":
            changed["state"] = "CANCELLED"
        else:
            changed.update(body)
        self.jobs[job_id] = changed
        return Reply(200, dict(changed), now, now)


def job(job_id: str, state: str = "ACTIVE") -> dict[str, Any]:
    return {"job_id": job_id, "version": 1, "state": state, "payload": {"type": "ok", "v": 0},
            "schedule": {"every": "PT10S"}, "next_run_at": None}


def suite(api: Api, writes: Writes | None = None, **plan: Any) -> Operations:
    """The suite as ``start`` leaves it, on ``api`` and ``writes``; sends again at once."""
    ops = Operations(replace(SMALL, **plan))
    ops.pause_s = 0.01
    ops.client = api  # type: ignore[assignment]
    ops.writes = writes or Writes()  # type: ignore[assignment]
    ops.chaos = SimpleNamespace(endpoints=SimpleNamespace(kafka_bootstrap="127.0.0.1:1"))  # type: ignore[assignment]
    ops.kinds = dict.fromkeys(JOBS, "ok")
    ops.views = {job_id: dict(api.jobs[job_id]) for job_id in JOBS}
    return ops


def test_the_write_outage_lasts_until_a_change_sent_during_it_was_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given no operation running (a loaded machine once stopped the writes only after they had ended), and a
    # write stage that refuses every change while it is stopped
    monkeypatch.setattr(operations, "refuse_records", lambda bootstrap, topic: None)
    writes = Writes()
    ops = suite(Api(refuse=lambda: writes.stopped), writes, void_at_s=0, outage_at_s=0, outage_s=0.05)
    # When the faults run
    ops._faults(datetime.now(UTC))
    # Then a change was sent during the outage and refused, sent again and acknowledged after it
    assert sum(ops.refused.values()) > 0
    assert ops.acknowledged["payload"] == 1 and len(ops.doubts) >= 1
    assert writes.calls == ["stop", "resume"] and not ops.report.unmet
    assert {f.kind for f in ops.report.faults} == {"unpublishable topic", "Cassandra writes fail, reads work"}


def test_a_write_outage_that_refuses_nothing_fails_the_run_and_ends() -> None:
    # Given a write stage that does not stop the writes (every change is acknowledged)
    writes = Writes()
    ops = suite(Api(), writes, outage_s=0.01, outage_overrun_s=0.2)
    # When the outage runs
    ops._write_outage()
    # Then it ends within its bound, the writes are resumed, and the run says what it could not make happen
    assert writes.calls == ["stop", "resume"]
    assert len(ops.report.unmet) == 1 and "refused no change" in ops.report.unmet[0]
    assert ops.acknowledged["payload"] >= 1


def test_the_operations_go_on_until_the_faults_and_races_are_over() -> None:
    # Given faults that take longer than the operations' planned time
    ops = suite(Api(), ops_s=0)
    over = threading.Event()
    released = threading.Event()

    def faults() -> None:
        released.wait(timeout=10)
        over.set()

    ops.scripted = [threading.Thread(target=faults)]
    ops.scripted[0].start()
    threading.Timer(0.1, released.set).start()
    # When the operations' phase ends
    ops._operations_phase()
    # Then the faults were over by then
    assert over.is_set()


def test_every_kind_of_change_no_operation_made_is_made_at_the_end() -> None:
    # Given operations that acknowledged payload changes only, and no paused job
    ops = suite(Api(), ops_s=0)
    ops.scripted = []
    ops.acknowledged["payload"] = 4
    # When the operations' phase ends
    ops._operations_phase()
    # Then a schedule change, a pause, a resume (of a job paused for it) and a cancel were acknowledged too
    assert {kind for kind, n in ops.acknowledged.items() if n} == {"payload", "schedule", "pause", "resume", "cancel"}
    assert not ops.report.unmet


def test_a_kind_of_change_that_cannot_be_made_fails_the_run() -> None:
    # Given every job cancelled (no job may be paused)
    api = Api()
    api.jobs = {job_id: job(job_id, "CANCELLED") for job_id in JOBS}
    ops = suite(api, ops_s=0)
    ops.scripted = []
    # When the operations' phase ends
    ops._operations_phase()
    # Then nothing was sent, and the run names every kind it could not make
    assert not api.sent
    assert len(ops.report.unmet) == len(operations.EVERY_KIND)
