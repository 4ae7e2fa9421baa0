"""The layers: requirements derived from pyproject, the exact pip command line, caching, the code layer."""

from __future__ import annotations

import ast
import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infra.coldstart import LAMBDA_ENV
from infra.layer_build import (
    PLATFORMS,
    PYTHON_ENV,
    PYTHON_VERSION,
    build_code_layer,
    build_dependency_layer,
    code_layer_files,
    layer_requirements,
    pip_install_command,
    target_python,
)

ROOT = Path(__file__).resolve().parents[2]


#: The command line's own dependencies: the client distribution's (client/pyproject.toml), never the server's.
CLIENT_ONLY = frozenset({"typer", "rich"})


def test_requirements_are_the_runtime_dependencies_plus_certifi_and_none_of_the_clients() -> None:
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    requirements = layer_requirements()

    assert declared == requirements[:-1]
    assert requirements[-1] == "certifi"
    assert not any(r.startswith(tuple(CLIENT_ONLY)) for r in requirements)


def test_the_cli_only_packages_are_not_imported_by_the_functions_code() -> None:
    imported = set()
    for path in (ROOT / "layers" / "jobrunner").rglob("*.py"):
        if path.name == "cli.py" or "cli" in path.relative_to(ROOT / "layers" / "jobrunner").parts[:-1]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])

    assert not imported & CLIENT_ONLY


@pytest.mark.parametrize("architecture", ["arm64", "x86_64"])
def test_pip_command_installs_manylinux_wheels_for_lambda_python_313(architecture: str) -> None:
    command = pip_install_command(requirements=Path("/r.txt"), constraints=Path("/c.txt"), target=Path("/t/python"),
                                  architecture=architecture, python="/venv/bin/python")

    assert command == [
        "/venv/bin/python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
        "--target", "/t/python",
        "--platform", f"manylinux2014_{'aarch64' if architecture == 'arm64' else 'x86_64'}",
        "--implementation", "cp", "--python-version", "3.13", "--abi", "cp313",
        "--only-binary=:all:",
        "--requirement", "/r.txt", "--constraint", "/c.txt",
    ]
    assert PLATFORMS[architecture].startswith("manylinux2014_")


def test_dependency_layer_runs_pip_once_then_reuses_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given pip replaced by a fake that records its command and writes a package
    calls: list[list[str]] = []

    def fake_run(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        target = Path(command[command.index("--target") + 1])
        (target / "certifi").mkdir(parents=True)
        (target / "certifi" / "cacert.pem").write_text("PEM")
        (target / "bin").mkdir()
        assert "certifi" in Path(command[command.index("--requirement") + 1]).read_text().split()
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_run)

    # When the layer is built twice
    first = build_dependency_layer(architecture="arm64", cache_dir=tmp_path)
    second = build_dependency_layer(architecture="arm64", cache_dir=tmp_path)

    # Then pip ran once, with the platform of the architecture, into <layer>/python
    assert first == second
    assert len(calls) == 1
    assert calls[0][calls[0].index("--platform") + 1] == "manylinux2014_aarch64"
    assert (first / "python" / "certifi" / "cacert.pem").read_text() == "PEM"
    assert not (first / "python" / "bin").exists()
    assert not (first / "requirements.txt").exists()
    assert [p.name for p in tmp_path.iterdir()] == [first.name]


def test_a_failed_pip_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess, "run", lambda command, **_: subprocess.CompletedProcess(command, 1, "", "boom"))

    with pytest.raises(RuntimeError, match="boom"):
        build_dependency_layer(architecture="x86_64", cache_dir=tmp_path)

    assert list(tmp_path.iterdir()) == []


def test_code_layer_packages_jobrunner_under_python(tmp_path: Path) -> None:
    layer = build_code_layer(cache_dir=tmp_path / "cache")

    assert (layer / "python" / "jobrunner" / "entrypoints.py").is_file()
    assert not list(layer.rglob("__pycache__"))
    assert build_code_layer(cache_dir=tmp_path / "cache") == layer


