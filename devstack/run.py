"""``make run``: start the servers and the whole system, print how to use it, run until Ctrl-C."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from devstack import servers
from devstack.environments import default_count
from devstack.stack import LocalStack, local_settings, traces_path

if TYPE_CHECKING:
    from jobrunner.config import Settings

ROOT = Path(__file__).resolve().parents[1]
ENV_FILE = ROOT / ".local" / "env"


def write_env(stack: LocalStack, endpoints: servers.Endpoints) -> None:
    ENV_FILE.parent.mkdir(parents=True, exist_ok=True)
    ENV_FILE.write_text(
        f"JOBRUNNER_API_URL={stack.url}\n"
        f"JOBRUNNER_TOKEN={stack.token}\n"
        f"KAFKA_BOOTSTRAP={endpoints.kafka_bootstrap}\n"
        f"CASSANDRA_CONTACT_POINTS={endpoints.cassandra_host}\n"
        f"CASSANDRA_PORT={endpoints.cassandra_port}\n"
        f"DYNAMODB_ENDPOINT={endpoints.dynamodb_endpoint}\n"
    )


def tracing_line(settings: Settings) -> str:
    """Where spans go, for the banner (nothing when tracing is off; the stack has refused unknown exporters)."""
    if settings.otel_exporter == "none":
        return ""
    where = {"file": str(traces_path(settings)), "console": "stderr",
             "otlp": os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318")}[settings.otel_exporter]
    return f"\n  traces:     {settings.otel_exporter}, to {where}"


def main() -> None:
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "WARNING"))
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "1")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    endpoints = servers.ensure_all()
    settings = local_settings(endpoints, **{k: v for k, v in os.environ.items() if k.startswith("JOBRUNNER_")})
    # Scans and API requests run in warm environment processes beside this one, as Lambda runs concurrent
    # invocations in environments of their own (JOBRUNNER_ENVIRONMENTS=0: all in this process).
    environments = int(os.environ.get("JOBRUNNER_ENVIRONMENTS", str(default_count())))
    stack = LocalStack(settings, port=int(os.environ.get("JOBRUNNER_PORT", "8080")), environments=environments).start()
    write_env(stack, endpoints)
    print(f"""
Distributed Job Runner is running.
  API:        {stack.url}   (OpenAPI: {stack.url}/openapi.json)
  dashboard:  {stack.url}/ui   (paste the token below)
  tenant:     {stack.tenant}
  token:      {stack.token}
  Kafka:      {endpoints.kafka_bootstrap}   Cassandra: {endpoints.cassandra_host}:{endpoints.cassandra_port}
  settings:   .local/env (source it in a shell){tracing_line(settings)}

Submit a job due in 30 seconds, then read it back:
  source .local/env
  AT=$(date -u -d '+30 sec' +%Y-%m-%dT%H:%M:%SZ)
  curl -s -X POST "$JOBRUNNER_API_URL/jobs" -H "Authorization: Bearer $JOBRUNNER_TOKEN" \\
       -H 'content-type: application/json' \\
       -d '{{"schedule": {{"at": "'$AT'"}}, "payload": {{"hello": "world"}}}}'
  curl -s "$JOBRUNNER_API_URL/jobs/<job_id>" -H "Authorization: Bearer $JOBRUNNER_TOKEN"

Watch executions arrive:   .venv/bin/python -m devstack.watch jobs
Stop the servers:          make stop      (Ctrl-C stops this process only)
""", flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    with contextlib.suppress(KeyboardInterrupt):
        stopped.wait()
    stack.stop()


if __name__ == "__main__":
    main()
