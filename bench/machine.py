"""The machine the figures were measured on, its load, where its CPU went during a benchmark, and the commit of
the code measured."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jobrunner

ROOT = Path(__file__).resolve().parents[1]
#: Marker in the command line of each local server (as devstack starts them).
SERVER_MARKERS = {
    "cassandra": "org.apache.cassandra.service.CassandraDaemon",
    "kafka": "kafka.Kafka",
    "moto": "devstack.moto_server",
}
CLK_TCK = os.sysconf("SC_CLK_TCK")


def load1() -> float:
    return os.getloadavg()[0]


def _meminfo_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024 / 1024
    return float("nan")


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _kafka_version() -> str:
    jars = sorted((ROOT / ".local" / "kafka" / "lib").glob("kafka-server-[0-9]*.jar"))
    match = re.search(r"kafka-server-([\d.]+)\.jar", jars[-1].name) if jars else None
    return match.group(1) if match else "unknown"


def describe(cassandra_host: str, cassandra_port: int) -> dict[str, Any]:
    from cassandra import __version__ as driver_version
    from kafka import __version__ as kafka_python_version

    from devstack.servers import cassandra_release_version

    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(_meminfo_gib(), 1),
        "cpu_model": _cpu_model(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "cassandra": cassandra_release_version(cassandra_host, cassandra_port) or "unknown",
        "kafka": _kafka_version(),
        "cassandra_driver": driver_version,
        "kafka_python": kafka_python_version,
        "servers_from": {name: _cwd(pid) for name, pid in server_pids().items()},
    }


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return "?"


SERVER_PORTS = {"cassandra": 9042, "kafka": 9092, "moto": 5001}


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(fields[9])
    return inodes


def _pid_listening_on(port: int) -> int | None:
    inodes = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    if not inodes:
        return None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    return int(entry.name)
        except OSError:
            continue
    return None


def server_pids() -> dict[str, int]:
    """Pids of the Cassandra, Kafka and moto the benchmark talks to: the processes listening on their
    ports (whichever checkout started them), else devstack's pid files; read-only, nothing signalled."""
    found: dict[str, int] = {}
    for name, marker in SERVER_MARKERS.items():
        port = int(os.environ.get(f"{name.upper()}_PORT", SERVER_PORTS[name]))
        pid = _pid_listening_on(port)
        if pid is None:
            try:
                pid = int((ROOT / ".local" / "run" / f"{name}.pid").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found[name] = pid
    return found


def _process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process (all its threads)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _machine_cpu_s() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, summed over cores."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(values[:8])
    return (total - idle) / CLK_TCK, total / CLK_TCK


@dataclass
class CpuMeter:
    """CPU seconds used between ``start`` and ``stop`` by the machine, the servers and given pids."""

    pids: dict[str, int] = field(default_factory=dict)
    _start: dict[str, float] = field(default_factory=dict)
    _wall: float = 0.0

    def _snapshot(self) -> dict[str, float]:
        busy, total = _machine_cpu_s()
        snap = {"machine_busy": busy, "machine_total": total}
        for name, pid in self.pids.items():
            snap[name] = _process_cpu_s(pid)
        return snap

    def start(self) -> CpuMeter:
        self._start = self._snapshot()
        self._wall = time.monotonic()
        return self

    def stop(self) -> dict[str, float]:
        end = self._snapshot()
        wall = time.monotonic() - self._wall
        used = {name: end[name] - self._start[name] for name in end}
        out = {"wall_s": wall, "cores_busy": used["machine_busy"] / wall if wall else 0.0}
        for name in self.pids:
            out[f"{name}_cores"] = used[name] / wall if wall else 0.0
        return out


def code_commit() -> str:
    """The commit of the ``jobrunner`` package measured (another checkout's, to measure an older design)."""
    root = Path(jobrunner.__file__).resolve().parents[2]
    done = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"], capture_output=True,
                          text=True, check=False)
    return done.stdout.strip() or "unknown"
