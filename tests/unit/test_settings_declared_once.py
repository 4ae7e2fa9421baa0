"""The runtime's variables are named in ``jobrunner/config.py`` only: everything else reads and writes them through
``Settings`` (``to_environment``, ``variable``), so a renamed variable cannot leave a stale copy behind."""

from __future__ import annotations

import ast
from pathlib import Path

from jobrunner.config import Settings

ROOT = Path(__file__).resolve().parents[2]
SKIPPED_DIRS = {".git", ".local", ".venv", "cdk.out", "node_modules", "tests", "__pycache__"}
#: Clients installed without the server (the CLI, the worker SDK and the example worker): they read variables
#: of the same names by convention, and must not import the server's settings.
CLIENTS = ("client/", "examples/")
#: The local servers' own port: ``CASSANDRA_PORT`` moves the local Cassandra and, through the stack, the runtime.
SERVERS = ("devstack/servers", {"CASSANDRA_PORT"})


def runtime_variables() -> set[str]:
    """The model's variables, less AWS's own (``AWS_REGION``: Lambda sets it, boto3 and the CLI read it)."""
    return {name for name in Settings.variables() if not name.startswith("AWS_")}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the bare string statements (docstrings and the like): prose, not names in use."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}


def named_in(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of each variable named in code: a string that is the name or starts ``NAME=``, or a keyword
    argument of that name (``dict(NAME=...)``)."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    hits: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            lines = node.value.split("\n")
            hits += [(node.lineno, name) for name in sorted(names)
                     if any(line.strip() == name or line.startswith(f"{name}=") for line in lines)]
        elif isinstance(node, ast.keyword) and node.arg in names:
            hits.append((node.lineno, node.arg))
    return hits


def test_the_scan_finds_each_way_a_name_can_be_written() -> None:
    source = ('"""KAFKA_BOOTSTRAP in prose."""\nA = {"KAFKA_BOOTSTRAP": 1}\nB = dict(KAFKA_BOOTSTRAP=1)\n'
              'C = f"X={A}\\nKAFKA_BOOTSTRAP={A}\\n"\nD = "set KAFKA_BOOTSTRAP to a broker"\n')
    assert sorted(named_in(source, {"KAFKA_BOOTSTRAP"})) == [(2, "KAFKA_BOOTSTRAP"), (3, "KAFKA_BOOTSTRAP"),
                                                            (4, "KAFKA_BOOTSTRAP")]


def test_no_module_but_the_settings_spells_a_variable_of_the_runtime() -> None:
    names = runtime_variables()
    assert {"JOBRUNNER_SEGMENTS", "CASSANDRA_CONTACT_POINTS", "KAFKA_BOOTSTRAP", "HEARTBEAT_TABLE"} <= names
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if SKIPPED_DIRS & set(path.relative_to(ROOT).parts) or relative == "layers/jobrunner/config.py":
            continue
        if relative.startswith(CLIENTS):
            continue
        allowed = SERVERS[1] if relative.startswith(SERVERS[0]) else set()
        found += [f"{relative}:{line}: {name}" for line, name in named_in(path.read_text(), names - allowed)]
    assert not found, "use jobrunner.config.Settings (to_environment, variable) instead of:\n" + "\n".join(found)
