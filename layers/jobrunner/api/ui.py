"""The web dashboard: a few static files served by the api itself, so it needs no build step and no CDN.

The shell (HTML, JS, CSS) is public; it holds no data. Every call it makes for data goes to the same API
with the bearer token the user pastes into the page, so the dashboard sees exactly what its tenant may see.
The ``#/api`` view (``api.js``) renders the public ``/openapi.json`` as a browsable reference.
The files are read once per container and served with a strict Content-Security-Policy: scripts, styles
and requests only from the API's own origin, nothing inline, no framing.
"""

from __future__ import annotations

from functools import cache
from http import HTTPStatus
from pathlib import Path
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

router = APIGatewayRouter()  # type: ignore[no-untyped-call]  # Powertools leaves its __init__ unannotated

ASSETS = Path(__file__).with_name("ui")
#: path -> (file under ASSETS, content type). These paths are also the API's public paths.
FILES = {
    "/ui": ("index.html", "text/html; charset=utf-8"),
    "/ui/dom.js": ("dom.js", "text/javascript; charset=utf-8"),
    "/ui/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/ui/schedules.js": ("schedules.js", "text/javascript; charset=utf-8"),
    "/ui/api.js": ("api.js", "text/javascript; charset=utf-8"),
    "/ui/app.css": ("app.css", "text/css; charset=utf-8"),
}
PATHS = frozenset(FILES)
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Small files, and a deployment must show its own version at once.
    "Cache-Control": "no-cache",
}


@cache
def _asset(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


def _serve(path: str) -> Response[Any]:
    name, content_type = FILES[path]
    return Response(status_code=HTTPStatus.OK, content_type=content_type, body=_asset(name),
                    headers=dict(SECURITY_HEADERS))


@router.get("/ui", include_in_schema=False)
def dashboard() -> Response[Any]:
    return _serve("/ui")


@router.get("/ui/dom.js", include_in_schema=False)
def dashboard_dom_helpers() -> Response[Any]:
    """The DOM helpers app.js and api.js share (``window.JobDom``)."""
    return _serve("/ui/dom.js")


@router.get("/ui/app.js", include_in_schema=False)
def dashboard_script() -> Response[Any]:
    return _serve("/ui/app.js")


@router.get("/ui/schedules.js", include_in_schema=False)
def dashboard_schedules() -> Response[Any]:
    return _serve("/ui/schedules.js")


@router.get("/ui/api.js", include_in_schema=False)
def dashboard_api_reference() -> Response[Any]:
    """The API reference view (``#/api``): renders ``/openapi.json`` and sends "try it" requests."""
    return _serve("/ui/api.js")


@router.get("/ui/app.css", include_in_schema=False)
def dashboard_styles() -> Response[Any]:
    return _serve("/ui/app.css")
