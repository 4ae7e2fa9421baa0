"""Every module of the runtime reads in one sitting, and every class does one job (issue 34).

A module over ``MAX_LINES`` lines, or a class with more than ``MAX_METHODS`` methods of its own (dunder methods
aside: they say how the class behaves as a value, not what it does), is split by concern instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "layers" / "jobrunner"
MAX_LINES = 450
MAX_METHODS = 25


def long_modules(root: Path) -> list[str]:
    """Each module under ``root`` longer than ``MAX_LINES`` lines, as "path: N lines"."""
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            found.append(f"{path.relative_to(root)}: {lines} lines")
    return found


def methods_of(node: ast.ClassDef) -> list[str]:
    """The names of the methods a class defines itself, dunder methods aside."""
    return [item.name for item in node.body
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            and not (item.name.startswith("__") and item.name.endswith("__"))]


def large_classes(root: Path) -> list[str]:
    """Each class under ``root`` with more than ``MAX_METHODS`` methods, as "path: Class has N methods"."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef) and len(methods := methods_of(node)) > MAX_METHODS:
                found.append(f"{path.relative_to(root)}: {node.name} has {len(methods)} methods")
    return found


def test_the_runtime_is_found() -> None:
    assert (PACKAGE / "wiring.py").is_file()


def test_no_module_of_the_runtime_is_over_the_line_limit() -> None:
    assert long_modules(PACKAGE) == []


def test_no_class_of_the_runtime_has_too_many_methods() -> None:
    assert large_classes(PACKAGE) == []


def write(root: Path, files: dict[str, str]) -> Path:
    for name, source in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(source)
    return root


@pytest.mark.parametrize(
    ("lines", "found"),
    [pytest.param(MAX_LINES, [], id="at the limit"),
     pytest.param(MAX_LINES + 1, [f"pkg/long.py: {MAX_LINES + 1} lines"], id="one line over")],
)
def test_the_checker_names_each_long_module(tmp_path: Path, lines: int, found: list[str]) -> None:
    root = write(tmp_path, {"pkg/long.py": "x = 1\n" * lines, "pkg/short.py": "x = 1\n"})
    assert long_modules(root) == found


def class_source(name: str, methods: int, dunders: int = 0) -> str:
    body = [f"    def m{i}(self) -> None: ...\n" for i in range(methods)]
    body += [f"    def __d{i}__(self) -> None: ...\n" for i in range(dunders)]
    return f"class {name}:\n" + "".join(body)


@pytest.mark.parametrize(
    ("source", "found"),
    [pytest.param(class_source("Small", MAX_METHODS, dunders=5), [], id="dunder methods aside"),
     pytest.param(class_source("Big", MAX_METHODS + 1), [f"pkg/big.py: Big has {MAX_METHODS + 1} methods"],
                  id="one method over"),
     pytest.param("def f() -> None:\n" + "\n".join("    " + line for line in
                                                     class_source("Inner", MAX_METHODS + 1).splitlines()) + "\n",
                  [f"pkg/big.py: Inner has {MAX_METHODS + 1} methods"], id="a class nested in a function")],
)
def test_the_checker_names_each_large_class(tmp_path: Path, source: str, found: list[str]) -> None:
    root = write(tmp_path, {"pkg/big.py": source})
    assert large_classes(root) == found
