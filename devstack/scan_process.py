"""Run one scan in a process of its own: ``python -m devstack.scan_process '{"segment": 3, "minute": "..."}'``.

The fault suite starts scans this way so that it can ``kill -9`` one in the middle of its partition,
as a Lambda execution environment can die. Settings come from the environment, as in Lambda (and so does
``JOBRUNNER_OTEL_EXPORTER``: the scan's spans join the trace of the stack that started it).
"""

from __future__ import annotations

import json
import os
import sys

from devstack.lambda_context import LocalContext


def main() -> None:
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "1")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    from devstack.tracing import configure_tracing
    from functions.scan.handler import handler
    from jobrunner import telemetry
    from jobrunner.config import Settings

    configure_tracing(Settings.from_env())
    try:
        result = handler(json.loads(sys.argv[1]), LocalContext("jobrunner-scan"))
    finally:
        telemetry.shutdown()  # export the spans before the process ends
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
