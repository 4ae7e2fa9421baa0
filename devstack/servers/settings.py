"""Where the local servers live and answer: the folders under ``.local``, the addresses (environment
overrides), the JDK that runs them, and the error every part of ``devstack.servers`` raises."""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)

DEVSTACK_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = DEVSTACK_DIR.parent
#: Where jars, data, logs and pid files live; a second, independent set of servers (the fault suite)
#: runs with its own DEVSTACK_HOME and its own ports.
LOCAL_DIR = Path(os.environ.get("DEVSTACK_HOME") or REPO_ROOT / ".local").resolve()
DATA_DIR = LOCAL_DIR / "data"
LOG_DIR = LOCAL_DIR / "logs"
RUN_DIR = LOCAL_DIR / "run"

SERVER_NAMES = ("cassandra", "kafka", "moto")

DEBIAN_JAVA_17 = Path("/usr/lib/jvm/java-17-openjdk-amd64/bin/java")

LOG_TAIL_LINES = 40
POLL_INTERVAL_S = 1.0


class DevstackError(RuntimeError):
    """A local server could not be fetched, started or stopped."""


def env_str(name: str, default: str) -> str:
    return os.environ.get(name) or default


def env_port(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        port = int(raw)
    except ValueError:
        raise DevstackError(f"{name}={raw!r} is not a port number") from None
    if not 0 < port < 65536:
        raise DevstackError(f"{name}={raw!r} is not a port number")
    return port


def cassandra_address() -> tuple[str, int]:
    return env_str("CASSANDRA_HOST", "127.0.0.1"), env_port("CASSANDRA_PORT", 9042)


def kafka_address() -> tuple[str, int]:
    return env_str("KAFKA_HOST", "127.0.0.1"), env_port("KAFKA_PORT", 9092)


def moto_address() -> tuple[str, int]:
    return env_str("MOTO_HOST", "127.0.0.1"), env_port("MOTO_PORT", 5001)


def lib_dir(name: str) -> Path:
    """Where the jars of ``devstack/<name>/pom.xml`` are copied (read at each call: tests move LOCAL_DIR)."""
    return LOCAL_DIR / name / "lib"


def classpath(name: str) -> str:
    return f"{lib_dir(name)}/*"


@functools.cache
def _java_major_version(java: str) -> int | None:
    """The feature release of a ``java`` launcher (17 for 17.0.15), or None if it does not run."""
    try:
        result = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_x" style
        major = int(match.group(2))
    return major


def java_executable() -> str:
    """The JDK 17 ``java`` launcher to run the servers with.

    Order: ``$JAVA_HOME/bin/java`` if JAVA_HOME is a JDK 17, then Debian's OpenJDK 17, then
    ``java`` on PATH if it is a 17. Cassandra 5.0 does not run on newer JDKs, so any
    other version is refused rather than tried.
    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and _java_major_version(str(candidate)) == 17:
            return str(candidate)
        log.info("ignoring JAVA_HOME=%s: not a JDK 17", java_home)
    if DEBIAN_JAVA_17.is_file():
        return str(DEBIAN_JAVA_17)
    on_path = shutil.which("java")
    if on_path and _java_major_version(on_path) == 17:
        return on_path
    raise DevstackError("no JDK 17 found: set JAVA_HOME to a JDK 17 (Cassandra 5.0 needs exactly 17)")

