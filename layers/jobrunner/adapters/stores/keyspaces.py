"""Amazon Keyspaces: TLS on 9142 with the Amazon CA bundle, SigV4 auth, LOCAL_QUORUM, round robin.

Keyspaces' peers are load balancers, so token-aware routing buys nothing; AWS recommends plain round
robin. The CA bundle (Amazon Root CAs and Starfield Class 2) ships in the layer and its path is
``CASSANDRA_CA_BUNDLE``.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

import boto3
from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import RoundRobinPolicy
from cassandra_sigv4.auth import SigV4AuthProvider

from jobrunner.adapters.stores.rows import CachedRowFactory

if TYPE_CHECKING:
    from jobrunner.adapters.stores.session import CassandraSettings


def keyspaces_cluster(settings: CassandraSettings) -> Cluster:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(settings.ca_bundle)
    context.verify_mode = ssl.CERT_REQUIRED
    context.check_hostname = False  # the peers are load-balancer IPs, not the endpoint's name
    profile = ExecutionProfile(
        consistency_level=ConsistencyLevel.LOCAL_QUORUM,
        load_balancing_policy=RoundRobinPolicy(),
        request_timeout=settings.request_timeout_s,
        row_factory=CachedRowFactory(),
    )
    return Cluster(
        list(settings.contact_points) or [f"cassandra.{settings.region}.amazonaws.com"],
        port=settings.port,
        ssl_context=context,
        auth_provider=SigV4AuthProvider(boto3.Session(region_name=settings.region)),
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        protocol_version=4,
    )
