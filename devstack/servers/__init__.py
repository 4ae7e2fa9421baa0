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

The package, by responsibility: ``settings`` (folders, addresses, the JDK), ``fetch`` (the jars, by Maven),
``configs`` (config files from the templates), ``commands`` (the start command lines, nodetool), ``probes``
(does a server answer), ``process`` (pid files, locks, start, wait, stop), ``local`` (the three servers
and the functions above) and ``cli`` (the command line). Everything callers use is importable from here.
"""

from __future__ import annotations

from devstack.servers.cli import main
from devstack.servers.commands import KAFKA_CLUSTER_ID, cassandra_command, kafka_command, nodetool
from devstack.servers.configs import render_cassandra_config, render_kafka_config
from devstack.servers.fetch import MAVEN_COPY_GOAL, fetch_jars
from devstack.servers.local import (
    Endpoints,
    ensure_all,
    ensure_cassandra,
    ensure_kafka,
    ensure_moto,
    kill,
    restart,
    status,
    stop,
    stop_all,
)
from devstack.servers.probes import cassandra_answers, cassandra_release_version, kafka_answers, moto_answers
from devstack.servers.process import (
    STOP_TIMEOUT_S,
    Outcome,
    Server,
    ensure,
    kill_server,
    managed_pid,
    stop_server,
)
from devstack.servers.settings import (
    DATA_DIR,
    DEBIAN_JAVA_17,
    DEVSTACK_DIR,
    LOCAL_DIR,
    LOG_DIR,
    LOG_TAIL_LINES,
    POLL_INTERVAL_S,
    REPO_ROOT,
    RUN_DIR,
    SERVER_NAMES,
    DevstackError,
    java_executable,
)

__all__ = [
    "DATA_DIR", "DEBIAN_JAVA_17", "DEVSTACK_DIR", "KAFKA_CLUSTER_ID", "LOCAL_DIR", "LOG_DIR", "LOG_TAIL_LINES",
    "MAVEN_COPY_GOAL", "POLL_INTERVAL_S", "REPO_ROOT", "RUN_DIR", "SERVER_NAMES", "STOP_TIMEOUT_S",
    "DevstackError", "Endpoints", "Outcome", "Server",
    "cassandra_answers", "cassandra_command", "cassandra_release_version", "ensure", "ensure_all",
    "ensure_cassandra", "ensure_kafka", "ensure_moto", "fetch_jars", "java_executable", "kafka_answers",
    "kafka_command", "kill", "kill_server", "main", "managed_pid", "moto_answers", "nodetool",
    "render_cassandra_config", "render_kafka_config", "restart", "status", "stop", "stop_all", "stop_server",
]
