"""Fetch, start, probe, reuse and stop the local servers that tests and ``make run`` need.

Three servers, all bound to 127.0.0.1 by default:

* Apache Cassandra 5.0 (CQL on ``CASSANDRA_PORT``, default 9042; gossip on 7000),
* Apache Kafka 3.9 in KRaft combined mode (``KAFKA_PORT``, default 9092; controller on 9093),
* moto's AWS mock server (``devstack/moto_server.py``: each DynamoDB request atomic), used as the
  DynamoDB endpoint (``MOTO_PORT``, default 5001).

Each ``ensure_*`` function reuses a server that already answers on its port (checked
with a real protocol request, not just a TCP connect). Otherwise it fetches the server's
jars with Maven if needed, starts the server as a detached process and waits until it
answers. Servers keep running after the calling Python process exits; stop them with
:func:`stop_all` or ``python -m devstack.servers down``.

Everything created at run time lives under ``<repo>/.local`` (git-ignored)::

    .local/<server>/lib/             jars copied by Maven, plus a completeness marker
    .local/<server>/<config>         config files rendered from the templates in devstack/
    .local/data/{cassandra,kafka}/   server data
    .local/logs/<server>.log         console output of the current run (<server>.log.1: the run before)
    .local/run/<server>.pid          pid and host:port of the process devstack started (+ a lock file)

Environment overrides: ``CASSANDRA_HOST``/``KAFKA_HOST``/``MOTO_HOST`` (default 127.0.0.1),
``CASSANDRA_PORT``, ``CASSANDRA_STORAGE_PORT``, ``KAFKA_PORT``, ``KAFKA_CONTROLLER_PORT``,
``MOTO_PORT``, ``DEVSTACK_HOME`` (instead of ``<repo>/.local``) and ``JAVA_HOME`` (used only if it
is a JDK 17).

Command line::

    python -m devstack.servers up | down | status | restart NAME | kill NAME
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import string
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

log = logging.getLogger(__name__)

DEVSTACK_DIR = Path(__file__).resolve().parent
REPO_ROOT = DEVSTACK_DIR.parent
#: Where jars, data, logs and pid files live; a second, independent set of servers (the fault suite)
#: runs with its own DEVSTACK_HOME and its own ports.
LOCAL_DIR = Path(os.environ.get("DEVSTACK_HOME") or REPO_ROOT / ".local").resolve()
DATA_DIR = LOCAL_DIR / "data"
LOG_DIR = LOCAL_DIR / "logs"
RUN_DIR = LOCAL_DIR / "run"

SERVER_NAMES = ("cassandra", "kafka", "moto")

DEBIAN_JAVA_17 = Path("/usr/lib/jvm/java-17-openjdk-amd64/bin/java")
MAVEN_COPY_GOAL = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies"
# Any fixed 16-byte id in Kafka's url-safe base64 form; the storage is formatted only once.
KAFKA_CLUSTER_ID = "ZGV2c3RhY2stam9icnVubg"

STOP_TIMEOUT_S = 60.0
LOG_TAIL_LINES = 40
POLL_INTERVAL_S = 1.0


class DevstackError(RuntimeError):
    """A local server could not be fetched, started or stopped."""


@dataclass(frozen=True)
class Endpoints:
    """Where the local servers answer."""

    cassandra_host: str
    cassandra_port: int
    kafka_bootstrap: str
    dynamodb_endpoint: str


# --------------------------------------------------------------------------- settings


def _env_str(name: str, default: str) -> str:
    return os.environ.get(name) or default


def _env_port(name: str, default: int) -> int:
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


def _cassandra_address() -> tuple[str, int]:
    return _env_str("CASSANDRA_HOST", "127.0.0.1"), _env_port("CASSANDRA_PORT", 9042)


def _kafka_address() -> tuple[str, int]:
    return _env_str("KAFKA_HOST", "127.0.0.1"), _env_port("KAFKA_PORT", 9092)


def _moto_address() -> tuple[str, int]:
    return _env_str("MOTO_HOST", "127.0.0.1"), _env_port("MOTO_PORT", 5001)


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


# --------------------------------------------------------------------------- jars and configs


def _lib_dir(name: str) -> Path:
    return LOCAL_DIR / name / "lib"


def _classpath(name: str) -> str:
    return f"{_lib_dir(name)}/*"


def _jars_are_complete(lib: Path, pom_digest: str) -> bool:
    """True if ``lib`` holds every jar of the last successful copy for this exact pom."""
    marker = lib / ".devstack-complete"
    if not marker.is_file():
        return False
    digest, *jars = marker.read_text().split()
    return digest == pom_digest and bool(jars) and all((lib / jar).is_file() for jar in jars)


def fetch_jars(name: str) -> float:
    """Copy the runtime jars of ``devstack/<name>/pom.xml`` into ``.local/<name>/lib``.

    Does nothing if the folder is already complete for the current pom (a marker file holds
    the pom's hash and the jar list). Returns the seconds spent fetching (0.0 if nothing was
    done). Jars come from Maven's repositories through ``mvn``; ``~/.m2`` caches them.
    """
    pom = DEVSTACK_DIR / name / "pom.xml"
    lib = _lib_dir(name)
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()
    if _jars_are_complete(lib, digest):
        return 0.0
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DevstackError(f"Maven (mvn) is needed to fetch the {name} jars but is not on PATH")
    log.info("fetching %s jars into %s", name, lib)
    started = time.monotonic()
    partial = lib.with_name("lib.partial")
    shutil.rmtree(partial, ignore_errors=True)
    command = [mvn, "-B", "-q", MAVEN_COPY_GOAL, f"-DoutputDirectory={partial}", "-DincludeScope=runtime"]
    command += ["-f", str(pom)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    jars = sorted(path.name for path in partial.glob("*.jar"))
    if result.returncode != 0 or not jars:
        output = "\n".join((result.stdout + result.stderr).splitlines()[-LOG_TAIL_LINES:])
        raise DevstackError(f"Maven could not fetch the {name} jars (exit {result.returncode}):\n{output}")
    (partial / ".devstack-complete").write_text("\n".join([digest, *jars]) + "\n")
    # Swap the whole folder so jars of an older version never end up on the classpath.
    shutil.rmtree(lib, ignore_errors=True)
    partial.rename(lib)
    seconds = time.monotonic() - started
    log.info("fetched %d %s jars in %.1f s", len(jars), name, seconds)
    return seconds


def _render(template: Path, target: Path, **values: str) -> Path:
    """Fill the ``${name}`` placeholders of ``template`` and write the result to ``target``."""
    text = string.Template(template.read_text()).substitute(values)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def _prepare_cassandra() -> list[str]:
    """Render cassandra.yaml and return the command that starts Cassandra."""
    host, port = _cassandra_address()
    data = DATA_DIR / "cassandra"
    triggers = LOCAL_DIR / "cassandra" / "triggers"  # Cassandra warns every minute if it is missing
    for folder in (data, triggers):
        folder.mkdir(parents=True, exist_ok=True)
    config = render_cassandra_config(
        LOCAL_DIR / "cassandra" / "cassandra.yaml",
        host=host,
        native_port=port,
        storage_port=_env_port("CASSANDRA_STORAGE_PORT", 7000),
        data_dir=data,
    )
    return cassandra_command(config, data, triggers, heap="1G")


def render_cassandra_config(
    target: Path, *, host: str, native_port: int, storage_port: int, data_dir: Path,
    cluster_name: str = "devstack", seeds: Sequence[str] = (), cluster_settings: str = "",
) -> Path:
    """Write cassandra.yaml from the template: one node, or (with ``seeds`` and ``cluster_settings``, more
    keys appended) a member of a cluster (``devstack.cluster``)."""
    return _render(
        DEVSTACK_DIR / "cassandra" / "cassandra.yaml",
        target,
        host=host,
        native_port=str(native_port),
        storage_port=str(storage_port),
        data_dir=str(data_dir),
        cluster_name=cluster_name,
        seeds=",".join(seeds) or host,
        cluster_settings=cluster_settings,
    )


def cassandra_command(
    config: Path, data: Path, triggers: Path, *, heap: str, extra: Sequence[str] = (), durable_system: bool = False,
) -> list[str]:
    """The command that starts a Cassandra node on ``config``, with ``extra`` JVM options.

    Without ``durable_system``, the system tables' writes skip the commit log (``cassandra.unsafesystem``):
    schema changes are much faster, and a node stopped cleanly (SIGTERM drains it) loses nothing. A node that
    may be killed (a cluster node, ``kill -9`` by the fault suite) needs them durable: otherwise it comes
    back without the schema and the peers it learnt since its start, answers reads of the newer tables with
    INCOMPATIBLE_SCHEMA, and pulls the schema again only minutes later.
    """
    jamm = sorted(_lib_dir("cassandra").glob("jamm-*.jar"))
    if not jamm:
        raise DevstackError(f"no jamm jar in {_lib_dir('cassandra')}; delete that folder to re-fetch")
    return [
        java_executable(),
        f"-Xms{heap}",
        f"-Xmx{heap}",
        "-Xss256k",
        "-XX:+UseG1GC",
        "-XX:+ParallelRefProcEnabled",
        "-XX:MaxGCPauseMillis=300",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.net.preferIPv4Stack=true",
        "-Djdk.attach.allowAttachSelf=true",
        "-Dio.netty.tryReflectionSetAccessible=true",
        f"@{DEVSTACK_DIR / 'cassandra' / 'jvm17.args'}",
        f"-javaagent:{jamm[-1]}",
        f"-Dcassandra.config={config.as_uri()}",
        f"-Dcassandra.storagedir={data}",
        f"-Dcassandra.triggers_dir={triggers}",
        f"-Dlogback.configurationFile={DEVSTACK_DIR / 'cassandra' / 'logback.xml'}",
        "-Dcassandra-foreground=yes",  # otherwise the daemon closes stdout/stderr
        "-Dcassandra.skip_wait_for_gossip_to_settle=0",
        *([] if durable_system else ["-Dcassandra.unsafesystem=true"]),
        *extra,
        "-cp",
        _classpath("cassandra"),
        "org.apache.cassandra.service.CassandraDaemon",
    ]


def _prepare_kafka() -> list[str]:
    """Render server.properties, format the storage on first use, return the start command."""
    host, port = _kafka_address()
    data = DATA_DIR / "kafka"
    data.mkdir(parents=True, exist_ok=True)
    controller_port = _env_port("KAFKA_CONTROLLER_PORT", 9093)
    config = render_kafka_config(
        LOCAL_DIR / "kafka" / "server.properties", host=host, port=port, controller_port=controller_port, data_dir=data,
    )
    return kafka_command(config, data, LOG_DIR, heap="512m")


def render_kafka_config(
    target: Path, *, host: str, port: int, controller_port: int, data_dir: Path, node_id: int = 1,
    voters: str = "", replication_factor: int = 1, min_insync_replicas: int = 1, cluster_settings: str = "",
) -> Path:
    """Write server.properties from the template: one broker and controller, or (with ``voters`` and a
    replication factor) a member of a KRaft cluster (``devstack.cluster``)."""
    return _render(
        DEVSTACK_DIR / "kafka" / "server.properties",
        target,
        host=host,
        port=str(port),
        controller_port=str(controller_port),
        data_dir=str(data_dir),
        node_id=str(node_id),
        voters=voters or f"{node_id}@{host}:{controller_port}",
        replication_factor=str(replication_factor),
        min_insync_replicas=str(min_insync_replicas),
        cluster_settings=cluster_settings,
    )


def kafka_command(config: Path, data: Path, log_dir: Path, *, heap: str) -> list[str]:
    """The command that starts a Kafka broker on ``config``, formatting ``data`` first if it is new."""
    java = java_executable()
    logging_flag = f"-Dlog4j.configuration={(DEVSTACK_DIR / 'kafka' / 'log4j.properties').as_uri()}"
    if not (data / "meta.properties").is_file():
        log.info("formatting Kafka storage in %s", data)
        format_command = [java, logging_flag, "-cp", _classpath("kafka"), "kafka.tools.StorageTool"]
        format_command += ["format", "-t", KAFKA_CLUSTER_ID, "-c", str(config)]
        result = subprocess.run(format_command, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0:
            raise DevstackError(f"formatting Kafka storage failed:\n{result.stdout}{result.stderr}")
    return [
        java,
        f"-Xms{heap}",
        f"-Xmx{heap}",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:InitiatingHeapOccupancyPercent=35",
        "-XX:+ExplicitGCInvokesConcurrent",
        "-Djava.awt.headless=true",
        logging_flag,
        f"-Dkafka.logs.dir={log_dir}",
        "-cp",
        _classpath("kafka"),
        "kafka.Kafka",
        str(config),
    ]


def _prepare_moto() -> list[str]:
    host, port = _moto_address()
    return [sys.executable, "-m", "devstack.moto_server", "-H", host, "-p", str(port)]


def nodetool(jmx_host: str, jmx_port: int, *args: str, timeout_s: float = 120) -> str:
    """Run Cassandra's nodetool against the JMX agent on ``jmx_host:jmx_port``; returns its output."""
    command = [
        java_executable(), f"@{DEVSTACK_DIR / 'cassandra' / 'jvm17.args'}",
        f"-Dlogback.configurationFile={DEVSTACK_DIR / 'cassandra' / 'logback.xml'}",
        f"-Duser.home={LOCAL_DIR / 'nodetool'}",  # its history file goes there, not to ~/.cassandra
        "-cp", _classpath("cassandra"), "org.apache.cassandra.tools.NodeTool",
        "-h", jmx_host, "-p", str(jmx_port), *args,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if result.returncode != 0:
        raise DevstackError(f"nodetool {' '.join(args)} failed: {result.stdout[-2000:]}{result.stderr[-2000:]}")
    return result.stdout


# --------------------------------------------------------------------------- probes


def _port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def cassandra_release_version(host: str, port: int, timeout: float = 5.0) -> str | None:
    """``release_version`` from ``system.local`` over CQL, or None if Cassandra does not answer."""
    if not _port_open(host, port):
        return None
    # imported lazily: the driver is slow to import
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    # A load-balancing policy named (this one node), or the driver warns at every `make run` and `make test`.
    only = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([host]))
    cluster = Cluster(
        [host], port=port, protocol_version=5, connect_timeout=timeout, control_connection_timeout=timeout,
        execution_profiles={EXEC_PROFILE_DEFAULT: only},
    )
    try:
        session = cluster.connect()
        row = session.execute("SELECT release_version FROM system.local", timeout=timeout).one()
        return None if row is None else str(row.release_version)
    except Exception:
        return None
    finally:
        cluster.shutdown()


