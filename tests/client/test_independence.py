"""The client package stands on its own: nothing in ``jobrunner_client`` imports the server (``jobrunner``), the
shared ``protocol`` imports only the standard library and pydantic, and ``__init__`` imports nothing (the Lambda
layer ships those two modules alone)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_pure_core import imported_modules, module_name

CLIENT = Path(__file__).resolve().parents[2] / "client"
PACKAGE = CLIENT / "jobrunner_client"
MODULES = sorted(PACKAGE.rglob("*.py"))


def _server_imports(path: Path, root: Path = CLIENT) -> list[str]:
    return sorted(m for m in imported_modules(path, root) if m == "jobrunner" or m.startswith("jobrunner."))


def test_the_package_is_found() -> None:
    names = {module_name(p, CLIENT) for p in MODULES}
    assert {"jobrunner_client", "jobrunner_client.protocol", "jobrunner_client.worker",
            "jobrunner_client.cli.app", "jobrunner_client.cli.commands.submit"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p, CLIENT))
def test_no_client_module_imports_the_server(path: Path) -> None:
    assert _server_imports(path) == []


@pytest.mark.parametrize(("source", "bad"), [
    ("from jobrunner import telemetry", True), ("import jobrunner.domain.jobs", True),
    ("from jobrunner.domain.jobs import JobStatus", True), ("from jobrunner_client import protocol", False),
    ("from . import protocol", False),
])
def test_the_checker_catches_a_server_import(tmp_path: Path, source: str, bad: bool) -> None:
    fake = tmp_path / "jobrunner_client" / "fake.py"
    fake.parent.mkdir()
    fake.write_text(f"{source}\n")
    assert bool(_server_imports(fake, tmp_path)) is bad


def test_the_shared_protocol_imports_only_the_standard_library_and_pydantic() -> None:
    roots = {m.split(".")[0] for m in imported_modules(PACKAGE / "protocol.py", CLIENT)}
    assert roots - set(sys.stdlib_module_names) == {"pydantic"}


def test_the_package_init_imports_nothing() -> None:
    assert imported_modules(PACKAGE / "__init__.py", CLIENT) == set()


#: Run with the server's package and its heavy dependencies made unimportable.
_BLOCKED_IMPORT = """
import importlib.abc, sys
BLOCKED = ("jobrunner", "boto3", "botocore", "cassandra", "aws_lambda_powertools", "opentelemetry")

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is not installed with the client")
        return None

sys.meta_path.insert(0, Refuse())
import jobrunner_client, jobrunner_client.protocol, jobrunner_client.worker, jobrunner_client.cli.app
from jobrunner_client.cli import main
print(sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
"""


def test_the_cli_and_the_worker_import_without_the_server() -> None:
    env = {**os.environ, "PYTHONPATH": str(CLIENT)}
    done = subprocess.run([sys.executable, "-c", _BLOCKED_IMPORT], capture_output=True, text=True, timeout=120,
                          env=env, cwd=CLIENT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
