"""How to reach the cluster: ``CassandraSettings``, which ``session.connect`` and ``keyspaces`` both read.

Apart from the modules that build a ``Cluster`` from it, so that neither imports the other for it and the settings
model (``jobrunner.config``) names it without loading the driver.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CassandraSettings:
    contact_points: tuple[str, ...] = ("127.0.0.1",)
    port: int = 9042
    keyspace: str = "jobrunner"
    #: "cassandra" (plain, local or self-managed) or "keyspaces" (Amazon Keyspaces).
    mode: str = "cassandra"
    region: str = "us-east-1"
    ca_bundle: str | None = None
    local_dc: str | None = None
    request_timeout_s: float = 10.0
    #: Opening a connection (the driver's default is 5 s; a busy node can take longer).
    connect_timeout_s: float = 15.0
    #: An existing cluster: a Secrets Manager secret holding {"username": ..., "password": ...}.
    secret_arn: str | None = None
    #: TLS to an existing cluster (verified against ``ca_bundle`` when given, else the system store).
    tls: bool = False
    #: The name every node's certificate must carry, when it is not the address the node is reached at (None:
    #: each connection checks its own node's address, a contact point's name or a peer's IP).
    tls_server_name: str | None = None
    #: A request made after this long without one first replaces the session's connections.
    idle_refresh_s: float = 300.0
    #: Replicas of the keyspace the migration creates (``cql.migrate.replication_for``).
    replication_factor: int = 1
    #: A read not answered within this many ms is also sent to the next node (0: never).
    speculative_delay_ms: int = 0
    #: At most this many extra copies of a read are sent.
    speculative_attempts: int = 1
