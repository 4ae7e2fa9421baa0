"""Powertools' REST resolver, keeping a table of the routes it registers, each with the resolver's own pattern.

Powertools answers a request no route matches through its not-found hook (``app.not_found``), whatever the
reason: no route for the path, or none for the method. The table tells the two apart (404, or 405 with an
``Allow`` header), names a request's span by its route, and lets the edge checks (``body_limits.py``) skip a
request that will be refused anyway. It is filled by ``route``, the one method through which every route is
registered (``get``, ``post``, ... and ``include_router`` call it), so it needs none of the resolver's route
lists; and it matches a path with the pattern the resolver compiles for the route (``_compile_regex``), so
the two agree on which route a path is, but for one case: the table gives a path a static route names to that
route only (``RouteTable``), and the api answers such a request from the table, without resolving it.

``route`` also adds to each route's OpenAPI ``responses`` what the api may answer it with whatever the route
does (``refusals``: the edge's checks of a request, before the route runs), so that no route can leave one out.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver

if TYPE_CHECKING:
    import re
    from collections.abc import Callable, Iterator, Mapping

    from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

    #: The responses the api may answer a route with whatever it does, given its method and path template.
    Refusals = Callable[[str, str], Mapping[int, OpenAPIResponse]]


@dataclass(frozen=True)
class RouteEntry:
    method: str
    #: As the route was written (``/jobs/<job_id>``): what a span is named after.
    template: str
    #: The resolver's own pattern for ``template``.
    pattern: re.Pattern[str]

    def match(self, path: str) -> re.Match[str] | None:
        """The pattern on ``path``, trailing slashes left off: ``PUT /jobs/`` is 405 as ``PUT /jobs`` is."""
        return self.pattern.match(path.rstrip("/") or "/")


class RouteTable:
    """(method, path template, pattern) of every route; static routes match before dynamic ones, as in the
    resolver. A path a static route names (``/jobs/batch``) is that route's only, never a parameter's value
    of a dynamic one (``/jobs/<job_id>``), as in OpenAPI: ``GET /jobs/batch`` has no route (405), where the
    resolver alone would look for the job ``batch``."""

    def __init__(self) -> None:
        self._entries: list[RouteEntry] = []

    def add(self, method: str, template: str, pattern: re.Pattern[str]) -> None:
        self._entries.append(RouteEntry(method.upper(), template, pattern))
        self._entries.sort(key=lambda entry: entry.pattern.groups > 0)

    def __iter__(self) -> Iterator[RouteEntry]:
        return iter(self._entries)

    def allowed(self, path: str) -> list[str]:
        """The methods some route serves ``path`` with, sorted (none: no route has the path)."""
        return sorted({entry.method for entry, _ in self._serving(path)})

    def find(self, method: str, path: str) -> tuple[str, dict[str, str]] | None:
        """The template of the route that serves (``method``, ``path``) and the path's parameters, or None."""
        return next(((entry.template, match.groupdict()) for entry, match in self._serving(path)
                     if entry.method == method), None)

    def _serving(self, path: str) -> list[tuple[RouteEntry, re.Match[str]]]:
        """The routes whose pattern matches ``path``: the static ones only, when there are any."""
        matching = [(entry, match) for entry in self._entries if (match := entry.match(path)) is not None]
        static = [(entry, match) for entry, match in matching if entry.pattern.groups == 0]
        return static or matching


class Resolver(APIGatewayRestResolver):
    """``APIGatewayRestResolver`` with request validation on, ``routes``: the table of its routes, and each
    route's documented responses completed with ``refusals`` (what the route declares wins)."""

    def __init__(self, refusals: Refusals | None = None) -> None:
        super().__init__(enable_validation=True)
        self.routes = RouteTable()
        self._refusals = refusals

    def route(self, rule: str, method: str | list[str] | tuple[str], *args: Any,
              **kwargs: Any) -> Callable[[Any], Any]:
        methods = (method,) if isinstance(method, str) else tuple(method)
        for one in methods:
            self.routes.add(one, rule, self._compile_regex(rule))  # the pattern the resolver registers the route with
        if self._refusals is None:
            return super().route(rule, method, *args, **kwargs)
        # By name, whether the caller gave them by name or by position (include_router gives them by position)
        arguments = inspect.signature(super().route).bind(rule, method, *args, **kwargs).arguments
        shared: dict[int, OpenAPIResponse] = {}
        for one in methods:
            shared.update(self._refusals(one.upper(), rule))
        declared = arguments.get("responses") or {}
        arguments["responses"] = dict(sorted({**shared, **declared}.items()))
        return super().route(**arguments)
