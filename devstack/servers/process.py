"""Process control of one server: its pid file and lock (shared across processes), starting it detached
with its console in a log file, waiting until it answers, and stopping or killing it (only if devstack
started it, from this checkout)."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from devstack.servers import fetch
from devstack.servers.probes import port_open
from devstack.servers.settings import LOCAL_DIR, LOG_TAIL_LINES, POLL_INTERVAL_S, DevstackError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Server:
    """A server devstack starts, probes and stops (a single-node one, or a node of ``devstack.cluster``)."""

    name: str
    address: Callable[[], tuple[str, int]]
    probe: Callable[[str, int], bool]
    prepare: Callable[[], list[str]]  # renders configs etc. and returns the start command
    process_marker: str  # appears in the command line of the server process
    ready_timeout_s: float
    has_jars: bool
    port_variable: str
    #: Its pid file goes to ``home/run``, its log to ``home/logs``, and it runs in ``home``.
    home: Path = LOCAL_DIR
    #: The jars it runs on, when they are not its own name's (a cluster node shares the server's).
    jars: str = ""

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"


# Processes started by this Python process, so that they are reaped when they exit.
_children: dict[int, subprocess.Popen[bytes]] = {}


def _pid_file(server: Server) -> Path:
    return server.run_dir / f"{server.name}.pid"


def _log_file(server: Server) -> Path:
    return server.log_dir / f"{server.name}.log"


@contextlib.contextmanager
def _locked(server: Server) -> Iterator[None]:
    """Serialise start/stop of one server across processes (e.g. parallel test sessions)."""
    server.run_dir.mkdir(parents=True, exist_ok=True)
    with (server.run_dir / f"{server.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    child = _children.get(pid)
    if child is not None:
        if child.poll() is None:
            return True
        del _children[pid]  # reaped by poll()
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie still has a pid but is no longer running
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def _is_ours(pid: int, server: Server) -> bool:
    """Guard against a recycled pid: the process must be this server, run from this checkout."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return _alive(pid)  # no /proc: trust the pid file
    return server.process_marker in cmdline and cwd == server.home


def managed_pid(server: Server) -> int | None:
    """The pid of the running server devstack started, or None (removing a stale pid file)."""
    pid_file = _pid_file(server)
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if _alive(pid) and _is_ours(pid, server):
        return pid
    pid_file.unlink(missing_ok=True)
    return None


def _log_tail(server: Server, lines: int = LOG_TAIL_LINES) -> str:
    path = _log_file(server)
    try:
        with path.open("rb") as file:
            file.seek(0, os.SEEK_END)
            file.seek(max(0, file.tell() - 256 * 1024))
            text = file.read().decode(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


def _spawn(server: Server, command: list[str]) -> int:
    """Start ``command`` detached from this process, logging to .local/logs/<name>.log."""
    server.log_dir.mkdir(parents=True, exist_ok=True)
    log_path = _log_file(server)
    if log_path.exists():
        log_path.replace(log_path.with_name(log_path.name + ".1"))
    with log_path.open("wb") as log_out:
        log_out.write(f"# devstack started at {time.strftime('%Y-%m-%d %H:%M:%S')}:\n".encode())
        log_out.write(f"# {' '.join(command)}\n".encode())
        log_out.flush()
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_out,
            stderr=subprocess.STDOUT,
            cwd=server.home,
            start_new_session=True,  # survives the caller and its Ctrl-C
        )
    _children[process.pid] = process
    host, port = server.address()
    _pid_file(server).write_text(f"{process.pid}\n{host}:{port}\n")
    log.info("started %s (pid %d), log: %s", server.name, process.pid, log_path)
    return process.pid


def _wait_ready(server: Server, pid: int, host: str, port: int) -> None:
    deadline = time.monotonic() + server.ready_timeout_s
    while True:
        if not _alive(pid):
            _pid_file(server).unlink(missing_ok=True)
            raise DevstackError(
                f"{server.name} exited during start-up; last lines of {_log_file(server)}:\n"
                + _log_tail(server)
            )
        if server.probe(host, port):
            return
        if time.monotonic() > deadline:
            tail = _log_tail(server)
            _terminate(server, pid)
            raise DevstackError(
                f"{server.name} did not answer on {host}:{port} within {server.ready_timeout_s:.0f} s"
                f" and was stopped; last lines of {_log_file(server)}:\n{tail}"
            )
        time.sleep(POLL_INTERVAL_S)


def _wait_exit(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _terminate(server: Server, pid: int) -> None:
    """SIGTERM (the servers shut down cleanly on it), then SIGKILL after STOP_TIMEOUT_S."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if not _wait_exit(pid, STOP_TIMEOUT_S):
        log.warning("%s (pid %d) still running %.0f s after SIGTERM; killing it", server.name, pid, STOP_TIMEOUT_S)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _wait_exit(pid, 10.0)
    _pid_file(server).unlink(missing_ok=True)


@dataclass(frozen=True)
class Outcome:
    name: str
    started: bool  # False: an already running server was reused
    seconds: float  # from the call until the server answered
    fetch_seconds: float  # part of ``seconds`` spent fetching jars


def ensure(server: Server) -> Outcome:
    """Make sure ``server`` answers on its port; start it if needed."""
    began = time.monotonic()
    host, port = server.address()
    with _locked(server):
        if server.probe(host, port):
            return Outcome(server.name, False, time.monotonic() - began, 0.0)
        fetch_seconds = 0.0
        pid = managed_pid(server)
        if pid is not None:
            recorded = _pid_file(server).read_text().split()[1:]
            if recorded and recorded != [f"{host}:{port}"]:
                raise DevstackError(
                    f"{server.name} (pid {pid}) was started by devstack on {recorded[0]},"
                    f" not {host}:{port}; stop it first or unset {server.port_variable}"
                )
            log.info("%s (pid %d) is already starting; waiting for it", server.name, pid)
        else:
            if port_open(host, port):
                raise DevstackError(
                    f"{host}:{port} is taken by something that does not answer like {server.name};"
                    f" stop it or set {server.port_variable} to another port"
                )
            if server.has_jars:
                fetch_seconds = fetch.fetch_jars(server.jars or server.name)
            pid = _spawn(server, server.prepare())
        _wait_ready(server, pid, host, port)
    seconds = time.monotonic() - began
    log.info("%s is ready on %s:%d after %.1f s", server.name, host, port, seconds)
    return Outcome(server.name, True, seconds, fetch_seconds)


def stop_server(server: Server) -> bool:
    """Stop ``server`` if devstack started it (SIGTERM, then SIGKILL after 60 s); False if it did not."""
    with _locked(server):
        pid = managed_pid(server)
        if pid is None:
            return False
        log.info("stopping %s (pid %d)", server.name, pid)
        _terminate(server, pid)
    return True


def kill_server(server: Server) -> bool:
    """SIGKILL ``server`` if devstack started it, without a clean shutdown (for fault tests)."""
    with _locked(server):
        pid = managed_pid(server)
        if pid is None:
            return False
        log.info("killing %s (pid %d)", server.name, pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _wait_exit(pid, 10.0)
        _pid_file(server).unlink(missing_ok=True)
    return True

