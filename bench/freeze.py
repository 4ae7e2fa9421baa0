"""The first call after a Lambda-style freeze, measured on the real local servers (issue #15, item 9).

A child process builds the real clients (``session.connect`` + ``CassandraJobStore``, and
``KafkaPublisher``), makes one warm call of each, and is frozen with SIGSTOP. While it is frozen, the
connections it holds die the way an idle flow dies in AWS, then it gets SIGCONT and times its first
call of each. Both clients reach the servers through :class:`FlowProxy` here, which can expire every
flow it carries:

* ``reset``: the next packet the client sends on an expired flow is answered with a TCP RST (an NLB
  or NAT gateway after its 350 s idle timeout; a server that closed the connection while the client
  was frozen and so never saw its FIN);
* ``drop``: an expired flow swallows whatever the client sends and never answers (a path that drops
  the flow's packets silently). The proxy is local, so the client's kernel still gets TCP ACKs: this
  models "the peer never answers", not lost ACKs (which needs root: iptables/tc); TCP_USER_TIMEOUT
  cannot be shown here.

New connections always go through, as a new flow would. Run from the repository root::

    .venv/bin/python -m bench.freeze [--runs 5] [--freeze-s 5] [--modes reset,drop] [--idle-s 2]

``--idle-s`` scales the clients' idle thresholds down (``CassandraSettings.idle_refresh_s``,
``KafkaSettings.connections_max_idle_s``) so a freeze of seconds stands for one of minutes; ``--idle-s 0``
keeps the production values (then freeze longer than them to see the refresh).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

#: What a child prints once it is warm, and what it waits for before its first call after the freeze.
WARM = "warm"


class _Flow:
    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.state = "live"  # live | reset | drop

    def close(self, *, rst: bool = False) -> None:
        if rst:  # SO_LINGER 0: close() sends RST instead of FIN
            with contextlib.suppress(OSError):
                self.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.close()


class FlowProxy:
    """A TCP relay to a fixed target, or an HTTP CONNECT proxy (``target=None``), whose flows can expire."""

    def __init__(self, target: tuple[str, int] | None) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.flows: list[_Flow] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.listener.close()
        with self.lock:
            for flow in self.flows:
                flow.close()

    def expire(self, mode: str) -> int:
        with self.lock:
            live = [flow for flow in self.flows if flow.state == "live"]
            for flow in live:
                flow.state = mode
            return len(live)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._open, args=(client,), daemon=True).start()

    def _open(self, client: socket.socket) -> None:
        try:
            target = self.target
            if target is None:  # "CONNECT host:port HTTP/1.1\r\n...\r\n\r\n"
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = client.recv(4096)
                    if not chunk:
                        raise OSError("closed before CONNECT")
                    head += chunk
                host, _, port = head.split(b" ")[1].decode().rpartition(":")
                target = (host, int(port))
            server = socket.create_connection(target, timeout=5)
            server.settimeout(None)
            if self.target is None:
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        except OSError:
            client.close()
            return
        flow = _Flow(client, server)
        with self.lock:
            self.flows.append(flow)
        threading.Thread(target=self._pump, args=(flow, client, server, True), daemon=True).start()
        threading.Thread(target=self._pump, args=(flow, server, client, False), daemon=True).start()

    @staticmethod
    def _pump(flow: _Flow, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if not data:
                if flow.state == "live":
                    flow.close()
                return
            if flow.state == "reset" and from_client:
                flow.close(rst=True)
                return
            if flow.state != "live":
                continue  # dropped on the floor, both ways
            try:
                sink.sendall(data)
            except OSError:
                flow.close()
                return


# --------------------------------------------------------------------------- the child


def _child(cassandra_port: int, keyspace: str, kafka_bootstrap: str, kafka_proxy: str, idle_s: float) -> None:
    from jobrunner.adapters.publishers.kafka import KafkaPublisher, KafkaSettings, producer_config
    from jobrunner.adapters.stores.cassandra import CassandraJobStore
    from jobrunner.adapters.stores.cassandra_settings import CassandraSettings
    from jobrunner.adapters.stores.session import connect
    from jobrunner.ports import OutboundMessage

    cassandra = CassandraSettings(port=cassandra_port, keyspace=keyspace)
    kafka = KafkaSettings(bootstrap=kafka_bootstrap)
    if idle_s:
        cassandra = _scaled(cassandra, idle_s)
        kafka = _scaled(kafka, idle_s)
    store = CassandraJobStore(connect(cassandra))
    config = producer_config(kafka) | {"proxy_url": kafka_proxy}
    publisher = KafkaPublisher(kafka, _producer(config))
    message = OutboundMessage(topic="freeze-bench", key="k", value={"at": 0}, headers={})

    def timed(call: Any) -> dict[str, Any]:
        started = time.monotonic()
        try:
            call()
            error = None
        except Exception as exc:  # the figure is what we want, whatever happened
            error = f"{type(exc).__name__}: {str(exc)[:160]}"
        return {"s": round(time.monotonic() - started, 3), "error": error}

    warm = {"cassandra": timed(lambda: store.get_job("nobody", "none")),
            "kafka": timed(lambda: publisher.publish([message]))}
    print(json.dumps({WARM: warm}), flush=True)
    sys.stdin.readline()  # the parent writes a line after SIGCONT
    first = {"cassandra": timed(lambda: store.get_job("nobody", "none")),
             "kafka": timed(lambda: publisher.publish([message]))}
    second = {"cassandra": timed(lambda: store.get_job("nobody", "none")),
              "kafka": timed(lambda: publisher.publish([message]))}
    print(json.dumps({"first": first, "second": second}), flush=True)
    os._exit(0)  # the driver's and the producer's threads need not be waited for


def _scaled(settings: Any, idle_s: float) -> Any:
    import dataclasses

    names = {field.name for field in dataclasses.fields(settings)}
    values = {name: idle_s for name in ("idle_refresh_s", "connections_max_idle_s") if name in names}
    return dataclasses.replace(settings, **values)


def _producer(config: dict[str, Any]) -> Any:
    from kafka import KafkaProducer

    return KafkaProducer(**config)


# --------------------------------------------------------------------------- the parent


def run_once(
    mode: str, freeze_s: float, idle_s: float, keyspace: str, *,
    cassandra: tuple[str, int] = ("127.0.0.1", 9042), kafka_bootstrap: str = "127.0.0.1:9092",
) -> dict[str, Any]:
    """One child: warm calls, SIGSTOP, every flow expired as ``mode`` says, ``freeze_s``, SIGCONT, timed calls."""
    cassandra_proxy = FlowProxy(cassandra)
    kafka_proxy = FlowProxy(None)
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.freeze", "--child", str(cassandra_proxy.port), keyspace, kafka_bootstrap,
         f"http://127.0.0.1:{kafka_proxy.port}", str(idle_s)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        warm = json.loads(child.stdout.readline())[WARM]
        time.sleep(0.5)  # let the producer's sender thread go idle
        os.kill(child.pid, signal.SIGSTOP)
        expired = {"cassandra": cassandra_proxy.expire(mode), "kafka": kafka_proxy.expire(mode)}
        time.sleep(freeze_s)
        os.kill(child.pid, signal.SIGCONT)
        child.stdin.write("go\n")
        child.stdin.flush()
        result = json.loads(child.stdout.readline())
        return {"mode": mode, "expired_flows": expired, "warm": warm, **result}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGCONT)
        child.kill()
        child.wait()
        cassandra_proxy.close()
        kafka_proxy.close()


def _prepare(keyspace: str, cassandra: tuple[str, int]) -> None:
    from cql.migrate import migrate
    from jobrunner.adapters.stores.cassandra_settings import CassandraSettings

    migrate(CassandraSettings(contact_points=(cassandra[0],), port=cassandra[1], keyspace=keyspace))


def _drop(keyspace: str, cassandra: tuple[str, int]) -> None:
    from jobrunner.adapters.stores.cassandra_settings import CassandraSettings
    from jobrunner.adapters.stores.session import connect

    settings = CassandraSettings(contact_points=(cassandra[0],), port=cassandra[1], keyspace=keyspace)
    session = connect(settings, keyspace=False)
    session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=60)
    session.cluster.shutdown()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        _child(int(argv[1]), argv[2], argv[3], argv[4], float(argv[5]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--freeze-s", type=float, default=5.0)
    parser.add_argument("--idle-s", type=float, default=2.0)
    parser.add_argument("--modes", default="reset,drop")
    parser.add_argument("--json", help="also write every run here")
    args = parser.parse_args(argv)
    keyspace = f"jr_freeze_{uuid.uuid4().hex[:8]}"
    from jobrunner.config import Settings

    settings = Settings.from_env()
    cassandra = (os.environ.get("CASSANDRA_HOST", "127.0.0.1"), settings.cassandra_port)
    kafka_bootstrap = settings.kafka_bootstrap
    _prepare(keyspace, cassandra)
    runs: list[dict[str, Any]] = []
    try:
        for mode in args.modes.split(","):
            for _ in range(args.runs):
                run = run_once(mode, args.freeze_s, args.idle_s, keyspace, cassandra=cassandra,
                               kafka_bootstrap=kafka_bootstrap)
                runs.append(run)
                print(json.dumps(run), file=sys.stderr, flush=True)
    finally:
        _drop(keyspace, cassandra)
    print(f"freeze {args.freeze_s:g} s, idle thresholds {args.idle_s:g} s (0 = production), {args.runs} runs each")
    print("| flows expired by | client | warm call, median | first call after thaw: median (max) "
          "| failed first calls |")
    print("|---|---|---|---|---|")
    for mode in args.modes.split(","):
        for client in ("cassandra", "kafka"):
            mine = [run for run in runs if run["mode"] == mode]
            warm = statistics.median(run["warm"][client]["s"] for run in mine)
            first = [run["first"][client]["s"] for run in mine]
            errors = [run["first"][client]["error"] for run in mine if run["first"][client]["error"]]
            print(f"| {mode} | {client} | {warm:.3f} s | {statistics.median(first):.3f} s ({max(first):.3f} s) "
                  f"| {len(errors)} of {len(mine)}{': ' + errors[0] if errors else ''} |")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(runs, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
