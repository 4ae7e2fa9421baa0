"""Import time of each function's handler from unpacked layers, with and without their bytecode.

``python -m infra.coldstart [--runs 15]`` builds the two layers as ``make deploy`` does, for this
machine's architecture (so that the compiled modules load here), unpacks them like Lambda does (``/opt``
is read-only: ``-B``, nothing is written back), and imports ``functions/<name>/handler.py`` in a fresh
interpreter per run, with ``-I -S`` (no site-packages, no environment paths: only the layers). The time is
taken inside the process around the import, so the interpreter's own start is not counted. Prints a
Markdown table of medians.
The interpreter is the runtime's version (``target_python``); the figures are in docs/deploy.md.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from infra.layer_build import (
    PYTHON_VERSION,
    ROOT,
    build_code_layer,
    build_dependency_layer,
    compile_bytecode,
    target_python,
)
from jobrunner.config import Settings

FUNCTIONS = ("api", "tick", "scan", "results")
#: What the Lambda environment gives every function at import (the tracer and metrics read these).
LAMBDA_ENV = {"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "eu-west-1", "AWS_LAMBDA_FUNCTION_NAME": "coldstart",
              "POWERTOOLS_SERVICE_NAME": "jobrunner", "POWERTOOLS_METRICS_NAMESPACE": "JobRunner",
              "AWS_EXECUTION_ENV": f"AWS_Lambda_python{PYTHON_VERSION}",
              # The result key itself, not JOBRUNNER_RESULT_KEY_SECRET_ARN as deployed: in Lambda a function that
              # needs the key refuses to start without one, and a measurement must not call Secrets Manager.
              **Settings.of(result_key="coldstart-dummy-result-key-not-a-secret").to_environment(given_only=True)}
_PROBE = ("import sys, time; sys.path[:0] = {paths!r}; start = time.perf_counter(); import handler; "
          "print(time.perf_counter() - start)")


def import_seconds(python: str, function: Path, sites: list[Path]) -> float:
    paths = [str(function), *(str(s) for s in sites)]
    result = subprocess.run([python, "-I", "-S", "-B", "-c", _PROBE.format(paths=paths)], capture_output=True,
                            text=True, check=False, env={"PATH": "/usr/bin:/bin", **LAMBDA_ENV})
    if result.returncode != 0:
        raise RuntimeError(f"importing {function}/handler.py failed:\n{result.stderr[-3000:]}")
    return float(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--cache", type=Path, default=ROOT / ".local" / "coldstart")
    args = parser.parse_args(argv)
    python = target_python()
    if python is None:
        print(f"no Python {PYTHON_VERSION} interpreter found (set JOBRUNNER_LAYER_PYTHON)", file=sys.stderr)
        return 1
    architecture = {"aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), "x86_64")
    deps = build_dependency_layer(architecture=architecture, cache_dir=args.cache)
    code = build_code_layer(cache_dir=args.cache)
    with tempfile.TemporaryDirectory() as scratch:
        compiled = {}
        for name, layer in (("deps", deps), ("code", code)):
            compiled[name] = Path(scratch) / name
            shutil.copytree(layer / "python", compiled[name])
            compile_bytecode(compiled[name], python=python)
        variants = {"without bytecode": [code / "python", deps / "python"],
                    "with bytecode": [compiled["code"], compiled["deps"]]}
        print(f"Python {PYTHON_VERSION} ({python}), {platform.machine()}, {args.runs} runs each, median (min-max), ms")
        print("| handler | " + " | ".join(variants) + " | saved |")
        print("|---|" + "---|" * (len(variants) + 1))
        for function in FUNCTIONS:
            directory = ROOT / "functions" / function
            if not (directory / "handler.py").is_file():
                continue
            times: dict[str, list[float]] = {}
            for _ in range(args.runs):  # interleaved, so a slow moment of the machine hits both alike
                for variant, sites in variants.items():
                    times.setdefault(variant, []).append(import_seconds(python, directory, sites) * 1000)
            medians = {v: statistics.median(t) for v, t in times.items()}
            cells = [f"{medians[v]:.0f} ({min(t):.0f}-{max(t):.0f})" for v, t in times.items()]
            saved = medians["without bytecode"] - medians["with bytecode"]
            share = saved / medians["without bytecode"]
            print(f"| {function} | " + " | ".join(cells) + f" | {saved:.0f} ({share:.0%}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