def cassandra_answers(host: str, port: int) -> bool:
    return cassandra_release_version(host, port) is not None


def kafka_answers(host: str, port: int) -> bool:
    """True if a Kafka broker answers a metadata request and lists at least one broker."""
    if not _port_open(host, port):
        return False
    from kafka import KafkaAdminClient

    try:
        admin = KafkaAdminClient(
            bootstrap_servers=f"{host}:{port}",
            client_id="devstack-probe",
            request_timeout_ms=5000,
            bootstrap_timeout_ms=5000,
        )
    except Exception:
        return False
    try:
        return bool(admin.describe_cluster().get("brokers"))
    except Exception:
        return False
    finally:
        admin.close()


def moto_answers(host: str, port: int) -> bool:
    """True if moto's own API answers with its JSON configuration."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/moto-api/config", timeout=5) as response:
            return 200 <= response.status < 300 and isinstance(json.load(response), dict)
    except (OSError, ValueError, urllib.error.URLError):
        return False


# --------------------------------------------------------------------------- the servers


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




_SERVERS: dict[str, Server] = {
    "cassandra": Server(
        name="cassandra",
        address=_cassandra_address,
        probe=cassandra_answers,
        prepare=_prepare_cassandra,
        process_marker="org.apache.cassandra.service.CassandraDaemon",
        ready_timeout_s=180.0,
        has_jars=True,
        port_variable="CASSANDRA_PORT",
    ),
    "kafka": Server(
        name="kafka",
        address=_kafka_address,
        probe=kafka_answers,
        prepare=_prepare_kafka,
        process_marker="kafka.Kafka",
        ready_timeout_s=90.0,
        has_jars=True,
        port_variable="KAFKA_PORT",
    ),
    "moto": Server(
        name="moto",
        address=_moto_address,
        probe=moto_answers,
        prepare=_prepare_moto,
        process_marker="devstack.moto_server",
        ready_timeout_s=30.0,
        has_jars=False,
        port_variable="MOTO_PORT",
    ),
}


def _server(name: str) -> Server:
    try:
        return _SERVERS[name]
    except KeyError:
        raise DevstackError(f"unknown server {name!r}; choose one of {', '.join(SERVER_NAMES)}") from None


# --------------------------------------------------------------------------- processes

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
            if _port_open(host, port):
                raise DevstackError(
                    f"{host}:{port} is taken by something that does not answer like {server.name};"
                    f" stop it or set {server.port_variable} to another port"
                )
            if server.has_jars:
                fetch_seconds = fetch_jars(server.jars or server.name)
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


# --------------------------------------------------------------------------- public API


def ensure_cassandra() -> tuple[str, int]:
    """Make sure Cassandra answers CQL; returns its ``(host, port)``."""
    ensure(_SERVERS["cassandra"])
    return _cassandra_address()


def ensure_kafka() -> str:
    """Make sure a Kafka broker answers; returns its bootstrap address ``host:port``."""
    ensure(_SERVERS["kafka"])
    host, port = _kafka_address()
    return f"{host}:{port}"


def ensure_moto() -> str:
    """Make sure moto's AWS mock server answers; returns its endpoint URL."""
    ensure(_SERVERS["moto"])
    host, port = _moto_address()
    return f"http://{host}:{port}"


