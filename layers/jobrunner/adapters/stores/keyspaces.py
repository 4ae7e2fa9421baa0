"""Amazon Keyspaces: TLS on 9142 with the Amazon CA bundle, SigV4 auth, LOCAL_QUORUM, round robin.

Keyspaces' peers are load balancers, so token-aware routing buys nothing; AWS recommends plain round
robin. The CA bundle (Amazon Root CAs and Starfield Class 2) ships in the layer and its path is
``CASSANDRA_CA_BUNDLE``. Every connection checks the certificate's chain and its host name: the peers are
reached by the addresses ``system.peers`` lists, so the name checked is the endpoint's (:func:`endpoint_name`),
passed to the driver as ``ssl_options["server_hostname"]``, which it gives every connection's handshake.

Lightweight transactions carry no serial consistency here: Keyspaces lists SERIAL and LOCAL_SERIAL among the
levels it rejects with an exception, and runs every write, a conditional one too, at LOCAL_QUORUM (its developer
guide: "Supported Apache Cassandra consistency levels", and "lightweight transactions"). The protocol's serial
consistency is optional, so this profile sets none, and no statement sets its own (``stores/cassandra.py``).
"""

from __future__ import annotations

import ssl
from ipaddress import ip_address
from typing import TYPE_CHECKING

import boto3
from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import RoundRobinPolicy
from cassandra_sigv4.auth import SigV4AuthProvider

from jobrunner.adapters.stores.rows import CachedRowFactory

if TYPE_CHECKING:
    from jobrunner.adapters.stores.cassandra_settings import CassandraSettings


def endpoint_name(settings: CassandraSettings) -> str:
    """The name every connection's certificate must carry: the first contact point that is a name (the stack
    gives ``cassandra.<region>.<partition's URL suffix>``), else the region's ``cassandra.<region>.amazonaws.com``."""
    for point in settings.contact_points:
        try:
            ip_address(point)
        except ValueError:
            return point
    return f"cassandra.{settings.region}.amazonaws.com"


def tls_context(ca_bundle: str | None) -> ssl.SSLContext:
    """Verifies the chain against ``ca_bundle`` and the host name the connection names."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED and check_hostname by default
    context.load_verify_locations(ca_bundle)
    context.verify_mode = ssl.CERT_REQUIRED
    context.check_hostname = True
    return context


def execution_profile(settings: CassandraSettings) -> ExecutionProfile:
    """LOCAL_QUORUM, round robin, no serial consistency (see the module's docstring)."""
    return ExecutionProfile(
        consistency_level=ConsistencyLevel.LOCAL_QUORUM,
        serial_consistency_level=None,
        load_balancing_policy=RoundRobinPolicy(),
        request_timeout=settings.request_timeout_s,
        row_factory=CachedRowFactory(),
    )


def keyspaces_cluster(settings: CassandraSettings) -> Cluster:
    endpoint = endpoint_name(settings)
    return Cluster(
        list(settings.contact_points) or [endpoint],
        port=settings.port,
        ssl_context=tls_context(settings.ca_bundle),
        # every connection, to a peer's address too, checks the endpoint's name (the driver otherwise checks the
        # address it connects to, which no certificate of Keyspaces names)
        ssl_options={"server_hostname": endpoint},
        auth_provider=SigV4AuthProvider(boto3.Session(region_name=settings.region)),
        execution_profiles={EXEC_PROFILE_DEFAULT: execution_profile(settings)},
        protocol_version=4,
        control_connection_timeout=settings.connect_timeout_s,  # its schema read, as for Cassandra (session.py)
    )
