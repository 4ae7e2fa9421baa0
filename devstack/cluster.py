"""A local cluster: three Cassandra nodes in one datacenter, three KRaft Kafka brokers, and moto.

It proves on one machine what the single-node servers (``devstack.servers``) cannot: that losing a
database node or a broker is not an outage. Every node is a process of its own, started from the same
jars as the single-node servers, with its configuration rendered from the same templates:

* **Cassandra**: each node on a loopback address of its own (127.0.0.2-4 for ``make cluster``), all on
  the same ports, in SimpleSnitch's single datacenter ``datacenter1``. The first two are seeds. Each node
  owns one token, evenly spaced, so that token-aware routing spreads coordinators evenly; with a
  replication factor of 3 on three nodes every node holds every row anyway.
* **Kafka**: three brokers, each also a KRaft controller (three voters: the quorum survives one down),
  on 127.0.0.1 and ports of their own; internal and new topics have 3 replicas and
  ``min.insync.replicas=2``, so an ``acks=all`` write survives one broker down, and none is lost with it.
* **moto**, as for the single node (DynamoDB is a managed regional service: it has no node to lose).

Everything lives under ``<DEVSTACK_HOME>/<layout name>/`` (``.local/cluster`` for ``make cluster``):
each node's config and data in ``cassandra-N/`` or ``kafka-N/``, console logs in ``logs/``, pid files in
``run/``. The single-node servers' data is never touched.

Fast start, and why each shortcut is safe here:

* every node starts at once (the machine is busy compiling six JVMs either way, and nothing waits);
* ``auto_bootstrap: false`` with explicit ``initial_token``: a node joins the ring with its token at once
  instead of streaming data from the others. Safe only because the cluster is new and empty when the
  nodes first join (there is nothing to stream); after that the flag changes nothing, since a node that
  has joined never bootstraps again. It is why concurrent joins need no
  ``-Dcassandra.consistent.rangemovement=false``: nothing bootstraps;
* ``-Dcassandra.skip_wait_for_gossip_to_settle=0`` (as for the single node): the node does not wait for
  gossip to be quiet before it serves clients; the driver learns the ring from the nodes themselves;
* one token per node: small gossip state and fast start (vnodes buy even data spread when nodes come and
  go, which this fixed cluster does not need).

One shortcut of the single node is *not* taken: ``-Dcassandra.unsafesystem=true`` (system tables written
without the commit log). A node killed with ``kill -9`` would come back without the schema created since
it started, fail every read of those tables with INCOMPATIBLE_SCHEMA and pull the schema again only a
minute or more later: the fault suite met exactly that (``devstack.servers.cassandra_command``).

``python -m devstack.cluster up | down | wipe | status | kill NODE | start NODE`` (``--layout chaos-cluster``
for the fault suite's own cluster); ``make cluster`` starts it and runs the whole system on it.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from devstack import servers

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

log = logging.getLogger(__name__)

#: SimpleSnitch puts every node in this datacenter and rack.
DATACENTER = "datacenter1"
#: The Murmur3 partitioner's token range: [-2**63, 2**63).
TOKEN_RANGE = 2**64
#: How long the whole cluster may take to form on a busy machine.
FORM_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Layout:
    """Where a cluster's nodes answer, and how big they are."""

    name: str
    cassandra_hosts: tuple[str, ...]
    native_port: int
    storage_port: int
    #: One JMX port per node (JMX listens on 127.0.0.1 whatever the node's address is), for nodetool.
    jmx_ports: tuple[int, ...]
    kafka_host: str
    kafka_ports: tuple[int, ...]
    controller_ports: tuple[int, ...]
    moto_port: int
    seeds: int = 2
    replication_factor: int = 3
    min_insync_replicas: int = 2
    cassandra_heap: str = "768m"
    kafka_heap: str = "384m"
    #: A read not answered within this is also sent to another node (``CASSANDRA_SPECULATIVE_DELAY_MS``).
    speculative_delay_ms: int = 250

    @property
    def home(self) -> Path:
        return servers.LOCAL_DIR / self.name

    @property
    def contact_points(self) -> str:
        return ",".join(self.cassandra_hosts)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.kafka_host}:{port}" for port in self.kafka_ports)

    @property
    def dynamodb_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.moto_port}"

    @property
    def voters(self) -> str:
        return ",".join(f"{i}@{self.kafka_host}:{port}" for i, port in enumerate(self.controller_ports, 1))

    def token(self, index: int) -> int:
        """Node ``index``'s token (from 1): evenly spaced over the ring."""
        return -(2**63) + (index - 1) * TOKEN_RANGE // len(self.cassandra_hosts)

    def endpoints(self) -> servers.Endpoints:
        """The cluster as the stack sees it: every node a contact point, every broker a bootstrap server."""
        return servers.Endpoints(self.contact_points, self.native_port, self.bootstrap, self.dynamodb_endpoint)

    def settings(self) -> dict[str, object]:
        """The settings (attributes of ``jobrunner.config.Settings``) that point the system at this cluster."""
        return {
            "contact_points": self.contact_points,
            "cassandra_port": self.native_port,
            "local_dc": DATACENTER,
            "replication_factor": self.replication_factor,
            "speculative_delay_ms": self.speculative_delay_ms,
            "kafka_bootstrap": self.bootstrap,
            "topic_replication": self.replication_factor,
            "dynamodb_endpoint": self.dynamodb_endpoint,
        }


