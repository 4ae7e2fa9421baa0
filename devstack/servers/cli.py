"""The command line, ``python -m devstack.servers up | down | status | restart NAME | kill NAME``."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from devstack.servers.local import SERVERS, Endpoints, kill, restart, status, stop_all
from devstack.servers.process import Outcome, ensure, managed_pid
from devstack.servers.settings import SERVER_NAMES, DevstackError, cassandra_address

if TYPE_CHECKING:
    from collections.abc import Sequence


def _endpoint_text(name: str) -> str:
    host, port = SERVERS[name].address()
    return f"http://{host}:{port}" if name == "moto" else f"{host}:{port}"


def _rss_text(pid: int) -> str:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return f"{int(line.split()[1]) / 1024:.0f} MiB"
    except (OSError, ValueError):
        pass
    return "?"


def _print_outcome(outcome: Outcome) -> None:
    if not outcome.started:
        how = f"reused, already running ({outcome.seconds:.1f} s)"
    else:
        how = f"started in {outcome.seconds:.1f} s"
        if outcome.fetch_seconds:
            how += f" (of which {outcome.fetch_seconds:.1f} s fetching jars)"
    print(f"{outcome.name:<10} {_endpoint_text(outcome.name):<24} {how}")


def _cmd_up() -> None:
    for name in SERVER_NAMES:
        _print_outcome(ensure(SERVERS[name]))
    endpoints = Endpoints(*cassandra_address(), _endpoint_text("kafka"), _endpoint_text("moto"))
    print()
    print(f"cassandra:  {endpoints.cassandra_host}:{endpoints.cassandra_port}")
    print(f"kafka:      {endpoints.kafka_bootstrap}")
    print(f"dynamodb:   {endpoints.dynamodb_endpoint}")


def _cmd_status() -> None:
    for name, up in status().items():
        pid = managed_pid(SERVERS[name])
        if pid is not None:
            state, owner = ("up" if up else "not answering"), f"pid {pid}, rss {_rss_text(pid)}"
        elif up:
            state, owner = "up", "not started by devstack"
        else:
            state, owner = "down", ""
        print(f"{name:<10} {state:<13} {_endpoint_text(name):<24} {owner}".rstrip())


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m devstack.servers``."""
    parser = argparse.ArgumentParser(
        prog="python -m devstack.servers", description="Manage the local Cassandra, Kafka and moto servers."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("up", help="start (or reuse) all servers and print their endpoints")
    commands.add_parser("down", help="stop the servers devstack started")
    commands.add_parser("status", help="show which servers answer")
    for command, text in (("restart", "stop and start one server"), ("kill", "SIGKILL one server")):
        commands.add_parser(command, help=text).add_argument("name", choices=SERVER_NAMES)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="devstack: %(message)s", stream=sys.stderr)
    for noisy in ("cassandra", "kafka"):  # client libraries log every refused connection
        logging.getLogger(noisy).setLevel(logging.CRITICAL)

    try:
        if args.command == "up":
            _cmd_up()
        elif args.command == "down":
            for name, stopped in stop_all().items():
                print(f"{name:<10} {'stopped' if stopped else 'was not running (under devstack)'}")
        elif args.command == "status":
            _cmd_status()
        elif args.command == "restart":
            restart(args.name)
            print(f"{args.name:<10} restarted, {_endpoint_text(args.name)}")
        elif args.command == "kill":
            killed = kill(args.name)
            print(f"{args.name:<10} {'killed' if killed else 'was not running (under devstack)'}")
    except DevstackError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0
