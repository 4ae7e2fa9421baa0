"""The servers' config files, rendered from the templates in ``devstack/cassandra`` and ``devstack/kafka``
(``${name}`` placeholders): one node each, or a member of a cluster (``devstack.cluster``)."""

from __future__ import annotations

import string
from typing import TYPE_CHECKING

from devstack.servers.settings import DEVSTACK_DIR

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


def render(template: Path, target: Path, **values: str) -> Path:
    """Fill the ``${name}`` placeholders of ``template`` and write the result to ``target``."""
    text = string.Template(template.read_text()).substitute(values)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target



def render_cassandra_config(
    target: Path, *, host: str, native_port: int, storage_port: int, data_dir: Path,
    cluster_name: str = "devstack", seeds: Sequence[str] = (), cluster_settings: str = "",
) -> Path:
    """Write cassandra.yaml from the template: one node, or (with ``seeds`` and ``cluster_settings``, more
    keys appended) a member of a cluster (``devstack.cluster``)."""
    return render(
        DEVSTACK_DIR / "cassandra" / "cassandra.yaml",
        target,
        host=host,
        native_port=str(native_port),
        storage_port=str(storage_port),
        data_dir=str(data_dir),
        cluster_name=cluster_name,
        seeds=",".join(seeds) or host,
        cluster_settings=cluster_settings,
    )



def render_kafka_config(
    target: Path, *, host: str, port: int, controller_port: int, data_dir: Path, node_id: int = 1,
    voters: str = "", replication_factor: int = 1, min_insync_replicas: int = 1, cluster_settings: str = "",
) -> Path:
    """Write server.properties from the template: one broker and controller, or (with ``voters`` and a
    replication factor) a member of a KRaft cluster (``devstack.cluster``)."""
    return render(
        DEVSTACK_DIR / "kafka" / "server.properties",
        target,
        host=host,
        port=str(port),
        controller_port=str(controller_port),
        data_dir=str(data_dir),
        node_id=str(node_id),
        voters=voters or f"{node_id}@{host}:{controller_port}",
        replication_factor=str(replication_factor),
        min_insync_replicas=str(min_insync_replicas),
        cluster_settings=cluster_settings,
    )

