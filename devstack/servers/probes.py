"""Whether a server answers: a real protocol request each (a CQL query, a Kafka metadata request, moto's
own API), not just a TCP connect, so that a half-started server or a stranger on the port is not taken
for ready."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def cassandra_release_version(host: str, port: int, timeout: float = 5.0) -> str | None:
    """``release_version`` from ``system.local`` over CQL, or None if Cassandra does not answer."""
    if not port_open(host, port):
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
    if not port_open(host, port):
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

