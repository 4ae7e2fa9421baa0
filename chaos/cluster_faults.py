"""What the cluster fault suite does to the cluster, and how it sees the cluster heal, without root.

- **A node killed.** ``kill -9`` of a Cassandra node's or a Kafka broker's process (``devstack.cluster``):
  no shutdown hook runs, open connections are reset, and what the process held in memory is gone (a
  Cassandra node replays its commit log when it starts again; a broker recovers its log).
- **Hinted handoff.** While a replica is down (or does not answer a write in time), the coordinator of
  each write keeps a hint for it; once the node is back, the others replay their hints to it. The suite
  reads each live node's ``system_views.pending_hints`` (files of hints per target node): the node is
  consistent again when no node holds a hint for it any more.
- **Kafka's view.** Which broker leads which partition, and which replicas are in sync, from the
  brokers' own metadata (``describe_topics``): a broker is back in full when every partition it holds has
  it in its in-sync replicas again.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import RoundRobinPolicy
from kafka import KafkaAdminClient

from devstack import cluster

if TYPE_CHECKING:
    from collections.abc import Callable

log = logging.getLogger(__name__)

#: How often the suite looks at the cluster while it waits for it to heal.
POLL_S = 1.0
#: A node keeps new hints in memory and writes them to files every 10 s (``hints_flush_period``): no
#: pending hint file for longer than that means none is left to deliver.
HINTS_SETTLE_S = 15.0


@dataclass(frozen=True)
class Partition:
    topic: str
    index: int
    leader: int  # -1: none
    replicas: tuple[int, ...]
    in_sync: tuple[int, ...]


class ClusterWatch:
    """The suite's own clients of the cluster (never the system's): kills, restarts and health."""

    def __init__(self, layout: cluster.Layout) -> None:
        self.layout = layout
        profile = ExecutionProfile(load_balancing_policy=RoundRobinPolicy(), request_timeout=10)
        self._cassandra = Cluster(list(layout.cassandra_hosts), port=layout.native_port, protocol_version=4,
                                  execution_profiles={EXEC_PROFILE_DEFAULT: profile})
        self._session = self._cassandra.connect()

    def close(self) -> None:
        self._cassandra.shutdown()

    # -- processes ------------------------------------------------------------------------------

    def kill(self, name: str) -> None:
        if not cluster.kill(self.layout, name):
            raise RuntimeError(f"{name} was not running under devstack: nothing to kill")

    def start(self, name: str) -> None:
        cluster.start(self.layout, name)

    # -- Cassandra ------------------------------------------------------------------------------

    def host_id(self, name: str) -> Any:
        address = self._address(name)
        for host in self._cassandra.metadata.all_hosts():
            if host.address == address:
                return host.host_id
        raise RuntimeError(f"the driver does not know {name} ({address})")

    def pending_hints(self, target: Any) -> int | None:
        """Files of hints the live nodes hold for the node ``target`` (a host id); None if a node did not answer."""
        total = 0
        for host in self._cassandra.metadata.all_hosts():
            if host.host_id == target or not host.is_up:
                continue
            try:
                rows = self._session.execute("SELECT files FROM system_views.pending_hints WHERE host_id = %s",
                                             (target,), host=host)
            except Exception as exc:
                log.info("pending hints of %s unknown: %s", host.address, exc)
                return None
            total += sum(row.files or 0 for row in rows)
        return total

    def cassandra_up(self, name: str) -> bool:
        """Whether the suite's own driver sees the node up again (it reconnects within seconds)."""
        address = self._address(name)
        return any(h.address == address and h.is_up for h in self._cassandra.metadata.all_hosts())

    def _address(self, name: str) -> str:
        return self.layout.cassandra_hosts[int(name.rsplit("-", 1)[1]) - 1]

    # -- Kafka ----------------------------------------------------------------------------------

    def partitions(self, topics: list[str] | None = None) -> list[Partition]:
        admin = KafkaAdminClient(bootstrap_servers=self.layout.bootstrap.split(","), client_id="chaos-cluster",
                                 request_timeout_ms=5000)
        try:
            described = admin.describe_topics(topics)
        finally:
            admin.close()
        return [Partition(t["name"], p["partition_index"], p["leader_id"], tuple(p["replica_nodes"]),
                          tuple(p["isr_nodes"]))
                for t in described for p in t["partitions"]]

    def busiest_leader(self, topic: str = "jobs") -> tuple[str, list[int]]:
        """The broker leading the most partitions of ``topic``, and those partitions."""
        led = [p for p in self.partitions([topic]) if p.leader >= 0]
        broker, _ = Counter(p.leader for p in led).most_common(1)[0]
        return f"kafka-{broker}", sorted(p.index for p in led if p.leader == broker)

    def led_by(self, broker: str, topic: str = "jobs") -> list[int]:
        node_id = int(broker.rsplit("-", 1)[1])
        return sorted(p.index for p in self.partitions([topic]) if p.leader == node_id)

    def kafka_in_sync(self) -> bool:
        """Every partition of every topic has a leader and all its replicas in sync."""
        return all(p.leader >= 0 and set(p.in_sync) == set(p.replicas) for p in self.partitions())

    def kafka_balanced(self) -> bool:
        """Every partition is led by its preferred replica (the first), as before any broker died."""
        return all(p.leader == p.replicas[0] for p in self.partitions())


def wait_until(condition: Callable[[], bool | None], timeout_s: float) -> float | None:
    """Seconds until ``condition()`` held (checked every second), or None if it did not within ``timeout_s``."""
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        with contextlib.suppress(Exception):
            if condition():
                return time.monotonic() - began
        time.sleep(POLL_S)
    return None


def wait_drained(count: Callable[[], int | None], timeout_s: float, settle_s: float = HINTS_SETTLE_S) -> float | None:
    """Seconds until ``count()`` last fell to 0 and then stayed 0 for ``settle_s`` (None: not within
    ``timeout_s``). An unknown count (None) is neither 0 nor more."""
    began = time.monotonic()
    zero_since: float | None = None
    while time.monotonic() - began < timeout_s:
        try:
            value = count()
        except Exception:
            value = None
        now = time.monotonic()
        if value is not None and value > 0:
            zero_since = None
        elif value == 0 and zero_since is None:
            zero_since = now
        if zero_since is not None and now - zero_since >= settle_s:
            return zero_since - began
        time.sleep(POLL_S)
    return None
