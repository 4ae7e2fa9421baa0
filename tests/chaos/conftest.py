"""One set of the fault suites' own servers for both small runs (``test_chaos_smoke.py`` and
``test_operations_smoke.py``): starting Cassandra, Kafka and moto, and stopping them, once instead of twice."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from chaos.__main__ import isolated

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[2]


def servers(command: str, env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """``python -m devstack.servers COMMAND`` on the servers ``env`` names."""
    return subprocess.run([sys.executable, "-m", "devstack.servers", command], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout_s, check=False)


@pytest.fixture(scope="session")
def fault_servers() -> Iterator[dict[str, str]]:
    """The environment of a small run on the fault suites' servers (their own ports and DEVSTACK_HOME, never
    the tests' or `make run`'s), started here and stopped after the last run.

    Each run keeps them (``--keep-servers``) and leaves them healthy for the next: the crash suite's restarts
    end with the server up, and the operations suite resumes the writes it stopped. Each also checks at its
    start what it needs: ``servers.ensure_all`` starts any server that does not answer, and the operations
    suite opens a write stage left stopped (``CassandraWrites.open``). Each runs on a keyspace, heartbeat
    table and tenant of its own, and reads the shared ``jobs`` topic from its end (its own topics otherwise)."""
    env = isolated(os.environ)
    up = servers("up", env, timeout_s=600)
    if up.returncode != 0:
        pytest.fail(f"the fault suites' servers did not start:\n{up.stdout[-3000:]}{up.stderr[-3000:]}")
    yield env
    servers("down", env, timeout_s=300)