def ensure_all() -> Endpoints:
    """Make sure all three servers answer, starting them one after the other."""
    cassandra_host, cassandra_port = ensure_cassandra()
    return Endpoints(cassandra_host, cassandra_port, ensure_kafka(), ensure_moto())


def stop(name: str) -> bool:
    """Stop a server devstack started (SIGTERM, then SIGKILL after 60 s).

    Returns False if devstack has no running process for it (a server started some other
    way is left alone).
    """
    return stop_server(_server(name))


def stop_all() -> dict[str, bool]:
    """Stop every server devstack started, moto first and Cassandra last."""
    return {name: stop(name) for name in reversed(SERVER_NAMES)}


def kill(name: str) -> bool:
    """SIGKILL a server devstack started, without a clean shutdown (for fault tests)."""
    return kill_server(_server(name))


def restart(name: str) -> None:
    """Stop a server (if devstack started it) and start it again."""
    server = _server(name)
    if not stop(name) and server.probe(*server.address()):
        log.warning("%s was not started by devstack; leaving it running", name)
    ensure(server)


def status() -> dict[str, bool]:
    """Whether each server answers on its port right now."""
    return {name: server.probe(*server.address()) for name, server in _SERVERS.items()}


# --------------------------------------------------------------------------- command line


def _endpoint_text(name: str) -> str:
    host, port = _SERVERS[name].address()
    return f"http://{host}:{port}" if name == "moto" else f"{host}:{port}"


