"""The web dashboard's files (``dashboard/``), served at ``/ui`` beside the API on one origin.

This module is the one place that says which URL serves which file and with which headers: the local
gateway (``devstack.gateway``) answers by it, and the CDK construct (``infra.constructs.dashboard``)
deploys the same files to S3 behind CloudFront with the same paths and the same security headers.

The shell holds no data; every call it makes goes to the API on the same origin with the bearer token the
user pastes, so its Content-Security-Policy allows scripts, styles and requests from that origin only,
nothing inline, no framing. Only the files the table names are served: anything else under ``/ui`` is a
404, so nothing outside ``dashboard/`` (nor its README) can be reached by a crafted path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from http import HTTPStatus
from pathlib import Path

#: The dashboard's static files, at the top of the repository.
DASHBOARD_DIR = Path(__file__).resolve().parents[1] / "dashboard"
#: Where the page is served; its files are at ``PREFIX/<name>``, and it calls the API at the origin's root.
PREFIX = "/ui"
#: The page itself, served at ``PREFIX``.
INDEX = "index.html"
#: The kinds of file served, by suffix; any other file in the directory (the README) is not.
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Small files, and a deployment must show its own version at once.
    "Cache-Control": "no-cache",
}


def routes(directory: Path = DASHBOARD_DIR) -> dict[str, str]:
    """URL path -> file name in ``directory``: ``PREFIX`` for the page, ``PREFIX/<name>`` for its scripts and
    styles. Built from the directory's listing, never from a request, so a request can only pick one of these."""
    files = sorted(p.name for p in directory.iterdir() if p.is_file() and p.suffix in CONTENT_TYPES)
    table = {f"{PREFIX}/{name}": name for name in files if name != INDEX}
    if INDEX in files:
        table[PREFIX] = INDEX
    return table


def is_dashboard_path(path: str) -> bool:
    """Whether ``path`` (without its query) is the dashboard's to answer: ``PREFIX`` or anything under it."""
    return path == PREFIX or path.startswith(PREFIX + "/")


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


def answer(method: str, path: str, directory: Path = DASHBOARD_DIR) -> Answer:
    """What a request for ``path`` (a dashboard path) answers: the file with its headers, or 404 (no such file),
    or 405 (a method other than ``GET`` or ``HEAD``). The files are read once per process."""
    name = _routes(directory).get(path)
    if name is None:
        return _refusal(HTTPStatus.NOT_FOUND, "not found")
    if method not in ("GET", "HEAD"):
        return _refusal(HTTPStatus.METHOD_NOT_ALLOWED, "method not allowed", Allow="GET, HEAD")
    content_type = CONTENT_TYPES[Path(name).suffix]
    return Answer(HTTPStatus.OK, {"Content-Type": content_type, **SECURITY_HEADERS}, _read(directory, name))


def _refusal(status: HTTPStatus, text: str, **headers: str) -> Answer:
    return Answer(status, {"Content-Type": "text/plain; charset=utf-8", **SECURITY_HEADERS, **headers},
                  f"{text}\n".encode())


@cache
def _routes(directory: Path) -> dict[str, str]:
    return routes(directory)


@cache
def _read(directory: Path, name: str) -> bytes:
    return (directory / name).read_bytes()
