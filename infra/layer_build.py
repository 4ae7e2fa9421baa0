"""The two Lambda layers, built on this machine at synth time (no Docker).

- Dependencies: ``pip install --platform manylinux2014_<arch> --only-binary=:all:`` of the runtime
  dependencies in ``pyproject.toml``, pinned by ``constraints.txt``, plus ``certifi`` (its bundle holds
  the Amazon Root CAs the Keyspaces TLS connection is checked against). Every wheel the project needs
  exists for both architectures (cassandra-driver ships its compiled modules and libev in the wheel).
- Code: the runtime only, the modules ``CODE_LAYER`` lists (what the functions import in AWS: not the
  command-line tool, the worker SDK, the in-memory adapters of the tests and the local stack, nor the schema
  tools of ``cql/``), under ``python/``, and the Keyspaces CA bundle at
  ``python/jobrunner_certs/keyspaces-bundle.pem`` (``infra/certs/keyspaces-bundle.pem``: the roots AWS
  documents for Keyspaces, or the file ``keyspaces_ca_bundle`` names).

Both are precompiled: /opt is read-only in Lambda, so a layer without bytecode is compiled again, in
memory, by every cold start. The ``.pyc`` files are written by an interpreter of the runtime's own
version (``target_python``; a ``.pyc`` of another version is ignored) and checked by nothing at import
(``unchecked-hash``: no source mtime to compare, which a zip asset need not keep, and no hashing of the
source on each import). Without that interpreter on the machine the layers ship without bytecode and the
synth says so (``infra.app``).

Both land in a cache directory named after a hash of their inputs, so a synth with nothing changed
runs no pip, and a half-built directory is never used (built aside, then renamed).
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

ROOT = Path(__file__).resolve().parents[1]
#: The Python version of the Lambda runtime (``infra.constructs.function.RUNTIME``): the wheels are chosen
#: for it and the bytecode is compiled by it. 3.13 rather than 3.14: the newest version with an interpreter
#: in the project's toolchain (docs/deploy.md, "Runtime"); a test keeps the two constants in step.
PYTHON_VERSION = "3.13"
#: Lambda architecture -> the manylinux platform tag of its wheels (glibc 2.17; the python3.13 runtime
#: runs on Amazon Linux 2023, glibc 2.34, which loads them, and every wheel the layer needs has the tag).
PLATFORMS = {"arm64": "manylinux2014_aarch64", "x86_64": "manylinux2014_x86_64"}
#: Added to the layer: certifi's bundle verifies the AWS API endpoints' certificates (botocore's default).
EXTRA = ("certifi",)
#: The roots Amazon Keyspaces documents (Amazon Root CA 1-4 and Starfield Class 2), shipped by default.
KEYSPACES_BUNDLE_SOURCE = ROOT / "infra" / "certs" / "keyspaces-bundle.pem"
#: Where the functions find it (layers are unpacked under /opt): CASSANDRA_CA_BUNDLE.
KEYSPACES_BUNDLE = "/opt/python/jobrunner_certs/keyspaces-bundle.pem"
#: Where Lambda unpacks the layers' ``python/``: the path the bytecode records for tracebacks.
LAYER_PATH = "/opt/python"
#: Names an interpreter of the runtime's version, if it is not on PATH as ``python3.X``.
PYTHON_ENV = "JOBRUNNER_LAYER_PYTHON"


#: The code layer's contents: (a directory under the repository, a glob under it). Each file matched lands at
#: ``python/<its path under that directory>``; an entry that matches nothing fails the build (a module was
#: moved: follow it). Only what a function imports at run time in AWS, directly or through ``wiring``'s lazy
#: imports for the AWS settings; tests/infra/test_layer_build.py fails on any other module shipped and on any
#: handler that cannot be imported from the layer. Left out: the client distribution but its protocol module
#: (the CLI and the worker SDK, run by users), the in-memory adapters and ``clocks/manual.py`` (tests, the
#: local stack), ``invokers/threads.py`` (the local stack's scans), ``publishers/topics.py`` (the local stack
#: creates its topics; in AWS the CDK app does), ``publishers/tracing.py`` (the local stack's OpenTelemetry
#: spans); the dashboard (``dashboard/``) and the schema tools (``cql/``) live outside the package.
CODE_LAYER: tuple[tuple[str, str], ...] = (
    ("layers", "jobrunner/__init__.py"),
    ("layers", "jobrunner/config.py"),  # Settings.from_env: the container's settings
    ("layers", "jobrunner/entrypoints.py"),  # the tick, scan, results, delivery and reconcile handlers' entry points
    ("layers", "jobrunner/observability.py"),  # Powertools' logger, metrics and tracer of every handler
    ("layers", "jobrunner/ports/*.py"),  # the ports' records (ScanRequest, ...), imported by the services
    ("layers", "jobrunner/telemetry.py"),  # spans around the work; off in AWS, imported by the entry points
    ("layers", "jobrunner/wiring.py"),  # the container: picks the adapters and builds the services
    ("layers", "jobrunner/delivery_wiring.py"),  # the container's deliverer and webhook secrets
    ("layers", "jobrunner/domain/**/*.py"),  # the pure rules, all of them used by the services
    ("layers", "jobrunner/services/*.py"),  # the use cases
    ("layers", "jobrunner/services/jobs/*.py"),  # the job use cases, one module per use case
    ("layers", "jobrunner/services/scan/*.py"),  # the segment scan, one module per step
    ("layers", "jobrunner/services/reconcile/*.py"),  # the reconciler: its run, state, rules and repairs
    ("layers", "jobrunner/api/*.py"),  # the api function's HTTP API: its modules, not the dashboard's assets
    ("layers", "jobrunner/api/routes/*.py"),  # its routes, one module per resource
    ("layers", "jobrunner/api/schemas/*.py"),  # its bodies, one module per resource
    ("layers", "jobrunner/adapters/__init__.py"),
    ("layers", "jobrunner/adapters/secrets.py"),  # the result key, from Secrets Manager
    ("layers", "jobrunner/adapters/sockets.py"),  # TCP keepalive options of the driver and the producer
    ("layers", "jobrunner/adapters/dynamodb_tables.py"),  # imported by the DynamoDB adapters
    ("layers", "jobrunner/adapters/clocks/__init__.py"),
    ("layers", "jobrunner/adapters/clocks/system.py"),  # the container's clock
    ("layers", "jobrunner/adapters/stores/__init__.py"),
    ("layers", "jobrunner/adapters/stores/cassandra.py"),  # Container.store
    ("layers", "jobrunner/adapters/stores/history.py"),  # the store's history table
    ("layers", "jobrunner/adapters/stores/expiring.py"),  # the store's one-time job rows, expiring
    ("layers", "jobrunner/adapters/stores/driver.py"),  # the store's prepared statements and batches
    ("layers", "jobrunner/adapters/stores/cassandra_settings.py"),  # how to reach the cluster (config builds it)
    ("layers", "jobrunner/adapters/stores/session.py"),  # its session
    ("layers", "jobrunner/adapters/stores/keyspaces.py"),  # the session with CASSANDRA_MODE=keyspaces
    ("layers", "jobrunner/adapters/stores/codec.py"),  # rows <-> records, for the store
    ("layers", "jobrunner/adapters/stores/rows.py"),  # the store's batched writes
    ("layers", "jobrunner/adapters/stores/cursors.py"),  # the store's page cursors
    ("layers", "jobrunner/adapters/stores/changes.py"),  # Container.changes (the jobs' change log)
    ("layers", "jobrunner/adapters/stores/calendars.py"),  # Container.calendars
    ("layers", "jobrunner/adapters/publishers/__init__.py"),
    ("layers", "jobrunner/adapters/publishers/kafka.py"),  # Container.publisher (config reads its settings)
    ("layers", "jobrunner/adapters/leases/__init__.py"),
    ("layers", "jobrunner/adapters/leases/dynamodb.py"),  # Container.leases
    ("layers", "jobrunner/adapters/quotas/__init__.py"),
    ("layers", "jobrunner/adapters/quotas/dynamodb.py"),  # Container.quotas, when a tenant's limit is counted
    ("layers", "jobrunner/adapters/invokers/__init__.py"),
    ("layers", "jobrunner/adapters/invokers/lambda_.py"),  # Container.invoker: the tick's, and scan wakes
    ("layers", "jobrunner/adapters/deliverers/__init__.py"),
    ("layers", "jobrunner/adapters/deliverers/routing.py"),  # Container.delivery: a deliverer per kind of target
    ("layers", "jobrunner/adapters/deliverers/https.py"),  # its HTTPS targets
    ("layers", "jobrunner/adapters/deliverers/lambda_.py"),  # its Lambda targets
    ("layers", "jobrunner/adapters/deliverers/sqs.py"),  # its SQS targets
    ("layers", "jobrunner/adapters/deliverers/aws_errors.py"),  # what a Lambda or SQS call's failure was
    ("layers", "jobrunner/adapters/webhook_secrets/__init__.py"),
    ("layers", "jobrunner/adapters/webhook_secrets/secretsmanager.py"),  # the tenants' webhook signing secrets
    # The one module the server shares with the clients (the messages, statuses, RFC 3339, traceparent):
    ("client", "jobrunner_client/__init__.py"), ("client", "jobrunner_client/protocol.py"),
)


def _version_of(python: str) -> str | None:
    try:
        result = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                capture_output=True, text=True, check=False, timeout=30)
    except OSError:
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def target_python(version: str = PYTHON_VERSION) -> str | None:
    """An interpreter of the Lambda runtime's ``version``, to compile the layers' bytecode; None if none is found.

    Looked for in order: ``$JOBRUNNER_LAYER_PYTHON``, this interpreter, ``python3.X`` on PATH, pyenv's and
    uv's installs. A candidate counts only if it reports ``version``.
    """
    home = Path.home()
    candidates = [os.environ.get(PYTHON_ENV), sys.executable, shutil.which(f"python{version}"),
                  *sorted(glob.glob(str(home / f".pyenv/versions/{version}.*/bin/python{version}")), reverse=True),
                  *sorted(glob.glob(str(home / f".local/share/uv/python/cpython-{version}.*/bin/python{version}")),
                          reverse=True)]
    return next((c for c in candidates if c and _version_of(c) == version), None)


def compile_bytecode(site: Path, *, python: str) -> None:
    """Write ``__pycache__/*.cpython-3X.pyc`` next to every module under ``site`` (a layer's ``python/``)."""
    command = [python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash",
               "-s", str(site), "-p", LAYER_PATH, str(site)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"compiling the layer's bytecode failed:\n{' '.join(command)}\n"
                           f"{(result.stdout + result.stderr)[-4000:]}")


def _compile_or_discard(staging: Path, python: str) -> None:
    """Precompile a staged layer's ``python/``; a failed compile discards the staging directory."""
    try:
        compile_bytecode(staging / "python", python=python)
    except RuntimeError:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _name(requirement: str) -> str:
    for stop in "[=<>!~; ":
        requirement = requirement.split(stop, 1)[0]
    return requirement.strip().lower().replace("_", "-")


def layer_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The requirement lines of the dependency layer, derived from ``[project].dependencies``."""
    dependencies: list[str] = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    kept = list(dependencies)
    return kept + [e for e in EXTRA if e not in {_name(d) for d in kept}]


def pip_install_command(
    *, requirements: Path, constraints: Path, target: Path, architecture: str, python: str = sys.executable,
) -> list[str]:
    """The pip command line that fills ``target`` (the layer's ``python/`` directory)."""
    return [
        python, "-m", "pip", "install",
        "--quiet", "--disable-pip-version-check", "--no-compile",
        "--target", str(target),
        "--platform", PLATFORMS[architecture],
        "--implementation", "cp",
        "--python-version", PYTHON_VERSION,
        "--abi", f"cp{PYTHON_VERSION.replace('.', '')}",
        "--only-binary=:all:",
        "--requirement", str(requirements),
        "--constraint", str(constraints),
    ]


def _digest(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _publish(staging: Path, final: Path, kind: str) -> Path:
    """Move a finished build into place and drop older builds of the same kind (they only use disk)."""
    try:
        staging.rename(final)
    except OSError:  # another synth finished the same build first
        shutil.rmtree(staging, ignore_errors=True)
    for old in final.parent.glob(f"{kind}-*"):
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
    return final


def build_dependency_layer(
    *, architecture: str, cache_dir: Path, pyproject: Path = ROOT / "pyproject.toml",
    constraints: Path = ROOT / "constraints.txt", bytecode_python: str | None = None,
) -> Path:
    """The dependency layer directory (holding ``python/``) for ``architecture``, built if not cached.

    ``bytecode_python``: an interpreter of the runtime's version (``target_python()``) to precompile with.
    """
    requirements = "\n".join(layer_requirements(pyproject)) + "\n"
    pyc = "pyc" if bytecode_python else "nopyc"
    key = _digest(requirements, constraints.read_bytes(), architecture, PLATFORMS[architecture], PYTHON_VERSION, pyc)
    final = cache_dir / f"deps-{architecture}-py{PYTHON_VERSION.replace('.', '')}-{pyc}-{key}"
    if final.is_dir():
        return final
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = cache_dir / f".{final.name}.{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "python").mkdir(parents=True)
    requirements_file = staging / "requirements.txt"
    requirements_file.write_text(requirements)
    command = pip_install_command(
        requirements=requirements_file, constraints=constraints, target=staging / "python", architecture=architecture,
    )
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(f"building the dependency layer failed:\n{' '.join(command)}\n{result.stderr[-4000:]}")
    requirements_file.unlink()
    shutil.rmtree(staging / "python" / "bin", ignore_errors=True)  # console scripts: unused in Lambda
    if bytecode_python:
        _compile_or_discard(staging, bytecode_python)
    return _publish(staging, final, f"deps-{architecture}")


def code_layer_files(root: Path = ROOT, manifest: Sequence[tuple[str, str]] = CODE_LAYER) -> dict[str, Path]:
    """The code layer's modules: their path under ``python/`` -> their source, as ``manifest`` lists them.

    Raises ``ValueError`` for an entry that matches no file (a module moved or removed: the entry follows it).
    """
    files: dict[str, Path] = {}
    for directory, pattern in manifest:
        matched = sorted(p for p in (root / directory).glob(pattern) if p.is_file() and "__pycache__" not in p.parts)
        if not matched:
            raise ValueError(f"code layer entry {directory}/{pattern} matches no file (infra.layer_build.CODE_LAYER)")
        files.update({str(p.relative_to(root / directory)): p for p in matched})
    return dict(sorted(files.items()))


def build_code_layer(
    *, cache_dir: Path, root: Path = ROOT, manifest: Sequence[tuple[str, str]] = CODE_LAYER,
    ca_bundle: Path = KEYSPACES_BUNDLE_SOURCE, bytecode_python: str | None = None,
) -> Path:
    """The code layer directory: ``python/`` holding the modules ``manifest`` lists (``code_layer_files``), and
    ``python/jobrunner_certs/keyspaces-bundle.pem``.

    ``bytecode_python``: an interpreter of the runtime's version (``target_python()``) to precompile with.
    """
    files = code_layer_files(root, manifest)
    digest = hashlib.sha256()
    for name, path in files.items():
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(b"ca\0" + ca_bundle.read_bytes())
    digest.update(f"\0{PYTHON_VERSION}\0{'pyc' if bytecode_python else 'nopyc'}".encode())
    final = cache_dir / f"code-{digest.hexdigest()[:16]}"
    if final.is_dir():
        return final
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = cache_dir / f".{final.name}.{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    for name, path in files.items():
        (staging / "python" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, staging / "python" / name)
    (staging / "python" / "jobrunner_certs").mkdir(parents=True)
    shutil.copyfile(ca_bundle, staging / "python" / "jobrunner_certs" / "keyspaces-bundle.pem")
    if bytecode_python:
        _compile_or_discard(staging, bytecode_python)
    return _publish(staging, final, "code")


def empty_layer(directory: Path) -> Path:
    """A placeholder layer (tests): ``python/`` with one marker file, so the asset is not empty."""
    (directory / "python").mkdir(parents=True, exist_ok=True)
    (directory / "python" / "STUB").write_text("dependency layer stubbed for tests\n")
    return directory
