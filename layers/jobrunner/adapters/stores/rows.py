"""Result rows as named tuples, without building a new class for every result set.

The driver's default ``named_tuple_factory`` calls ``collections.namedtuple`` (which compiles a new
class) once per result set, so a scan that reads hundreds of small result sets a second spends a
large share of its CPU there (measured: docs/benchmarks.md, "Findings"). This factory keeps
one class per column list. Rows behave exactly as the driver's do (attribute and index access).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

from cassandra.query import named_tuple_factory


class CachedRowFactory:
    """A ``row_factory`` for an ``ExecutionProfile``: named-tuple rows, one class per column list."""

    def __init__(self) -> None:
        self._classes: dict[tuple[str, ...], Any] = {}

    def __call__(self, colnames: list[str], rows: list[Any]) -> list[Any]:
        key = tuple(colnames)
        row_class: Any = self._classes.get(key)
        if row_class is None:
            try:
                row_class = self._classes[key] = namedtuple("Row", key)
            except ValueError:
                # Column names that are not identifiers: the driver's own factory renames them.
                fallback: list[Any] = named_tuple_factory(colnames, rows)
                return fallback
        return [row_class(*row) for row in rows]