#: Modules a function imports at its first call rather than at import: ``wiring.Container``'s adapters for the
#: AWS settings, and the Keyspaces session. The layer test imports them after each handler, as a first call
#: would; a test below keeps this list equal to the lazy imports the shipped code makes.
FIRST_CALL_IMPORTS = {
    "jobrunner.adapters.stores.cassandra": "Container.store",
    "jobrunner.adapters.stores.session": "Container.store (connect)",
    "jobrunner.adapters.stores.keyspaces": "session.connect with CASSANDRA_MODE=keyspaces",
    "jobrunner.adapters.stores.changes": "Container.changes (JOBRUNNER_CHANGE_LOG, on by default)",
    "jobrunner.adapters.stores.calendars": "Container.calendars",
    "jobrunner.adapters.publishers.kafka": "Container.publisher",
    "jobrunner.adapters.leases.dynamodb": "Container.leases",
    "jobrunner.adapters.quotas.dynamodb": "Container.quotas, when a tenant's limit is counted",
    "jobrunner.adapters.invokers.lambda_": "Container.invoker (the tick; writers that wake scans)",
    "jobrunner.adapters.deliverers.routing": "Container.delivery (the delivery function)",
    "jobrunner.adapters.deliverers.https": "the delivery's first HTTPS target",
    "jobrunner.adapters.deliverers.lambda_": "the delivery's first Lambda target",
    "jobrunner.adapters.deliverers.sqs": "the delivery's first SQS target",
    "jobrunner.adapters.webhook_secrets.secretsmanager": "the delivery's first HTTPS target, in Lambda",
}
#: Lazy imports of the shipped code that no function makes in AWS (so the layer does not carry them).
LOCAL_ONLY_IMPORTS = {
    "jobrunner.adapters.publishers.tracing": "Container.publisher under telemetry.enabled(): the local stack's spans",
    "jobrunner.adapters.webhook_secrets.memory": "Container.delivery off Lambda (or JOBRUNNER_WEBHOOK_SECRETS set)",
}
#: The AWS configuration at import: what Lambda sets, and the settings of a deployed stack that choose adapters.
AWS_ENV = {**LAMBDA_ENV, "CASSANDRA_MODE": "keyspaces", "CASSANDRA_PORT": "9142", "KAFKA_SECURITY": "msk-iam",
           "JOBRUNNER_WAKE_SCANS": "true"}
_IMPORTED_FROM_LAYER = """
import importlib, json, sys
sys.path[:0] = {paths!r}
import handler
for name in {first_call!r}:
    importlib.import_module(name)
print(json.dumps(sorted({{m.__file__ for m in list(sys.modules.values())
                         if (getattr(m, "__file__", None) or "").startswith({site!r})}})))
"""


def _modules_of(files: list[Path]) -> dict[str, Path]:
    return {".".join(p.with_suffix("").parts).removesuffix(".__init__"): p for p in files}


def test_the_code_layer_holds_only_what_the_handlers_import_in_aws_and_every_handler_imports_from_it(
    tmp_path: Path,
) -> None:
    """The rule: every ``.py`` file of the layer is imported when some handler of ``functions/`` is imported in
    the AWS configuration and then makes its first call (``FIRST_CALL_IMPORTS``), with nothing on ``sys.path``
    but the function, the code layer and the dependencies (this venv's); the only other file is the CA bundle."""
    import json
    import os
    import sysconfig

    layer = build_code_layer(cache_dir=tmp_path / "cache")
    site = layer / "python"
    dependencies = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    handlers = sorted((ROOT / "functions").glob("*/handler.py"))
    assert len(handlers) >= 4

    # When each handler is imported in a fresh interpreter (-I -S: no environment paths, no .pth files) ...
    imported: set[str] = set()
    failed: dict[str, str] = {}
    for handler in handlers:
        probe = _IMPORTED_FROM_LAYER.format(paths=[str(handler.parent), str(site), *dependencies],
                                            first_call=sorted(FIRST_CALL_IMPORTS), site=str(site) + os.sep)
        result = subprocess.run([sys.executable, "-I", "-S", "-B", "-c", probe], capture_output=True, text=True,
                                check=False, env={"PATH": os.environ.get("PATH", ""), **AWS_ENV})
        if result.returncode != 0:
            failed[handler.parent.name] = result.stderr[-2000:]
            continue
        imported |= {str(Path(f).relative_to(site)) for f in json.loads(result.stdout.splitlines()[-1])}

    # Then every one imports from the layer, and the layer holds nothing that none of them imports
    assert failed == {}
    files = sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file())
    assert [f for f in files if f.endswith(".py") and f not in imported] == []
    assert [f for f in files if not f.endswith(".py")] == ["jobrunner_certs/keyspaces-bundle.pem"]


def test_the_first_call_imports_are_the_lazy_imports_of_the_shipped_code() -> None:
    shipped = _modules_of([Path(name) for name in code_layer_files()])
    lazy: set[str] = set()
    for path in code_layer_files().values():
        for function in ast.walk(ast.parse(path.read_text())):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    lazy |= {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in shipped}
                    lazy |= {node.module} & {*shipped, *LOCAL_ONLY_IMPORTS}
                elif isinstance(node, ast.Import):
                    lazy |= {a.name for a in node.names} & {*shipped, *LOCAL_ONLY_IMPORTS}

    # and the container's adapters, each imported by its name in ``wiring.ADAPTER_MODULES`` when first needed
    from jobrunner.wiring import ADAPTER_MODULES

    lazy |= set(ADAPTER_MODULES.values())
    assert lazy == set(FIRST_CALL_IMPORTS) | set(LOCAL_ONLY_IMPORTS)
    assert set(FIRST_CALL_IMPORTS) <= set(shipped)
    assert not set(LOCAL_ONLY_IMPORTS) & set(shipped)


