"""The keyspace's replication, as the migration creates it."""

from __future__ import annotations

from cql.migrate import replication_for


def test_a_single_node_keeps_its_one_replica_and_keyspaces_its_own_strategy() -> None:
    assert replication_for("cassandra") == "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    assert replication_for("keyspaces", 3, "datacenter1") == "{'class': 'SingleRegionStrategy'}"


def test_a_cluster_with_a_named_datacenter_has_its_replicas_there() -> None:
    assert replication_for("cassandra", 3, "dc1") == "{'class': 'NetworkTopologyStrategy', 'dc1': 3}"
    assert replication_for("cassandra", 3) == "{'class': 'SimpleStrategy', 'replication_factor': 3}"
