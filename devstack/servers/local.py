"""The three single-node servers of ``make run`` and the tests (Cassandra, Kafka, moto), and what callers
use: make sure they answer (``ensure_all``), stop, kill or restart one, and whether each answers now."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from devstack.servers.commands import prepare_cassandra, prepare_kafka, prepare_moto
from devstack.servers.probes import cassandra_answers, kafka_answers, moto_answers
from devstack.servers.process import Server, ensure, kill_server, stop_server
from devstack.servers.settings import (
    SERVER_NAMES,
    DevstackError,
    cassandra_address,
    kafka_address,
    moto_address,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Endpoints:
    """Where the local servers answer."""

    cassandra_host: str
    cassandra_port: int
    kafka_bootstrap: str
    dynamodb_endpoint: str


SERVERS: dict[str, Server] = {
    "cassandra": Server(
        name="cassandra",
        address=cassandra_address,
        probe=cassandra_answers,
        prepare=prepare_cassandra,
        process_marker="org.apache.cassandra.service.CassandraDaemon",
        ready_timeout_s=180.0,
        has_jars=True,
        port_variable="CASSANDRA_PORT",
    ),
    "kafka": Server(
        name="kafka",
        address=kafka_address,
        probe=kafka_answers,
        prepare=prepare_kafka,
        process_marker="kafka.Kafka",
        ready_timeout_s=90.0,
        has_jars=True,
        port_variable="KAFKA_PORT",
    ),
    "moto": Server(
        name="moto",
        address=moto_address,
        probe=moto_answers,
        prepare=prepare_moto,
        process_marker="devstack.moto_server",
        ready_timeout_s=30.0,
        has_jars=False,
        port_variable="MOTO_PORT",
    ),
}


def _server(name: str) -> Server:
    try:
        return SERVERS[name]
    except KeyError:
        raise DevstackError(f"unknown server {name!r}; choose one of {', '.join(SERVER_NAMES)}") from None



def ensure_cassandra() -> tuple[str, int]:
    """Make sure Cassandra answers CQL; returns its ``(host, port)``."""
    ensure(SERVERS["cassandra"])
    return cassandra_address()


def ensure_kafka() -> str:
    """Make sure a Kafka broker answers; returns its bootstrap address ``host:port``."""
    ensure(SERVERS["kafka"])
    host, port = kafka_address()
    return f"{host}:{port}"


def ensure_moto() -> str:
    """Make sure moto's AWS mock server answers; returns its endpoint URL."""
    ensure(SERVERS["moto"])
    host, port = moto_address()
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
    return {name: server.probe(*server.address()) for name, server in SERVERS.items()}