def test_the_code_layer_leaves_out_the_clients_the_local_only_adapters_and_the_schema_tools() -> None:
    files = code_layer_files()

    assert [f for f in files if f.startswith("jobrunner_client/")] == ["jobrunner_client/__init__.py",
                                                                        "jobrunner_client/protocol.py"]
    assert not [f for f in files if not f.endswith((".py", ".pem"))]  # no dashboard asset, no data file
    assert not {"jobrunner/adapters/stores/memory.py", "jobrunner/adapters/clocks/manual.py",
                "jobrunner/adapters/invokers/threads.py", "jobrunner/adapters/publishers/tracing.py"} & set(files)
    assert not [f for f in files if f.startswith("cql/") or "cql_schema" in f or f.endswith("migrate.py")]


def test_a_code_layer_entry_may_name_another_directory_and_must_match_a_file(tmp_path: Path) -> None:
    (tmp_path / "client" / "pkg").mkdir(parents=True)
    (tmp_path / "client" / "pkg" / "protocol.py").write_text("X = 1\n")
    (tmp_path / "client" / "pkg" / "cli.py").write_text("Y = 2\n")

    layer = build_code_layer(cache_dir=tmp_path / "cache", root=tmp_path, manifest=[("client", "pkg/protocol.py")])

    assert sorted(str(p.relative_to(layer)) for p in layer.rglob("*") if p.is_file()) == [
        "python/jobrunner_certs/keyspaces-bundle.pem", "python/pkg/protocol.py"]
    with pytest.raises(ValueError, match=r"client/pkg/gone\.py matches no file"):
        code_layer_files(tmp_path, [("client", "pkg/protocol.py"), ("client", "pkg/gone.py")])


