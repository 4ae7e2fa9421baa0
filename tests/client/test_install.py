"""``pip install ./client`` into a fresh virtual environment gives the ``jobrunner`` command and the worker SDK,
and none of the server: not its package, not its AWS SDK, driver or Powertools.

One environment for the module (it installs from the package index: about a minute).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The server's own package and dependencies a client install must not bring (import name: distribution).
SERVER_ONLY = {"jobrunner": "distributed-job-runner", "boto3": "boto3", "cassandra": "cassandra-driver",
               "aws_lambda_powertools": "aws-lambda-powertools"}


def _env() -> dict[str, str]:
    """This process's environment without what would let the fresh interpreter see this checkout's code."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the client distribution installed, from a copy of ``client/`` (a build
    writes into the tree it builds)."""
    base = tmp_path_factory.mktemp("client-install")
    source = shutil.copytree(ROOT / "client", base / "client",
                             ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(target)], check=True, timeout=300, env=_env())
    subprocess.run([target / "bin" / "python", "-m", "pip", "install", "--quiet", "-c", ROOT / "constraints.txt",
                    source], check=True, timeout=900, env=_env(), cwd=base)
    return target


def _run(venv: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    # From a directory of its own: nothing of this checkout is importable from the working directory either.
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300, env=_env(),
                          cwd=venv)


def test_the_installed_jobrunner_command_answers_help(venv: Path) -> None:
    done = _run(venv, venv / "bin" / "jobrunner", "--help")
    assert done.returncode == 0, done.stderr
    assert "Usage: jobrunner" in done.stdout
    assert "submit" in done.stdout and "tail" in done.stdout


def test_the_worker_sdk_imports(venv: Path) -> None:
    done = _run(venv, venv / "bin" / "python", "-c",
                "from jobrunner_client.worker import Worker, Execution; print(Worker.__module__)")
    assert (done.returncode, done.stdout.strip()) == (0, "jobrunner_client.worker"), done.stderr


def test_nothing_of_the_server_is_installed(venv: Path) -> None:
    code = (
        "import importlib.metadata as m, importlib.util as u, json, sys\n"
        "names = json.loads(sys.argv[1])\n"
        "modules = [n for n in names if u.find_spec(n) is not None]\n"
        "installed = {d.metadata['Name'].lower() for d in m.distributions()}\n"
        "print(json.dumps({'modules': modules, 'distributions': sorted(installed & set(names.values()))}))\n"
    )
    done = _run(venv, venv / "bin" / "python", "-c", code, json.dumps(SERVER_ONLY))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"modules": [], "distributions": []}
