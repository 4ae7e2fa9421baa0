"""The command lines that start the servers (and Cassandra's nodetool): the JVM options, the classpath of
the fetched jars, and for the single-node servers the config rendered for this machine first."""

from __future__ import annotations

import logging
import subprocess
import sys
from typing import TYPE_CHECKING

from devstack.servers import settings
from devstack.servers.configs import render_cassandra_config, render_kafka_config
from devstack.servers.settings import DEVSTACK_DIR, DevstackError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

log = logging.getLogger(__name__)

# Any fixed 16-byte id in Kafka's url-safe base64 form; the storage is formatted only once.
KAFKA_CLUSTER_ID = "ZGV2c3RhY2stam9icnVubg"


def prepare_cassandra() -> list[str]:
    """Render cassandra.yaml and return the command that starts Cassandra."""
    host, port = settings.cassandra_address()
    data = settings.DATA_DIR / "cassandra"
    triggers = settings.LOCAL_DIR / "cassandra" / "triggers"  # Cassandra warns every minute if it is missing
    for folder in (data, triggers):
        folder.mkdir(parents=True, exist_ok=True)
    config = render_cassandra_config(
        settings.LOCAL_DIR / "cassandra" / "cassandra.yaml",
        host=host,
        native_port=port,
        storage_port=settings.env_port("CASSANDRA_STORAGE_PORT", 7000),
        data_dir=data,
    )
    return cassandra_command(config, data, triggers, heap="1G")



def cassandra_command(
    config: Path, data: Path, triggers: Path, *, heap: str, extra: Sequence[str] = (), durable_system: bool = False,
) -> list[str]:
    """The command that starts a Cassandra node on ``config``, with ``extra`` JVM options.

    Without ``durable_system``, the system tables' writes skip the commit log (``cassandra.unsafesystem``):
    schema changes are much faster, and a node stopped cleanly (SIGTERM drains it) loses nothing. A node that
    may be killed (a cluster node, ``kill -9`` by the fault suite) needs them durable: otherwise it comes
    back without the schema and the peers it learnt since its start, answers reads of the newer tables with
    INCOMPATIBLE_SCHEMA, and pulls the schema again only minutes later.
    """
    jamm = sorted(settings.lib_dir("cassandra").glob("jamm-*.jar"))
    if not jamm:
        raise DevstackError(f"no jamm jar in {settings.lib_dir('cassandra')}; delete that folder to re-fetch")
    return [
        settings.java_executable(),
        f"-Xms{heap}",
        f"-Xmx{heap}",
        "-Xss256k",
        "-XX:+UseG1GC",
        "-XX:+ParallelRefProcEnabled",
        "-XX:MaxGCPauseMillis=300",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.net.preferIPv4Stack=true",
        "-Djdk.attach.allowAttachSelf=true",
        "-Dio.netty.tryReflectionSetAccessible=true",
        f"@{DEVSTACK_DIR / 'cassandra' / 'jvm17.args'}",
        f"-javaagent:{jamm[-1]}",
        f"-Dcassandra.config={config.as_uri()}",
        f"-Dcassandra.storagedir={data}",
        f"-Dcassandra.triggers_dir={triggers}",
        f"-Dlogback.configurationFile={DEVSTACK_DIR / 'cassandra' / 'logback.xml'}",
        "-Dcassandra-foreground=yes",  # otherwise the daemon closes stdout/stderr
        "-Dcassandra.skip_wait_for_gossip_to_settle=0",
        *([] if durable_system else ["-Dcassandra.unsafesystem=true"]),
        *extra,
        "-cp",
        settings.classpath("cassandra"),
        "org.apache.cassandra.service.CassandraDaemon",
    ]



def prepare_kafka() -> list[str]:
    """Render server.properties, format the storage on first use, return the start command."""
    host, port = settings.kafka_address()
    data = settings.DATA_DIR / "kafka"
    data.mkdir(parents=True, exist_ok=True)
    controller_port = settings.env_port("KAFKA_CONTROLLER_PORT", 9093)
    config = render_kafka_config(
        settings.LOCAL_DIR / "kafka" / "server.properties", host=host, port=port, controller_port=controller_port,
        data_dir=data,
    )
    return kafka_command(config, data, settings.LOG_DIR, heap="512m")



def kafka_command(config: Path, data: Path, log_dir: Path, *, heap: str) -> list[str]:
    """The command that starts a Kafka broker on ``config``, formatting ``data`` first if it is new."""
    java = settings.java_executable()
    logging_flag = f"-Dlog4j.configuration={(DEVSTACK_DIR / 'kafka' / 'log4j.properties').as_uri()}"
    if not (data / "meta.properties").is_file():
        log.info("formatting Kafka storage in %s", data)
        format_command = [java, logging_flag, "-cp", settings.classpath("kafka"), "kafka.tools.StorageTool"]
        format_command += ["format", "-t", KAFKA_CLUSTER_ID, "-c", str(config)]
        result = subprocess.run(format_command, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0:
            raise DevstackError(f"formatting Kafka storage failed:\n{result.stdout}{result.stderr}")
    return [
        java,
        f"-Xms{heap}",
        f"-Xmx{heap}",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:InitiatingHeapOccupancyPercent=35",
        "-XX:+ExplicitGCInvokesConcurrent",
        "-Djava.awt.headless=true",
        logging_flag,
        f"-Dkafka.logs.dir={log_dir}",
        "-cp",
        settings.classpath("kafka"),
        "kafka.Kafka",
        str(config),
    ]



def prepare_moto() -> list[str]:
    host, port = settings.moto_address()
    return [sys.executable, "-m", "devstack.moto_server", "-H", host, "-p", str(port)]



def nodetool(jmx_host: str, jmx_port: int, *args: str, timeout_s: float = 120) -> str:
    """Run Cassandra's nodetool against the JMX agent on ``jmx_host:jmx_port``; returns its output."""
    command = [
        settings.java_executable(), f"@{DEVSTACK_DIR / 'cassandra' / 'jvm17.args'}",
        f"-Dlogback.configurationFile={DEVSTACK_DIR / 'cassandra' / 'logback.xml'}",
        f"-Duser.home={settings.LOCAL_DIR / 'nodetool'}",  # its history file goes there, not to ~/.cassandra
        "-cp", settings.classpath("cassandra"), "org.apache.cassandra.tools.NodeTool",
        "-h", jmx_host, "-p", str(jmx_port), *args,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if result.returncode != 0:
        raise DevstackError(f"nodetool {' '.join(args)} failed: {result.stdout[-2000:]}{result.stderr[-2000:]}")
    return result.stdout