#: ``make cluster``.
CLUSTER = Layout(
    name="cluster", cassandra_hosts=("127.0.0.2", "127.0.0.3", "127.0.0.4"), native_port=39042, storage_port=37000,
    jmx_ports=(37199, 37299, 37399), kafka_host="127.0.0.1", kafka_ports=(39092, 39093, 39094),
    controller_ports=(39192, 39193, 39194), moto_port=35001,
)
#: The cluster fault suite's own (``make chaos-cluster``), so that its kills never hit ``make cluster``'s.
CHAOS_CLUSTER = Layout(
    name="chaos-cluster", cassandra_hosts=("127.0.0.5", "127.0.0.6", "127.0.0.7"), native_port=39042,
    storage_port=37000, jmx_ports=(37499, 37599, 37699), kafka_host="127.0.0.1", kafka_ports=(39095, 39096, 39097),
    controller_ports=(39195, 39196, 39197), moto_port=35002,
)
LAYOUTS = {layout.name: layout for layout in (CLUSTER, CHAOS_CLUSTER)}


# --------------------------------------------------------------------------- configuration


def cassandra_settings(layout: Layout, index: int) -> str:
    """The keys appended to node ``index``'s cassandra.yaml (see the module's docstring for each)."""
    return "\n".join([
        "# A node of the local cluster (devstack/cluster.py).",
        f"initial_token: {layout.token(index)}",
        "auto_bootstrap: false",
        "hinted_handoff_enabled: true",
        "max_hint_window: 3h",
        "",
    ])


def kafka_settings() -> str:
    """The keys appended to each broker's server.properties."""
    return "\n".join([
        "# A broker of the local cluster (devstack/cluster.py).",
        "# Never elect a replica that is not in sync: an acknowledged message is never lost.",
        "unclean.leader.election.enable=false",
        "# A restarted broker takes back its preferred leaderships within 30 s (default 300 s).",
        "leader.imbalance.check.interval.seconds=30",
        "",
    ])


def _cassandra_node(layout: Layout, index: int) -> servers.Server:
    name = f"cassandra-{index}"
    host = layout.cassandra_hosts[index - 1]
    folder = layout.home / name

    def prepare() -> list[str]:
        data, triggers = folder / "data", folder / "triggers"
        for path in (data, triggers):
            path.mkdir(parents=True, exist_ok=True)
        config = servers.render_cassandra_config(
            folder / "cassandra.yaml", host=host, native_port=layout.native_port, storage_port=layout.storage_port,
            data_dir=data, cluster_name=f"devstack-{layout.name}", seeds=layout.cassandra_hosts[:layout.seeds],
            cluster_settings=cassandra_settings(layout, index),
        )
        extra = [f"-Dcassandra.jmx.local.port={layout.jmx_ports[index - 1]}"]
        return servers.cassandra_command(config, data, triggers, heap=layout.cassandra_heap, extra=extra,
                                         durable_system=True)

    return servers.Server(
        name=name, address=lambda: (host, layout.native_port), probe=servers.cassandra_answers, prepare=prepare,
        process_marker="org.apache.cassandra.service.CassandraDaemon", ready_timeout_s=240.0, has_jars=False,
        port_variable="(the cluster layout)", home=layout.home,
    )


