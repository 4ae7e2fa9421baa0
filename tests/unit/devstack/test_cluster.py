"""The local cluster's configuration: what each node is told, rendered from the single-node templates."""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING

import pytest
import yaml

from chaos.__main__ import ISOLATED
from devstack import cluster, servers
from jobrunner.config import Settings

if TYPE_CHECKING:
    from pathlib import Path


def properties(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def node_yaml(tmp_path: Path, layout: cluster.Layout, index: int) -> dict[str, object]:
    host = layout.cassandra_hosts[index - 1]
    path = servers.render_cassandra_config(
        tmp_path / f"cassandra-{index}.yaml", host=host, native_port=layout.native_port,
        storage_port=layout.storage_port, data_dir=tmp_path / "data", cluster_name=f"devstack-{layout.name}",
        seeds=layout.cassandra_hosts[:layout.seeds], cluster_settings=cluster.cassandra_settings(layout, index))
    loaded: dict[str, object] = yaml.safe_load(path.read_text())
    return loaded


def test_each_cassandra_node_listens_on_its_own_address_seeds_on_the_first_two_and_owns_one_token(
        tmp_path: Path) -> None:
    layout = cluster.CLUSTER
    configs = [node_yaml(tmp_path, layout, i) for i in (1, 2, 3)]

    assert [c["listen_address"] for c in configs] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    assert [c["rpc_address"] for c in configs] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    assert {c["seed_provider"][0]["parameters"][0]["seeds"] for c in configs} == {"127.0.0.2,127.0.0.3"}  # type: ignore[index]
    assert {c["cluster_name"] for c in configs} == {"devstack-cluster"}
    assert {(c["auto_bootstrap"], c["num_tokens"], c["hinted_handoff_enabled"]) for c in configs} == {(False, 1, True)}
    tokens = [c["initial_token"] for c in configs]
    assert tokens == sorted(tokens) and len(set(tokens)) == 3
    # evenly spaced: each node is the primary replica of a third of the ring
    assert tokens == [-(2**63), -(2**63) + 2**64 // 3, -(2**63) + 2 * (2**64 // 3)]


def test_the_single_node_config_is_unchanged_by_the_cluster_placeholders(tmp_path: Path) -> None:
    path = servers.render_cassandra_config(tmp_path / "c.yaml", host="127.0.0.1", native_port=9042, storage_port=7000,
                                           data_dir=tmp_path)
    config = yaml.safe_load(path.read_text())
    assert config["cluster_name"] == "devstack"
    assert config["seed_provider"][0]["parameters"][0]["seeds"] == "127.0.0.1"
    assert not {"initial_token", "auto_bootstrap"} & set(config)

    broker = properties(servers.render_kafka_config(tmp_path / "k.properties", host="127.0.0.1", port=9092,
                                                    controller_port=9093, data_dir=tmp_path))
    assert (broker["node.id"], broker["controller.quorum.voters"]) == ("1", "1@127.0.0.1:9093")
    assert {broker[k] for k in ("default.replication.factor", "min.insync.replicas",
                                "offsets.topic.replication.factor")} == {"1"}


def test_each_broker_is_a_voter_and_topics_keep_three_replicas_two_in_sync(tmp_path: Path) -> None:
    layout = cluster.CLUSTER
    brokers = [properties(servers.render_kafka_config(
        tmp_path / f"k{i}.properties", host=layout.kafka_host, port=layout.kafka_ports[i - 1],
        controller_port=layout.controller_ports[i - 1], data_dir=tmp_path / f"k{i}", node_id=i, voters=layout.voters,
        replication_factor=layout.replication_factor, min_insync_replicas=layout.min_insync_replicas,
        cluster_settings=cluster.kafka_settings())) for i in (1, 2, 3)]

    assert [b["node.id"] for b in brokers] == ["1", "2", "3"]
    assert {b["controller.quorum.voters"] for b in brokers} == {
        "1@127.0.0.1:39192,2@127.0.0.1:39193,3@127.0.0.1:39194"}
    assert brokers[0]["listeners"] == "PLAINTEXT://127.0.0.1:39092,CONTROLLER://127.0.0.1:39192"
    for broker in brokers:
        assert (broker["default.replication.factor"], broker["offsets.topic.replication.factor"],
                broker["transaction.state.log.replication.factor"]) == ("3", "3", "3")
        assert (broker["min.insync.replicas"], broker["transaction.state.log.min.isr"]) == ("2", "2")
        assert broker["unclean.leader.election.enable"] == "false"


def test_the_system_is_pointed_at_every_node_with_the_cluster_settings() -> None:
    settings = Settings.from_env(cluster.CLUSTER.settings())

    assert settings.cassandra.contact_points == ("127.0.0.2", "127.0.0.3", "127.0.0.4")
    assert (settings.cassandra.local_dc, settings.cassandra.replication_factor) == (cluster.DATACENTER, 3)
    assert settings.kafka.bootstrap.split(",") == ["127.0.0.1:39092", "127.0.0.1:39093", "127.0.0.1:39094"]
    assert settings.kafka.topic_replication == 3
    assert settings.cassandra.speculative_delay_ms > 0


def addresses(layout: cluster.Layout) -> set[tuple[str, int]]:
    """Every (address, port) a layout's processes listen on (JMX and Kafka listen on 127.0.0.1)."""
    taken = {(host, port) for host in layout.cassandra_hosts for port in (layout.native_port, layout.storage_port)}
    taken |= {("127.0.0.1", port) for port in (*layout.jmx_ports, *layout.kafka_ports, *layout.controller_ports)}
    return taken | {("127.0.0.1", layout.moto_port)}


@pytest.mark.parametrize(("one", "other"), list(combinations(cluster.LAYOUTS.values(), 2)))
def test_the_two_clusters_can_run_side_by_side(one: cluster.Layout, other: cluster.Layout) -> None:
    assert not addresses(one) & addresses(other)
    assert not set(one.cassandra_hosts) & set(other.cassandra_hosts)


@pytest.mark.parametrize("layout", cluster.LAYOUTS.values())
def test_no_cluster_takes_a_port_of_the_single_node_servers_or_of_the_fault_suites(layout: cluster.Layout) -> None:
    single = {9042, 7000, 9092, 9093, 5001, 8080}
    suites = {int(value) for key, value in ISOLATED.items() if key.endswith("PORT")} | {17199}
    on_loopback_one = {port for host, port in addresses(layout) if host == "127.0.0.1"}
    assert not on_loopback_one & (single | suites)
    assert "127.0.0.1" not in layout.cassandra_hosts


def test_a_cluster_node_writes_its_system_tables_through_the_commit_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A node killed with kill -9 must come back with the schema created since it started: the fault suite
    # met a node that came back without it (its system tables were written without the commit log), and
    # failed every read of the suite's tables with INCOMPATIBLE_SCHEMA for minutes.
    lib = tmp_path / "cassandra" / "lib"
    lib.mkdir(parents=True)
    (lib / "jamm-0.4.0.jar").touch()
    monkeypatch.setattr(servers.settings, "LOCAL_DIR", tmp_path)
    monkeypatch.setattr(servers.settings, "java_executable", lambda: "java")
    layout = cluster.Layout(**{**cluster.CHAOS_CLUSTER.__dict__, "name": "test-cluster"})
    monkeypatch.setattr(cluster.Layout, "home", property(lambda self: tmp_path / self.name))

    command = cluster.nodes(layout)["cassandra-2"].prepare()

    assert "-Dcassandra.unsafesystem=true" not in command
    assert f"-Dcassandra.jmx.local.port={layout.jmx_ports[1]}" in command
    assert (tmp_path / "test-cluster" / "cassandra-2" / "cassandra.yaml").is_file()
    # while the single node, stopped cleanly only, keeps its faster schema changes
    single = servers.cassandra_command(tmp_path / "c.yaml", tmp_path, tmp_path, heap="1G")
    assert "-Dcassandra.unsafesystem=true" in single
