"""``execute_concurrent`` that survives a loaded machine: failed statements (client timeouts when the
shared servers are saturated) are sent again, a few times, and counted, instead of aborting a run."""

from __future__ import annotations

import time
from typing import Any

from cassandra.concurrent import execute_concurrent


def run_all(session: Any, statements: list[tuple[Any, Any]], concurrency: int, attempts: int = 5) -> int:
    """Execute every statement (idempotent writes and reads only); returns how many were retried."""
    retried = 0
    pending = statements
    for attempt in range(attempts):
        results = execute_concurrent(session, pending, concurrency=concurrency, raise_on_first_error=False)
        failed = [statement for statement, (ok, _) in zip(pending, results, strict=True) if not ok]
        if not failed:
            return retried
        retried += len(failed)
        pending = failed
        time.sleep(0.5 * (attempt + 1))
    errors = [result for ok, result in execute_concurrent(session, pending, concurrency=concurrency,
                                                          raise_on_first_error=False) if not ok]
    if errors:
        raise RuntimeError(f"{len(errors)} statement(s) failed {attempts + 1} times; first: {errors[0]!r}")
    return retried
