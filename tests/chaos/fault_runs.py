"""The fault suites' two small runs (``test_chaos_smoke.py``, ``test_operations_smoke.py``), on one set of the
fault suites' own servers, in the background while the tests that need no server run.

Each run is ``python -m chaos [--operations] --small --keep-servers`` in a process of its own, because it kills
and restarts its servers; they run one after the other on one set of servers (their own ports and
DEVSTACK_HOME, never the tests' or `make run`'s), started once before the first and stopped after the last.

Together they take about 8 minutes, mostly waiting for minutes to come. The session runs the end-to-end
tests first, and the few marked ``solo`` that time a call (``tests/conftest.py`` orders them), and starts these
runs as the first other test begins (``FaultRuns.start``): the two never share the machine's cores with a test
whose verdict depends on its speed, and the integration, contract, unit and infrastructure tests run in the
time the fault suites wait. The smoke tests come last and judge the reports; run alone, a smoke test starts the
runs itself and waits.

Each run leaves its servers healthy for the next: the crash suite's restarts end with the server up, and the
operations suite resumes the writes it stopped. Each also checks at its start what it needs
(``servers.ensure_all`` starts any server that does not answer; the operations suite opens a write stage left
stopped), and runs on a keyspace, lease table and tenant of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from chaos.__main__ import isolated

ROOT = Path(__file__).resolve().parents[2]

#: The runs, in order, and each one's time limit (seconds).
RUNS: dict[str, tuple[list[str], float]] = {
    "crash": (["--small"], 1500),
    "operations": (["--operations", "--small"], 600),
}


@dataclass(frozen=True)
class Finished:
    """What one small run left: its report (None if it wrote none) and its process's exit and output."""

    report: Path | None
    returncode: int
    output: str


def servers(command: str, env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """``python -m devstack.servers COMMAND`` on the servers ``env`` names."""
    return subprocess.run([sys.executable, "-m", "devstack.servers", command], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout_s, check=False)


class FaultRuns:
    """The two small runs in one background thread, once per session: servers up, each run, servers down."""

    _lock = threading.Lock()
    _thread: threading.Thread | None = None
    _results: dict[str, Finished] = {}  # one set per session, filled by the thread
    _done: dict[str, threading.Event] = {name: threading.Event() for name in RUNS}
    #: Seconds each step took ("servers up", then each run by name), for the session's summary.
    took: dict[str, float] = {}

    @classmethod
    def start(cls) -> None:
        """Starts the runs if they have not started (idempotent)."""
        with cls._lock:
            if cls._thread is None:
                cls._thread = threading.Thread(target=cls._run_all, name="fault-suites", daemon=True)
                cls._thread.start()

    @classmethod
    def result(cls, name: str) -> Finished:
        """The run ``name`` once it has finished (starting the runs if nothing has)."""
        cls.start()
        limit = sum(limit for _, limit in RUNS.values()) + 900  # the servers' start, every run before it
        assert cls._done[name].wait(timeout=limit), f"the fault suites' small run {name!r} did not finish"
        return cls._results[name]

    @classmethod
    def finish(cls) -> None:
        """Waits for the runs, if they started, to end and their servers to stop: the session's last step, so
        that no server of theirs outlives it (a daemon thread dies with the interpreter, mid-``down``)."""
        if cls._thread is not None:
            cls._thread.join(timeout=sum(limit for _, limit in RUNS.values()) + 900)

    @classmethod
    def _run_all(cls) -> None:
        env = isolated(os.environ)
        folder = Path(tempfile.mkdtemp(prefix="fault-suites-"))
        try:
            started = time.monotonic()
            up = servers("up", env, timeout_s=600)
            cls.took["servers up"] = time.monotonic() - started
            for name, (flags, limit) in RUNS.items():
                started = time.monotonic()
                if up.returncode != 0:
                    cls._results[name] = Finished(None, up.returncode,
                                                  f"the fault suites' servers did not start:\n{up.stdout[-3000:]}"
                                                  f"{up.stderr[-3000:]}")
                else:
                    cls._results[name] = cls._one(flags, limit, env, folder / f"{name}.json")
                cls.took[name] = time.monotonic() - started
                cls._done[name].set()
        except Exception as error:  # every judge is told, none waits for ever
            for name in RUNS:
                cls._results.setdefault(name, Finished(None, -1, f"the fault suites' runs failed: {error!r}"))
                cls._done[name].set()
        finally:
            servers("down", env, timeout_s=300)

    @staticmethod
    def _one(flags: list[str], limit: float, env: dict[str, str], report: Path) -> Finished:
        try:
            completed = subprocess.run([sys.executable, "-m", "chaos", *flags, "--keep-servers", "--json",
                                        str(report)], cwd=ROOT, env=env, capture_output=True, text=True,
                                       timeout=limit, check=False)
        except subprocess.TimeoutExpired as timeout:
            return Finished(None, -1, f"timed out after {limit:.0f} s: {timeout.stdout!r:.3000}")
        return Finished(report if report.exists() else None, completed.returncode,
                        completed.stdout[-6000:] + completed.stderr[-3000:])
