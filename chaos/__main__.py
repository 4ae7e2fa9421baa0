"""``python -m chaos [--operations | --cluster] [--small] [--json PATH] [--markdown PATH]``: a fault suite.

Without ``--operations``, the crash suite (``chaos.suite``: kills, restarts, silent ticks); with it, the
operations suite (``chaos.operations``: changes racing the scans, a write outage, an unpublishable topic).
The suites restart servers or break them, so they run their own Cassandra, Kafka and moto (own ports and
``DEVSTACK_HOME``), never the ones `make run` or the other tests use. The environment is set here,
before anything imports ``devstack.servers``. With ``--cluster``, the cluster suite (``chaos.cluster``:
nodes and brokers killed under the operations suite's load) on a cluster of its own (its own addresses,
ports and folder, ``devstack.cluster``'s ``chaos-cluster``), from the same jars as the single-node servers.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from jobrunner.config import Settings

if TYPE_CHECKING:
    from collections.abc import Mapping

ROOT = Path(__file__).resolve().parents[1]
ISOLATED = {
    "DEVSTACK_HOME": str(ROOT / ".local" / "chaos"),
    Settings.variable("cassandra_port"): "19042", "CASSANDRA_STORAGE_PORT": "17000",
    "KAFKA_PORT": "19092", "KAFKA_CONTROLLER_PORT": "19093", "MOTO_PORT": "15001",
}

QUIET = {"POWERTOOLS_LOG_LEVEL": "WARNING", "POWERTOOLS_METRICS_DISABLED": "1"}


def isolated(environment: Mapping[str, str]) -> dict[str, str]:
    """``environment`` with the fault suites' own servers (``ISOLATED``) where it names none: what a suite
    runs with, and what starts or stops its servers (``python -m devstack.servers up``) from outside it."""
    return {**environment, **{key: value for key, value in ISOLATED.items() if not environment.get(key)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--operations", action="store_true",
                      help="the operations suite (PATCH, pause, resume, cancel racing the scans) instead")
    kind.add_argument("--cluster", action="store_true",
                      help="the cluster suite (Cassandra nodes and Kafka brokers killed under load) instead")
    parser.add_argument("--small", action="store_true", help="the version that runs in make test")
    parser.add_argument("--json", type=Path, help="write the report as JSON here")
    parser.add_argument("--markdown", type=Path, help="write the report as Markdown here")
    parser.add_argument("--keep-servers", action="store_true", help="leave the suite's servers running")
    args = parser.parse_args()
    if not args.cluster:  # the cluster has addresses, ports and a folder of its own
        os.environ.update(isolated(os.environ))
    if args.operations or args.cluster:  # its worker makes every execution log a result: keep the report readable
        for key, value in QUIET.items():
            os.environ.setdefault(key, value)
    from chaos import cluster, operations, suite

    report: operations.Report | suite.Report
    if args.cluster:
        logging.basicConfig(format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
        logging.getLogger("chaos").setLevel(logging.INFO)  # the faults as they come, and how the cluster heals
        report = cluster.run(cluster.SMALL if args.small else cluster.FULL, keep_servers=args.keep_servers)
        passed = not any(report.failures().values())
    elif args.operations:
        report = operations.run(operations.SMALL if args.small else operations.FULL, keep_servers=args.keep_servers)
        passed = not any(report.failures().values())
    else:
        report = suite.run(suite.SMALL if args.small else suite.FULL, keep_servers=args.keep_servers)
        passed = report.lost == 0 and not report.unmet
    print(report.markdown(), flush=True)
    if args.json:
        args.json.write_text(report.to_json())
    if args.markdown:
        args.markdown.write_text(report.markdown())
    raise SystemExit(0 if passed else 1)


if __name__ == "__main__":
    main()
