"""The benchmark's modules import one another without a cycle, wherever the import statement is.

An import inside a function, or under ``TYPE_CHECKING``, hides a cycle from Python at import time but not
from a reader: ``bench.context`` -> ``bench.workers`` -> ``bench.submit`` -> ``bench.context`` was one, dodged
by imports inside functions. This test reads every ``import`` and ``from ... import`` of a ``bench`` module
(module level, inside functions and under ``TYPE_CHECKING`` alike) and fails on any cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench"


def module_of(path: Path) -> str:
    parts = path.relative_to(BENCH.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_of(path): path for path in sorted(BENCH.rglob("*.py"))}


def bench_imports(path: Path, module: str) -> set[str]:
    """The ``bench`` modules that ``path`` (the module named ``module``) imports anywhere in its text, ``from
    bench import raw`` and relative imports included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom):  # relative: from . import x, from .x import y
            package = module.split(".")[: None if path.name == "__init__.py" else -1]
            base = ".".join([*package[: len(package) - node.level + 1], *([node.module] if node.module else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in found if name in MODULES and name != "bench"} - {module}


def import_graph() -> dict[str, set[str]]:
    return {name: bench_imports(path, name) for name, path in MODULES.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as the list of its modules (the first repeated at the end), or None."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" once every path from it is explored
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return [*path[path.index(target):], target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)) is not None:
            return cycle
    return None


def test_the_cycle_finder_finds_a_cycle_and_only_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_graph_sees_imports_inside_functions_and_under_type_checking(tmp_path: Path) -> None:
    module = tmp_path / "sample.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bench.context import Bench\n"
                      "def f() -> None:\n    from . import raw\n    from bench import seed\n    import bench.stats\n")
    assert bench_imports(module, "bench.sample") == {"bench.context", "bench.raw", "bench.seed", "bench.stats"}


def test_no_bench_module_imports_another_that_imports_it_back() -> None:
    assert len(MODULES) > 10  # the package was found
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle or [])
