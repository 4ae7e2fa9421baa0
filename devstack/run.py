"""``make run``: start the servers and the whole system, print how to use it, run until Ctrl-C.

``--cluster`` (``make cluster``): the same system on the local cluster instead of the single-node servers
(three Cassandra nodes, three Kafka brokers: ``devstack.cluster``), with the settings a cluster needs.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import threading
import time
from pathlib import Path

from devstack import cluster, console, servers
from devstack.environments import default_count
from devstack.stack import LocalStack, endpoint_settings, local_settings
from devstack.tracing import traces_path
from jobrunner.config import Settings

ROOT = Path(__file__).resolve().parents[1]
ENV_FILE = ROOT / ".local" / "env"


def write_env(stack: LocalStack, endpoints: servers.Endpoints) -> None:
    ENV_FILE.parent.mkdir(parents=True, exist_ok=True)
    variables = {"JOBRUNNER_API_URL": stack.url, "JOBRUNNER_TOKEN": stack.token,
                 **Settings.of(**endpoint_settings(endpoints)).to_environment(given_only=True)}
    ENV_FILE.write_text("".join(f"{name}={value}\n" for name, value in variables.items()))


def tracing_line(settings: Settings) -> str:
    """Where spans go, for the banner (nothing when tracing is off; the stack has refused unknown exporters)."""
    if settings.otel_exporter == "none":
        return ""
    where = {"file": str(traces_path(settings)), "console": "stderr",
             "otlp": os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318")}[settings.otel_exporter]
    return f"\n  traces:     {settings.otel_exporter}, to {where}"


def cluster_lines(layout: cluster.Layout, startup: cluster.Startup, settings: Settings, ready_s: float) -> str:
    """What the banner says of the cluster: how fast it came up, and the client settings in force."""
    how = f"formed in {startup.seconds:.1f} s" if startup.started else "already running"
    db = settings.cassandra
    return (f"\n  cluster:    {layout.name}, {how}; the system answered {ready_s:.1f} s after this command started"
            f"\n              Cassandra: datacenter {db.local_dc}, keyspace {db.keyspace} at replication factor"
            f" {db.replication_factor}, LOCAL_QUORUM, token-aware"
            f"\n              Kafka: topics at replication factor {settings.kafka.topic_replication},"
            f" min.insync.replicas {layout.min_insync_replicas}, acks=all")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cluster", action="store_true", help="run on the local cluster (make cluster)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "WARNING"))
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    # Metrics to a file (this process's and the environments'), log records as plain lines, a line a minute.
    metrics_file = console.metrics_path()
    os.environ.setdefault(console.METRICS_FILE_ENV, str(metrics_file))
    console.route_output(metrics_file)
    summary = console.MinuteSummary(metrics_file)
    chosen = {k: v for k, v in os.environ.items() if k.startswith("JOBRUNNER_")}
    began = time.monotonic()
    layout, startup = cluster.CLUSTER, None
    if args.cluster:
        startup = cluster.up(layout)
        endpoints = layout.endpoints()
        settings = local_settings(endpoints, chosen, **layout.settings())
    else:
        endpoints = servers.ensure_all()
        settings = local_settings(endpoints, chosen)
    # Scans and API requests run in warm environment processes beside this one, as Lambda runs concurrent
    # invocations in environments of their own (JOBRUNNER_ENVIRONMENTS=0: all in this process).
    environments = int(os.environ.get("JOBRUNNER_ENVIRONMENTS", str(default_count())))
    stack = LocalStack(settings, port=int(os.environ.get("JOBRUNNER_PORT", "8080")), environments=environments).start()
    write_env(stack, endpoints)
    extra, stop_with = "", "make stop     "
    if startup is not None:
        extra, stop_with = cluster_lines(layout, startup, settings, time.monotonic() - began), "make cluster-stop"
    print(f"""
Distributed Job Runner is running.
  API:        {stack.url}   (OpenAPI: {stack.url}/openapi.json)
  dashboard:  {stack.url}/ui   (paste the token below)
  tenant:     {stack.tenant}
  token:      {stack.token}
  Kafka:      {endpoints.kafka_bootstrap}   Cassandra: {endpoints.cassandra_host}:{endpoints.cassandra_port}
  settings:   .local/env (source it in a shell){tracing_line(settings)}{extra}
  metrics:    {metrics_file} (a line a minute below when anything ran)

Submit a job due in 30 seconds, then read it back:
  source .local/env
  AT=$(date -u -d '+30 sec' +%Y-%m-%dT%H:%M:%SZ)
  curl -s -X POST "$JOBRUNNER_API_URL/jobs" -H "Authorization: Bearer $JOBRUNNER_TOKEN" \\
       -H 'content-type: application/json' \\
       -d '{{"schedule": {{"at": "'$AT'"}}, "payload": {{"hello": "world"}}}}'
  curl -s "$JOBRUNNER_API_URL/jobs/<job_id>" -H "Authorization: Bearer $JOBRUNNER_TOKEN"

Watch executions arrive:   .venv/bin/python -m devstack.watch jobs
Stop the servers:          {stop_with} (Ctrl-C stops this process only)
""", flush=True)
    summary.start()
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    with contextlib.suppress(KeyboardInterrupt):
        stopped.wait()
    summary.stop()
    stack.stop()


if __name__ == "__main__":
    main()
