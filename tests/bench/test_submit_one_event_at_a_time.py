"""The submit section's in-process mode (``bench.clients``) hands the API handler one event at a time, as a
Lambda execution environment does: the Powertools resolver keeps a request's state on the app object."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.clients import one_event_at_a_time


def test_threads_sending_together_never_run_the_handler_at_once() -> None:
    inside, most = 0, 0
    guard = threading.Lock()
    seen: list[str] = []

    def handler(event: dict[str, Any], _context: Any) -> dict[str, Any]:
        nonlocal inside, most
        with guard:
            inside += 1
            most = max(most, inside)
        time.sleep(0.002)  # a request's database round trips: where concurrent calls would overlap
        seen.append(event["body"])
        with guard:
            inside -= 1
        return {"statusCode": 201}

    bodies = [f'{{"n": {n}}}' for n in range(40)]
    send = one_event_at_a_time(handler, "/jobs", bodies, "tenant")
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(send, range(len(bodies))))

    assert statuses == [201] * len(bodies)
    assert most == 1
    assert sorted(seen) == sorted(bodies)