def _broker(layout: Layout, node_id: int) -> servers.Server:
    name = f"kafka-{node_id}"
    port, controller_port = layout.kafka_ports[node_id - 1], layout.controller_ports[node_id - 1]
    folder = layout.home / name

    def prepare() -> list[str]:
        data = folder / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = servers.render_kafka_config(
            folder / "server.properties", host=layout.kafka_host, port=port, controller_port=controller_port,
            data_dir=data, node_id=node_id, voters=layout.voters, replication_factor=layout.replication_factor,
            min_insync_replicas=layout.min_insync_replicas, cluster_settings=kafka_settings(),
        )
        return servers.kafka_command(config, data, layout.home / "logs", heap=layout.kafka_heap)

    return servers.Server(
        name=name, address=lambda: (layout.kafka_host, port), probe=servers.kafka_answers, prepare=prepare,
        process_marker="kafka.Kafka", ready_timeout_s=120.0, has_jars=False, port_variable="(the cluster layout)",
        home=layout.home,
    )


def _moto(layout: Layout) -> servers.Server:
    return servers.Server(
        name="moto", address=lambda: ("127.0.0.1", layout.moto_port), probe=servers.moto_answers,
        prepare=lambda: [sys.executable, "-m", "devstack.moto_server", "-H", "127.0.0.1", "-p", str(layout.moto_port)],
        process_marker="devstack.moto_server", ready_timeout_s=30.0, has_jars=False,
        port_variable="(the cluster layout)", home=layout.home,
    )


def nodes(layout: Layout) -> dict[str, servers.Server]:
    """Every process of the cluster by name: cassandra-1..3, kafka-1..3, moto."""
    found = [_cassandra_node(layout, i) for i in range(1, len(layout.cassandra_hosts) + 1)]
    found += [_broker(layout, i) for i in range(1, len(layout.kafka_ports) + 1)]
    found.append(_moto(layout))
    return {server.name: server for server in found}


# --------------------------------------------------------------------------- the cluster as a whole


@dataclass
class Startup:
    """How long the cluster took to answer (or that it was already up)."""

    seconds: float
    started: list[str] = field(default_factory=list)
    #: Each process's own time until it answered, from the common start.
    node_seconds: dict[str, float] = field(default_factory=dict)


def up(layout: Layout) -> Startup:
    """Start every node that does not answer (all at once), then wait until the cluster has formed: every
    Cassandra node sees the others and agrees on the schema, every broker is registered."""
    began = time.monotonic()
    for jars in ("cassandra", "kafka"):
        servers.fetch_jars(jars)
    layout.home.mkdir(parents=True, exist_ok=True)
    members = nodes(layout)
    with ThreadPoolExecutor(max_workers=len(members)) as pool:
        outcomes = list(pool.map(servers.ensure, members.values()))
    wait_formed(layout, deadline=time.monotonic() + FORM_TIMEOUT_S)
    return Startup(
        seconds=time.monotonic() - began, started=[o.name for o in outcomes if o.started],
        node_seconds={o.name: o.seconds for o in outcomes},
    )


def wait_formed(layout: Layout, deadline: float) -> None:
    """Wait until every Cassandra node lists the others as up and agrees on the schema, and every broker
    is registered with the controllers."""
    while True:
        problem = cassandra_problem(layout) or kafka_problem(layout)
        if problem is None:
            return
        if time.monotonic() > deadline:
            raise servers.DevstackError(f"the cluster {layout.name} did not form: {problem}")
        time.sleep(servers.POLL_INTERVAL_S)


