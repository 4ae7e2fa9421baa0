"""The resolver's table of routes (``jobrunner.api.resolver``) agrees with the resolver on every path."""

from __future__ import annotations

from typing import Any

import pytest
from aws_lambda_powertools.event_handler.api_gateway import Router

from jobrunner.api.resolver import Resolver


def resolver() -> Resolver:
    """A resolver with a static and a dynamic route on one path, one of them included from a router."""
    app = Resolver()
    items = Router()  # type: ignore[no-untyped-call]

    @app.get("/items")
    def list_items() -> dict[str, Any]:
        return {"route": "list"}

    @items.post("/items/batch")
    def batch() -> dict[str, Any]:
        return {"route": "batch"}

    @items.post("/items/<item_id>")
    def change(item_id: str) -> dict[str, Any]:
        return {"route": "change", "item_id": item_id}

    app.include_router(items)
    return app


def status(app: Resolver, method: str, path: str) -> int:
    event = {"httpMethod": method, "path": path, "headers": {}, "multiValueHeaders": {}, "body": None,
             "queryStringParameters": None, "requestContext": {"requestId": "r-1", "stage": "test"}}
    return int(app.resolve(event, None)["statusCode"])  # type: ignore[arg-type]


def test_routes_included_from_a_router_are_in_the_table_static_before_dynamic() -> None:
    app = resolver()
    assert [(entry.method, entry.template) for entry in app.routes] == [
        ("GET", "/items"), ("POST", "/items/batch"), ("POST", "/items/<item_id>")]
    assert app.routes.find("POST", "/items/batch") == ("/items/batch", {})
    assert app.routes.find("POST", "/items/i-1") == ("/items/<item_id>", {"item_id": "i-1"})
    assert app.routes.allowed("/items") == ["GET"] and app.routes.allowed("/items/") == ["GET"]


@pytest.mark.parametrize("path", ["/items", "/items/batch", "/items/i-1", "/items/a%22b", "/items/a b", '/items/a"b',
                                  "/items/€", "/items/a#b", "/items/a/b", "/nope"])
@pytest.mark.parametrize("method", ["GET", "POST", "PUT"])
def test_the_table_finds_a_route_exactly_when_the_resolver_serves_it(method: str, path: str) -> None:
    # Given the resolver's own pattern in the table, even for characters its pattern refuses (", €, #)
    app = resolver()
    served = status(app, method, path) != 404
    # Then the table and the resolver agree on whether a route serves the request
    assert (app.routes.find(method, path) is not None) == served


def test_every_route_documents_the_shared_refusals_and_its_own_answers_win() -> None:
    # Given a resolver whose every route may be refused 401, and 415 when its method has a body
    def shared(method: str, _rule: str) -> dict[int, Any]:
        body = {415: {"description": "shared 415"}} if method == "POST" else {}
        return {401: {"description": "shared 401"}, **body}

    app = Resolver(refusals=shared)
    items = Router()  # type: ignore[no-untyped-call]

    @app.get("/items", responses={200: {"description": "a page"}})
    def list_items() -> dict[str, Any]:
        return {}

    @items.post("/items/<item_id>", responses={200: {"description": "changed"}, 401: {"description": "its own 401"}})
    def change(item_id: str) -> dict[str, Any]:
        return {}

    app.include_router(items)  # gives the route's arguments by position

    # When the document is generated
    paths = app.get_openapi_schema().model_dump(by_alias=True, exclude_none=True)["paths"]

    # Then each route has the shared refusals for its method, sorted with its own answers, which win
    listing, changing = paths["/items"]["get"]["responses"], paths["/items/{item_id}"]["post"]["responses"]
    assert [(status, listing[status]["description"]) for status in listing] == [
        (422, "Validation Error"), (200, "a page"), (401, "shared 401")]  # Powertools' own 422 first
    assert [(status, changing[status]["description"]) for status in changing] == [
        (422, "Validation Error"), (200, "changed"), (401, "its own 401"), (415, "shared 415")]


def test_a_literal_path_is_its_own_routes_only() -> None:
    app = resolver()

    @app.get("/items/<item_id>")
    def read(item_id: str) -> dict[str, Any]:
        return {}

    assert app.routes.allowed("/items/batch") == ["POST"] and app.routes.find("GET", "/items/batch") is None
    assert app.routes.allowed("/items/i-1") == ["GET", "POST"]
    assert app.routes.find("GET", "/items/i-1") == ("/items/<item_id>", {"item_id": "i-1"})
