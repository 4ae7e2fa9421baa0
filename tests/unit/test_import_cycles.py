"""No two modules of the project import each other, directly or round a loop (issue 34).

A cycle means neither module can be read, tested or moved without the other; where one was found, a thing sat
on the wrong floor (``devstack/stack.py`` and ``environments.py``, ``stores/session.py`` and ``keyspaces.py``,
``domain/jobs.py`` and ``policies.py``). Every import counts, wherever it stands: at the top, inside a function,
or under ``TYPE_CHECKING`` (a type-only import is still a reader's dependency). An import counts toward the
module it names: ``from pkg import mod`` is an arrow to ``pkg.mod``, not to ``pkg/__init__.py``, so a package
whose ``__init__`` hands its modules' names on is no cycle with them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.unit.test_pure_core import module_name

ROOT = Path(__file__).resolve().parents[2]
#: (the directory a package is imported from, the package): the runtime, its clients and every tool around it.
PACKAGES = (
    (ROOT / "layers", "jobrunner"), (ROOT / "client", "jobrunner_client"), (ROOT, "devstack"), (ROOT, "infra"),
    (ROOT, "cql"), (ROOT, "chaos"), (ROOT, "bench"), (ROOT, "functions"), (ROOT, "examples"),
)


def modules_of(packages: tuple[tuple[Path, str], ...]) -> dict[str, tuple[Path, Path]]:
    """Each module's dotted name -> (its file, the directory it is imported from)."""
    return {module_name(path, root): (path, root)
            for root, package in packages for path in sorted((root / package).rglob("*.py"))}


def imports_of(path: Path, root: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``path`` names in an import statement (relative imports resolved)."""
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
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                found.add(submodule if submodule in known else module)
    return found & known


def import_graph(packages: tuple[tuple[Path, str], ...]) -> dict[str, set[str]]:
    """Each module -> the project's modules it imports."""
    modules = modules_of(packages)
    return {name: imports_of(path, root, set(modules)) - {name} for name, (path, root) in modules.items()}


def cycles_in(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import each other round a loop (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = stack[stack.index(node):]
            del stack[stack.index(node):]
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_projects_modules_are_found() -> None:
    graph = import_graph(PACKAGES)
    assert {"jobrunner.domain.jobs", "jobrunner.adapters.stores.session", "devstack.stack", "infra.stack",
            "jobrunner_client.cli.app", "cql.migrate"} <= set(graph)
    assert "jobrunner.domain.jobs" in graph["jobrunner.domain.placement"]


def test_no_modules_of_the_project_import_each_other_in_a_cycle() -> None:
    assert cycles_in(import_graph(PACKAGES)) == []


def write(root: Path, files: dict[str, str]) -> tuple[tuple[Path, str], ...]:
    for name, source in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(source)
    return ((root, "pkg"),)


@pytest.mark.parametrize(
    ("files", "cycles"),
    [
        pytest.param({"pkg/__init__.py": "", "pkg/a.py": "from pkg.b import B\nclass A: ...\n",
                      "pkg/b.py": "from pkg.a import A\nclass B: ...\n"},
                     [["pkg.a", "pkg.b"]], id="two modules"),
        pytest.param({"pkg/__init__.py": "", "pkg/a.py": "from pkg.b import B\n",
                      "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n"},
                     [["pkg.a", "pkg.b"]], id="through a type-only relative import"),
        pytest.param({"pkg/__init__.py": "", "pkg/a.py": "import pkg.b\n",
                      "pkg/b.py": "def f() -> None:\n    from pkg import c\n",
                      "pkg/c.py": "from pkg.a import x\n"},
                     [["pkg.a", "pkg.b", "pkg.c"]], id="round three, through a function's import"),
        pytest.param({"pkg/__init__.py": "from pkg.a import A\n", "pkg/a.py": "from pkg import b\nclass A: ...\n",
                      "pkg/b.py": "X = 1\n"},
                     [], id="a package handing on its modules' names"),
        pytest.param({"pkg/__init__.py": "from pkg.a import A\n", "pkg/a.py": "from pkg import X\nclass A: ...\n",
                      "pkg/b.py": "X = 1\n"},
                     [["pkg", "pkg.a"]], id="a module taking a name from its package's face"),
    ],
)
def test_the_checker_finds_cycles(tmp_path: Path, files: dict[str, str], cycles: list[list[str]]) -> None:
    assert cycles_in(import_graph(write(tmp_path, files))) == cycles
