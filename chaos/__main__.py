"""``python -m chaos [--small] [--json PATH] [--markdown PATH]``: run the fault suite on servers of its own.

The suite restarts and kills servers, so it runs its own Cassandra, Kafka and moto (own ports and
``DEVSTACK_HOME``), never the ones `make run` or the other tests use. The environment is set here,
before anything imports ``devstack.servers``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ISOLATED = {
    "DEVSTACK_HOME": str(ROOT / ".local" / "chaos"),
    "CASSANDRA_PORT": "19042", "CASSANDRA_STORAGE_PORT": "17000",
    "KAFKA_PORT": "19092", "KAFKA_CONTROLLER_PORT": "19093", "MOTO_PORT": "15001",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", action="store_true", help="the version that runs in make test")
    parser.add_argument("--json", type=Path, help="write the report as JSON here")
    parser.add_argument("--markdown", type=Path, help="write the report as Markdown here")
    parser.add_argument("--keep-servers", action="store_true", help="leave the suite's servers running")
    args = parser.parse_args()
    for key, value in ISOLATED.items():
        os.environ.setdefault(key, value)
    from chaos.suite import FULL, SMALL, run

    report = run(SMALL if args.small else FULL, keep_servers=args.keep_servers)
    print(report.markdown(), flush=True)
    if args.json:
        args.json.write_text(report.to_json())
    if args.markdown:
        args.markdown.write_text(report.markdown())
    raise SystemExit(0 if report.lost == 0 else 1)


if __name__ == "__main__":
    main()
