"""Faults the operations suite injects into the real servers, without root.

- **Writes fail, reads work (Cassandra).** The node's write stage (``MutationStage``, which applies every
  mutation, batch, batchlog entry and Paxos round) is resized to zero threads with ``nodetool
  setconcurrency``: every write then times out at the coordinator (``WriteTimeout`` after
  ``write_request_timeout``) while reads, served by ``ReadStage``, answer as usual. Resizing it back
  ends the outage. A write that timed out may still be applied when the stage comes back, as a
  timed-out write may be in any Cassandra cluster. JMX, which nodetool needs, is off in devstack's
  Cassandra; the suite turns it on in the running node with ``jcmd <pid> ManagementAgent.start``
  (the JDK's attach mechanism: the same user, no restart), on loopback only.
- **An unpublishable topic (Kafka).** The topic exists and stays allow-listed, but its
  ``max.message.bytes`` is set below the size of any record, so the broker refuses every record sent
  to it (``MESSAGE_TOO_LARGE``, not retriable). The chaos broker auto-creates topics, so deleting the
  topic would not make it unpublishable.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
from pathlib import Path

from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from devstack import servers

log = logging.getLogger(__name__)

JMX_PORT = int(os.environ.get("CHAOS_JMX_PORT", "17199"))
WRITE_STAGE = "MutationStage"
#: The write stage's size in devstack's cassandra.yaml (``concurrent_writes``).
CONFIGURED_WRITE_THREADS = 8


class FaultError(RuntimeError):
    """A fault could not be injected or taken back."""


class CassandraWrites:
    """Stops and restarts the writes of the suite's Cassandra node (see the module's docstring)."""

    def __init__(self, host: str = "127.0.0.1", jmx_port: int = JMX_PORT) -> None:
        self._host = host
        self._port = jmx_port
        self._java = servers.java_executable()
        self.threads: int | None = None  # the write stage's size before the outage
        self.stopped = False

    def enable_jmx(self) -> None:
        """Start the JMX agent in the running node (once: a node reused from an earlier run has it)."""
        if self._jmx_open():
            return
        pid_file = servers.RUN_DIR / "cassandra.pid"
        try:
            pid = int(pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError) as exc:
            raise FaultError(f"the Cassandra on the suite's port was not started from {servers.LOCAL_DIR}"
                             f" (is another run using these ports?): {exc}") from exc
        jcmd = Path(self._java).with_name("jcmd")
        options = [f"jmxremote.port={self._port}", f"jmxremote.rmi.port={self._port}", f"jmxremote.host={self._host}",
                   "jmxremote.authenticate=false", "jmxremote.ssl=false"]
        result = subprocess.run([str(jcmd), str(pid), "ManagementAgent.start", *options],
                                capture_output=True, text=True, timeout=60, check=False)
        if result.returncode != 0 or not self._jmx_open():
            raise FaultError(f"could not start JMX in Cassandra (pid {pid}): {result.stdout}{result.stderr}")

    def open(self) -> None:
        """Make sure the node takes writes, and note the write stage's size for ``stop``: a node reused
        from a run that ended in its outage (killed before it could resume) still has a stage of 0."""
        self.threads = self.write_threads()
        if self.threads == 0:
            log.warning("%s had 0 threads (a run stopped mid-outage?): resized to %d", WRITE_STAGE,
                        CONFIGURED_WRITE_THREADS)
            self.threads = CONFIGURED_WRITE_THREADS
            self.resume()

    def stop(self) -> None:
        """Stop the writes: one nodetool call when ``open`` has read the stage's size already (each call starts
        a JVM, which takes tens of seconds on a loaded machine)."""
        if self.threads is None:
            self.threads = self.write_threads()
        self.stopped = True
        self._nodetool("setconcurrency", WRITE_STAGE, "0")
        log.info("Cassandra writes stopped (%s resized from %d to 0)", WRITE_STAGE, self.threads)

    def resume(self) -> None:
        self._nodetool("setconcurrency", WRITE_STAGE, str(self.threads or CONFIGURED_WRITE_THREADS))
        self.stopped = False
        log.info("Cassandra writes resumed")

    def write_threads(self) -> int:
        output = self._nodetool("getconcurrency", WRITE_STAGE)
        match = re.search(rf"^{WRITE_STAGE}\s+\d+\s+(\d+)\s*$", output, re.MULTILINE)
        if match is None:
            raise FaultError(f"unexpected nodetool output: {output!r}")
        return int(match.group(1))

    def _nodetool(self, *args: str) -> str:
        try:
            return servers.nodetool(self._host, self._port, *args)
        except servers.DevstackError as exc:
            raise FaultError(str(exc)) from exc

    def _jmx_open(self) -> bool:
        try:
            with socket.create_connection((self._host, self._port), timeout=1):
                return True
        except OSError:
            return False


def refuse_records(bootstrap: str, topic: str) -> None:
    """Make the broker refuse every record sent to ``topic`` from now on."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="chaos-faults")
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"max.message.bytes": "1"})])
    finally:
        admin.close()
