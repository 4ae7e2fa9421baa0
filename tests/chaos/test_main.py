"""``python -m chaos``'s environment (``chaos.__main__``): the fault suites' own servers, never the others'."""

from __future__ import annotations

from chaos.__main__ import ISOLATED, isolated


def test_the_suites_servers_fill_what_the_environment_leaves_unset_or_empty() -> None:
    # An empty port would make devstack fall back to the default one: the dev servers' (9042), never the suites'
    env = isolated({"CASSANDRA_PORT": "", "KAFKA_PORT": "29092", "PATH": "/bin"})
    assert env["CASSANDRA_PORT"] == ISOLATED["CASSANDRA_PORT"] != "9042"
    assert env["KAFKA_PORT"] == "29092" and env["PATH"] == "/bin"
    assert env["DEVSTACK_HOME"] == ISOLATED["DEVSTACK_HOME"]