def test_code_layer_can_carry_a_ca_bundle(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")

    layer = build_code_layer(cache_dir=tmp_path / "cache", ca_bundle=bundle)

    assert (layer / "python" / "jobrunner_certs" / "keyspaces-bundle.pem").read_text() == bundle.read_text()


#: SHA-256 fingerprints of the roots the Keyspaces developer guide lists for its TLS endpoints.
KEYSPACES_ROOTS = {
    "Amazon Root CA 1": "8ECDE6884F3D87B1125BA31AC3FCB13D7016DE7F57CC904FE1CB97C6AE98196E",
    "Amazon Root CA 2": "1BA5B2AA8C65401A82960118F80BEC4F62304D83CEC4713A19C39C011EA46DB4",
    "Amazon Root CA 3": "18CE6CFE7BF14E60B2E347B8DFE868CB31D02EBB3ADA271569F50343B46DB3A4",
    "Amazon Root CA 4": "E35D28419ED02025CFA69038CD623962458DA5C695FBDEA3C22B0BFB25897092",
    "Starfield Class 2 (sf-class2-root.crt)": "1465FA205397B876FAA6F0A9958E5590E40FCC7FAA4FB7C2C8677521FB5FB658",
}


def _fingerprints(pem: bytes) -> set[str]:
    import ssl

    blocks = pem.decode().split("-----BEGIN CERTIFICATE-----")[1:]
    ders = [ssl.PEM_cert_to_DER_cert("-----BEGIN CERTIFICATE-----" + b.split("-----END CERTIFICATE-----")[0]
                                     + "-----END CERTIFICATE-----\n") for b in blocks]
    return {hashlib.sha256(der).hexdigest().upper() for der in ders}


def test_the_shipped_keyspaces_bundle_holds_every_documented_root(tmp_path: Path) -> None:
    # Given the code layer built with its default bundle
    layer = build_code_layer(cache_dir=tmp_path / "cache")
    shipped = (layer / "python" / "jobrunner_certs" / "keyspaces-bundle.pem").read_bytes()

    # Then it carries every root, the Starfield Class 2 one included (certifi dropped it), and nothing else
    assert _fingerprints(shipped) == set(KEYSPACES_ROOTS.values())


def test_the_shipped_bundle_loads_into_a_verifying_tls_context() -> None:
    import ssl

    from infra.layer_build import KEYSPACES_BUNDLE_SOURCE

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(str(KEYSPACES_BUNDLE_SOURCE))

    assert context.cert_store_stats()["x509_ca"] == len(KEYSPACES_ROOTS)


# Bytecode: /opt is read-only in Lambda, so a layer without .pyc files is compiled by every cold start.

HERE = f"{sys.version_info.major}.{sys.version_info.minor}"


def _target() -> tuple[str, str]:
    """An interpreter to compile with, and its version: the runtime's where this machine has one, else this
    one. Compiling is the same with either; ``make runtime-check`` imports the layers on the runtime's own."""
    python = target_python()
    return (python, PYTHON_VERSION) if python is not None else (sys.executable, HERE)


def test_target_python_finds_an_interpreter_of_the_version_asked_or_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    python = target_python(HERE)
    assert python is not None
    version = subprocess.run([python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                             text=True, check=True).stdout.strip()

    assert version == str(sys.version_info[:2])
    assert target_python("2.1") is None
    monkeypatch.setenv(PYTHON_ENV, python)
    assert target_python(HERE) == python


def test_code_layer_ships_unchecked_hash_bytecode_of_the_runtime_version(tmp_path: Path) -> None:
    python, version = _target()

    layer = build_code_layer(cache_dir=tmp_path / "cache", bytecode_python=python)

    # Then every module has its .pyc, tagged for the compiling interpreter's version, from its compiler
    print_magic = "import importlib.util, sys; sys.stdout.write(importlib.util.MAGIC_NUMBER.hex())"
    magic = subprocess.run([python, "-c", print_magic], capture_output=True, text=True, check=True).stdout
    tag = f"cpython-{version.replace('.', '')}"
    sources = list((layer / "python" / "jobrunner").rglob("*.py"))
    assert sources
    for source in sources:
        pyc = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        header = pyc.read_bytes()[:8]
        assert header[:4].hex() == magic, pyc
        # flags (PEP 552): bit 0 hash-based, bit 1 check_source; unchecked = hash-based only
        assert int.from_bytes(header[4:8], "little") == 0b01, pyc
    # And a build with bytecode is cached apart from one without
    assert build_code_layer(cache_dir=tmp_path / "cache") != layer


def test_the_runtime_imports_the_shipped_bytecode_even_when_the_sources_mtimes_are_lost(tmp_path: Path) -> None:
    import os

    python, _ = _target()
    layer = build_code_layer(cache_dir=tmp_path / "cache", bytecode_python=python)
    site = layer / "python"
    # Given the zip round trip resets every source's mtime
    for source in site.rglob("*.py"):
        os.utime(source, (0, 0))

    # When the runtime imports a module from the read-only layer (no bytecode may be written)
    result = subprocess.run([python, "-v", "-c", "import jobrunner.domain.segments"], capture_output=True, text=True,
                            check=True, env={"PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1",
                                             "PATH": os.environ.get("PATH", "")})

    # Then it loads the shipped .pyc, compiling nothing
    assert f"code object from '{site}/jobrunner/domain/__pycache__/segments.cpython-" in result.stderr
    assert "bytecode is stale" not in result.stderr


def test_dependency_layer_is_compiled_after_pip_with_the_target_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    python, version = _target()
    real_run = subprocess.run
    commands: list[list[str]] = []

    def fake_pip(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        commands.append(command)
        if "pip" not in command:
            return real_run(command, **kwargs)
        target = Path(command[command.index("--target") + 1])
        (target / "certifi").mkdir(parents=True)
        (target / "certifi" / "__init__.py").write_text("where = 'here'\n")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_pip)

    layer = build_dependency_layer(architecture="arm64", cache_dir=tmp_path, bytecode_python=python)

    compile_command = next(c for c in commands if "compileall" in c)
    assert compile_command[0] == python
    assert compile_command[compile_command.index("--invalidation-mode") + 1] == "unchecked-hash"
    assert compile_command[compile_command.index("-p") + 1] == "/opt/python"
    tag = f"cpython-{version.replace('.', '')}"
    assert (layer / "python" / "certifi" / "__pycache__" / f"__init__.{tag}.pyc").is_file()


def test_a_synth_without_the_runtimes_interpreter_warns_that_the_layers_carry_no_bytecode(
    monkeypatch: pytest.MonkeyPatch, offline_context: dict[str, Any], results_code: Path, tmp_path: Path,
) -> None:
    import aws_cdk as cdk
    from aws_cdk.assertions import Annotations, Match

    import infra.app

    monkeypatch.setattr(infra.app, "target_python", lambda: None)

    stack = infra.app.build_app(cdk.App(outdir=str(tmp_path), context=offline_context), results_code=results_code,
                                nag=False)

    Annotations.from_stack(stack).has_warning("*", Match.string_like_regexp("without bytecode"))


def test_the_functions_runtime_is_the_version_the_layers_are_built_and_compiled_for() -> None:
    from infra.constructs.function import RUNTIME

    # python3.11 is deprecated in 2027; the wheels (pip --python-version) and the bytecode follow the runtime
    assert RUNTIME.name == f"python{PYTHON_VERSION}" == "python3.13"
    command = pip_install_command(requirements=Path("/r"), constraints=Path("/c"), target=Path("/t"),
                                  architecture="arm64")
    assert command[command.index("--python-version") + 1] == PYTHON_VERSION
    assert command[command.index("--abi") + 1] == "cp313"
