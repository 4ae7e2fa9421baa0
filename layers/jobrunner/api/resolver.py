"""Powertools' REST resolver, keeping a table of the routes it registers.

Powertools answers a request no route matches through its not-found hook (``app.not_found``), whatever the
reason: no route for the path, or none for the method. The table tells the two apart (404, or 405 with an
``Allow`` header), names a request's span by its route, and lets the edge checks (``body_limits.py``) skip a
request that will be refused anyway. It is filled by ``route``, the one method through which every route is
registered (``get``, ``post``, ... and ``include_router`` call it), so it needs none of the resolver's
internals.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

#: A route's ``<name>`` part: one path segment.
_PARAMETER = re.compile(r"<(\w+)>")


@dataclass(frozen=True)
class RouteEntry:
    method: str
    #: As the route was written (``/jobs/<job_id>``): what a span is named after.
    template: str
    pattern: re.Pattern[str]


class RouteTable:
    """(method, path template) of every route; static routes match before dynamic ones, as in the resolver."""

    def __init__(self) -> None:
        self._entries: list[RouteEntry] = []

    def add(self, method: str, template: str) -> None:
        pattern = "".join(f"(?P<{part}>[^/]+)" if index % 2 else re.escape(part)
                          for index, part in enumerate(_PARAMETER.split(template)))
        self._entries.append(RouteEntry(method.upper(), template, re.compile(f"^{pattern}/*$")))
        self._entries.sort(key=lambda entry: entry.pattern.groups > 0)

    def __iter__(self) -> Iterator[RouteEntry]:
        return iter(self._entries)

    def allowed(self, path: str) -> list[str]:
        """The methods some route serves ``path`` with, sorted (none: no route has the path)."""
        return sorted({entry.method for entry in self._entries if entry.pattern.match(path)})

    def find(self, method: str, path: str) -> tuple[str, dict[str, str]] | None:
        """The template of the route that serves (``method``, ``path``) and the path's parameters, or None."""
        for entry in self._entries:
            match = entry.pattern.match(path) if entry.method == method else None
            if match is not None:
                return entry.template, match.groupdict()
        return None


class Resolver(APIGatewayRestResolver):
    """``APIGatewayRestResolver`` with request validation on, and ``routes``: the table of its routes."""

    def __init__(self) -> None:
        super().__init__(enable_validation=True)
        self.routes = RouteTable()

    def route(self, rule: str, method: str | list[str] | tuple[str], *args: Any,
              **kwargs: Any) -> Callable[[Any], Any]:
        for one in (method,) if isinstance(method, str) else method:
            self.routes.add(one, rule)
        return super().route(rule, method, *args, **kwargs)
