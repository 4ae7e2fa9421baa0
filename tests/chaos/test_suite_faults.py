"""The crash suite's faults meet what they are meant to meet (``chaos.suite_faults``), on a made-up invoker,
API and server control, without servers: a kill waits for a scan, the database stays down until the API
has refused a submission, and the run cannot end before the ticker has passed its silent minutes."""

from __future__ import annotations

import signal
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from chaos import suite_faults
from chaos.suite_faults import SMALL, Faults
from chaos.suite_report import Report
from jobrunner.domain.time import MINUTE, minute_bucket

if TYPE_CHECKING:
    import pytest

PAST = datetime.now(UTC) - timedelta(hours=1)


class Invoker:
    """Scans that start running only after ``idle`` looks."""

    def __init__(self, idle: int) -> None:
        self.idle = idle
        self.looks = 0

    def running(self) -> list[Any]:
        self.looks += 1
        if self.looks <= self.idle:
            return []
        request = SimpleNamespace(bucket=minute_bucket(datetime.now(UTC)), segment=2)
        return [SimpleNamespace(request=request, process=SimpleNamespace(pid=4242))]


class Load:
    """The API: a submission is answered 503 while the node is down, 201 otherwise."""

    def __init__(self, node: dict[str, bool], report: Report) -> None:
        self.node, self.report = node, report

    def submit(self, body: dict[str, Any]) -> Any:
        return SimpleNamespace(status_code=201 if self.node["up"] else 503)

    def accept(self, body: dict[str, Any], response: Any) -> None:
        if response.status_code == 503:
            self.report.rejected_503 += 1


def faults(invoker: Any = None, load: Any = None, report: Report | None = None, **plan: Any) -> Faults:
    made = Faults(replace(SMALL, **plan), SimpleNamespace(tick=lambda minute: None),  # type: ignore[arg-type]
                  invoker, load, report or Report(plan={}), threading.Lock(), threading.Event(),
                  kill=lambda pid, sig: None)
    made.poll_s = 0.01
    return made


def test_a_kill_waits_for_a_scan_to_run() -> None:
    # Given no scan running at the kill's planned instant, and one a few looks later
    killed: list[tuple[int, int]] = []
    made = faults(Invoker(idle=3), kills=1, kill_span_s=10)
    made._kill = lambda pid, sig: killed.append((pid, sig))
    # When the kills run
    made.kill_scans(PAST)
    # Then that scan was killed, and the kill recorded
    assert killed == [(4242, signal.SIGKILL)]
    assert [f.kind for f in made.report.faults] == ["kill -9 scan"] and not made.report.unmet


def test_a_kill_with_no_scan_to_kill_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(suite_faults, "KILL_PATIENCE_S", 0.05)
    made = faults(Invoker(idle=10**6), kills=1, kill_span_s=10)
    made.kill_scans(PAST)
    assert not made.kills and len(made.report.unmet) == 1 and "no scan" in made.report.unmet[0]


def test_the_database_stays_down_until_the_api_has_refused_a_submission(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a restart that would take no time at all (so the API could meet the node up throughout)
    node = {"up": True}
    calls: list[str] = []

    def stop(name: str) -> bool:
        calls.append(f"stop {name}")
        node["up"] = False
        return True

    def start() -> None:
        calls.append("start cassandra")
        node["up"] = True

    def restart(name: str) -> None:
        stop(name)
        start()

    monkeypatch.setattr(suite_faults, "servers", SimpleNamespace(stop=stop, ensure_cassandra=start, restart=restart))
    report = Report(plan={})
    made = faults(load=Load(node, report), report=report, cassandra_restart_at_s=0, submit_during_restart_s=0)
    # When the database is restarted while jobs are submitted
    made.restart_cassandra_while_submitting(PAST)
    # Then the API refused at least one submission with 503 while it was down, and it was started again
    assert report.rejected_503 > 0 and not report.unmet
    assert calls == ["stop cassandra", "start cassandra"] and node["up"]


def test_the_run_is_not_over_before_the_ticker_has_passed_its_silent_minutes_and_the_tripled_tick() -> None:
    # Given a plan with two silent minutes after the first, then a tripled tick
    made = faults(no_tick_from_s=60, no_tick_minutes=2)
    first = minute_bucket(datetime.now(UTC)) + MINUTE
    made.silence_from(first)
    # When the ticker comes to each minute in turn
    done = []
    for k in range(4):
        done.append(made.ticks_done())
        made.tick(first + k * MINUTE)
    # Then the faults are done only once it has ticked the minute after the silence
    assert done == [False, False, False, False] and made.ticks_done()
    assert [f.kind for f in made.report.faults] == ["no tick", "no tick", "duplicate tick"]


def test_a_database_the_suite_did_not_start_is_not_restarted_and_the_run_says_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a node on the suite's port that its devstack did not start (stop finds no process of its own)
    calls: list[str] = []

    def stop(name: str) -> bool:
        calls.append("stop")
        return False

    def ensure_cassandra() -> None:
        calls.append("ensure")

    monkeypatch.setattr(suite_faults, "servers", SimpleNamespace(stop=stop, ensure_cassandra=ensure_cassandra))
    # When the database restart comes
    report = Report(plan={})
    made = faults(load=Load({"up": True}, report), report=report, cassandra_restart_at_s=0, submit_during_restart_s=0)
    made.restart_cassandra_while_submitting(PAST)
    # Then it is left running (or started, if none answers), and the run fails saying why
    assert calls == ["stop", "ensure"] and len(report.unmet) == 1 and "not restarted" in report.unmet[0]
