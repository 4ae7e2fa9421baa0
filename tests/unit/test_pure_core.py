"""The pure core (domain, ports, services) imports no SDK, driver, Powertools, OpenTelemetry, adapter or API code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LAYERS = Path(__file__).resolve().parents[2] / "layers"
PACKAGE = LAYERS / "jobrunner"
CORE = sorted([*(PACKAGE / "domain").rglob("*.py"), *(PACKAGE / "services").rglob("*.py"),
               *(PACKAGE / "ports").rglob("*.py")])
FORBIDDEN = (
    "boto3", "botocore", "cassandra", "kafka", "aws_lambda_powertools", "opentelemetry",
    "jobrunner.adapters", "jobrunner.api", "jobrunner.wiring", "jobrunner.telemetry",
    # The core shares the clients' protocol (jobrunner_client.protocol), never the clients themselves.
    "jobrunner_client.cli", "jobrunner_client.worker",
)


def module_name(path: Path, root: Path = LAYERS) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path = LAYERS) -> set[str]:
    """Every module ``path`` imports, relative imports resolved, wherever the statement is (TYPE_CHECKING too)."""
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # `from jobrunner import wiring`
    return found


def forbidden_in(path: Path, root: Path = LAYERS) -> list[str]:
    return sorted(
        m for m in imported_modules(path, root) if any(m == f or m.startswith(f"{f}.") for f in FORBIDDEN)
    )


def test_the_core_is_found() -> None:
    names = {module_name(p) for p in CORE}
    assert {"jobrunner.ports", "jobrunner.domain.schedules", "jobrunner.services.scan"} <= names


@pytest.mark.parametrize("path", CORE, ids=module_name)
def test_core_module_is_pure(path: Path) -> None:
    assert forbidden_in(path) == []


@pytest.mark.parametrize(
    ("source", "bad"),
    [
        ("import boto3", True),
        ("import botocore.session", True),
        ("from cassandra.cluster import Cluster", True),
        ("from jobrunner import wiring", True),
        ("from ..adapters.stores import memory", True),
        ("from .. import api", True),
        ("from jobrunner.api.app import handle", True),
        ("from opentelemetry import trace", True),
        ("from jobrunner import telemetry", True),
        ("from jobrunner_client.worker import Worker", True),
        ("from jobrunner_client import cli", True),
        ("from jobrunner_client.protocol import JobStatus", False),
        ("import kafkaesque", False),
        ("from jobrunner.domain import jobs", False),
        ("from . import jobs", False),
    ],
)
def test_the_checker_catches_forbidden_imports(tmp_path: Path, source: str, bad: bool) -> None:
    fake = tmp_path / "jobrunner" / "services" / "fake.py"
    fake.parent.mkdir(parents=True)
    fake.write_text(f"{source}\n")
    assert bool(forbidden_in(fake, root=tmp_path)) is bad