def cassandra_problem(layout: Layout) -> str | None:
    """Why the Cassandra nodes are not one healthy ring, or None: each must see every other up (gossip)."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    for host in layout.cassandra_hosts:
        only = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([host]))
        cluster = Cluster([host], port=layout.native_port, protocol_version=4, connect_timeout=5,
                          execution_profiles={EXEC_PROFILE_DEFAULT: only})
        try:
            session = cluster.connect()
            peers = session.execute("SELECT peer, schema_version FROM system.peers", timeout=5).all()
            local = session.execute("SELECT schema_version FROM system.local", timeout=5).one()
        except Exception as exc:
            return f"{host}: {type(exc).__name__}: {exc}"
        finally:
            cluster.shutdown()
        others = {str(p.peer) for p in peers}
        if others != set(layout.cassandra_hosts) - {host}:
            return f"{host} knows peers {sorted(others)}"
        versions = {p.schema_version for p in peers} | {local.schema_version}
        if len(versions) != 1:
            return f"{host} sees {len(versions)} schema versions"
    return None


def kafka_problem(layout: Layout) -> str | None:
    """Why the brokers are not one healthy cluster, or None: every broker must be registered."""
    from kafka import KafkaAdminClient

    try:
        admin = KafkaAdminClient(bootstrap_servers=layout.bootstrap.split(","), client_id="devstack-cluster",
                                 request_timeout_ms=5000)
    except Exception as exc:
        return f"Kafka: {type(exc).__name__}: {exc}"
    try:
        brokers = admin.describe_cluster().get("brokers", [])
    except Exception as exc:
        return f"Kafka: {type(exc).__name__}: {exc}"
    finally:
        admin.close()
    if len(brokers) != len(layout.kafka_ports):
        return f"{len(brokers)} of {len(layout.kafka_ports)} brokers registered"
    return None


def down(layout: Layout) -> dict[str, bool]:
    """Stop every node devstack started for ``layout`` (all at once: each waits for its own shutdown)."""
    members = nodes(layout)
    with ThreadPoolExecutor(max_workers=len(members)) as pool:
        return dict(zip(members, pool.map(servers.stop_server, members.values()), strict=True))


def wipe(layout: Layout) -> None:
    """Delete every node's configuration and data (a new, empty cluster at the next ``up``); its nodes must be down."""
    members = nodes(layout)
    running = [name for name, server in members.items() if servers.managed_pid(server) is not None]
    if running:
        raise servers.DevstackError(f"{', '.join(running)} still running: stop the cluster before wiping it")
    for name in members:
        shutil.rmtree(layout.home / name, ignore_errors=True)


def status(layout: Layout) -> dict[str, bool]:
    """Whether each node answers right now."""
    return {name: server.probe(*server.address()) for name, server in nodes(layout).items()}


def kill(layout: Layout, name: str) -> bool:
    """``kill -9`` one node (no clean shutdown): False if devstack was not running it."""
    return servers.kill_server(_member(layout, name))


def start(layout: Layout, name: str) -> servers.Outcome:
    """Start one node again (or find it running) and wait until it answers."""
    return servers.ensure(_member(layout, name))


def pid(layout: Layout, name: str) -> int | None:
    return servers.managed_pid(_member(layout, name))


def _member(layout: Layout, name: str) -> servers.Server:
    members = nodes(layout)
    if name not in members:
        raise servers.DevstackError(f"no node {name!r} in {layout.name}; choose one of {', '.join(members)}")
    return members[name]


# --------------------------------------------------------------------------- command line


def _print_status(layout: Layout) -> None:
    for name, server in nodes(layout).items():
        host, port = server.address()
        up_now = server.probe(host, port)
        process = servers.managed_pid(server)
        state = "up" if up_now else ("not answering" if process else "down")
        owner = f"pid {process}" if process else ("not started by devstack" if up_now else "")
        print(f"{name:<12} {state:<13} {host}:{port:<8} {owner}".rstrip())


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m devstack.cluster``."""
    parser = argparse.ArgumentParser(prog="python -m devstack.cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("--layout", choices=sorted(LAYOUTS), default=CLUSTER.name)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("up", help="start (or reuse) every node and wait until the cluster has formed")
    commands.add_parser("down", help="stop every node")
    commands.add_parser("wipe", help="delete every node's data (the cluster must be down)")
    commands.add_parser("status", help="which nodes answer")
    for command, text in (("kill", "kill -9 one node"), ("start", "start one node again")):
        commands.add_parser(command, help=text).add_argument("node")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="devstack: %(message)s", stream=sys.stderr)
    for noisy in ("cassandra", "kafka"):  # client libraries log every refused connection
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    layout = LAYOUTS[args.layout]
    try:
        if args.command == "up":
            startup = up(layout)
            began = "started" if startup.started else "already running"
            print(f"cluster {layout.name} {began}: formed after {startup.seconds:.1f} s")
            _print_status(layout)
        elif args.command == "down":
            for name, stopped in down(layout).items():
                print(f"{name:<12} {'stopped' if stopped else 'was not running (under devstack)'}")
        elif args.command == "wipe":
            wipe(layout)
            print(f"cluster {layout.name}: every node's data deleted")
        elif args.command == "status":
            _print_status(layout)
        elif args.command == "kill":
            print(f"{args.node:<12} {'killed' if kill(layout, args.node) else 'was not running (under devstack)'}")
        elif args.command == "start":
            outcome = start(layout, args.node)
            print(f"{args.node:<12} {'started' if outcome.started else 'already running'} "
                  f"({outcome.seconds:.1f} s)")
    except servers.DevstackError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
