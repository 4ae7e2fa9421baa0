"""The first calls after a Lambda-style freeze, on the real servers (bench/freeze.py runs the same, timed).

A child process warms up the store and the publisher, is frozen with SIGSTOP while every connection it
holds dies (see ``bench.freeze.FlowProxy``), and after SIGCONT its first call of each must succeed
within a second or two, not fail or wait a request timeout. The clients' idle thresholds are scaled
down to 1 s so a 3 s freeze stands for one of minutes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from bench.freeze import run_once

if TYPE_CHECKING:
    from jobrunner.config import Settings

pytestmark = [pytest.mark.integration, pytest.mark.solo]  # it times the first calls


@pytest.mark.parametrize("mode", ["reset", "drop"])
def test_the_first_calls_after_a_freeze_that_killed_the_connections_succeed_promptly(
    mode: str, settings: Settings, cassandra_session: Any,
) -> None:
    # Given a warm child whose connections the path resets (or silently drops) while it is frozen
    host, port = settings.cassandra.contact_points[0], settings.cassandra.port
    run = run_once(mode, freeze_s=3, idle_s=1, keyspace=settings.cassandra.keyspace,
                   cassandra=(host, port), kafka_bootstrap=settings.kafka.bootstrap)
    assert run["expired_flows"]["cassandra"] and run["expired_flows"]["kafka"]
    # Then its first read and its first publish after the thaw go through at once, and so do the next
    for call in ("first", "second"):
        for client in ("cassandra", "kafka"):
            assert run[call][client]["error"] is None, (call, client, run[call][client])
            assert run[call][client]["s"] < 2.0, (call, client, run[call][client])