def _rss_text(pid: int) -> str:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return f"{int(line.split()[1]) / 1024:.0f} MiB"
    except (OSError, ValueError):
        pass
    return "?"


def _print_outcome(outcome: Outcome) -> None:
    if not outcome.started:
        how = f"reused, already running ({outcome.seconds:.1f} s)"
    else:
        how = f"started in {outcome.seconds:.1f} s"
        if outcome.fetch_seconds:
            how += f" (of which {outcome.fetch_seconds:.1f} s fetching jars)"
    print(f"{outcome.name:<10} {_endpoint_text(outcome.name):<24} {how}")


def _cmd_up() -> None:
    for name in SERVER_NAMES:
        _print_outcome(ensure(_SERVERS[name]))
    endpoints = Endpoints(*_cassandra_address(), _endpoint_text("kafka"), _endpoint_text("moto"))
    print()
    print(f"cassandra:  {endpoints.cassandra_host}:{endpoints.cassandra_port}")
    print(f"kafka:      {endpoints.kafka_bootstrap}")
    print(f"dynamodb:   {endpoints.dynamodb_endpoint}")


def _cmd_status() -> None:
    for name, up in status().items():
        pid = managed_pid(_SERVERS[name])
        if pid is not None:
            state, owner = ("up" if up else "not answering"), f"pid {pid}, rss {_rss_text(pid)}"
        elif up:
            state, owner = "up", "not started by devstack"
        else:
            state, owner = "down", ""
        print(f"{name:<10} {state:<13} {_endpoint_text(name):<24} {owner}".rstrip())


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m devstack.servers``."""
    parser = argparse.ArgumentParser(
        prog="python -m devstack.servers", description="Manage the local Cassandra, Kafka and moto servers."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("up", help="start (or reuse) all servers and print their endpoints")
    commands.add_parser("down", help="stop the servers devstack started")
    commands.add_parser("status", help="show which servers answer")
    for command, text in (("restart", "stop and start one server"), ("kill", "SIGKILL one server")):
        commands.add_parser(command, help=text).add_argument("name", choices=SERVER_NAMES)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="devstack: %(message)s", stream=sys.stderr)
    for noisy in ("cassandra", "kafka"):  # client libraries log every refused connection
        logging.getLogger(noisy).setLevel(logging.CRITICAL)

    try:
        if args.command == "up":
            _cmd_up()
        elif args.command == "down":
            for name, stopped in stop_all().items():
                print(f"{name:<10} {'stopped' if stopped else 'was not running (under devstack)'}")
        elif args.command == "status":
            _cmd_status()
        elif args.command == "restart":
            restart(args.name)
            print(f"{args.name:<10} restarted, {_endpoint_text(args.name)}")
        elif args.command == "kill":
            killed = kill(args.name)
            print(f"{args.name:<10} {'killed' if killed else 'was not running (under devstack)'}")
    except DevstackError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
