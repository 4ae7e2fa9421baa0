"""The dashboard's files at /ui: which path serves which file, with which headers, and nothing else."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from devstack import dashboard
from devstack.dashboard import DASHBOARD_DIR, SECURITY_HEADERS, answer, is_dashboard_path, routes

if TYPE_CHECKING:
    from pathlib import Path


def test_the_dashboard_is_served_at_the_paths_the_page_loads() -> None:
    assert routes() == {
        "/ui": "index.html", "/ui/dom.js": "dom.js", "/ui/app.js": "app.js", "/ui/schedules.js": "schedules.js",
        "/ui/api.js": "api.js", "/ui/app.css": "app.css",
    }
    # and every file the page asks for is one of them (index.html loads them relative to /ui)
    page = (DASHBOARD_DIR / "index.html").read_text(encoding="utf-8")
    for path in routes():
        if path != "/ui":
            assert f'"{path[1:]}"' in page, path


def test_the_page_comes_with_its_security_headers() -> None:
    page = answer("GET", "/ui")

    assert page.status == 200
    assert page.headers["Content-Type"] == "text/html; charset=utf-8"
    assert page.body == (DASHBOARD_DIR / "index.html").read_bytes()
    csp = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert page.headers["Referrer-Policy"] == "no-referrer"
    assert page.headers["Cache-Control"] == "no-cache"


@pytest.mark.parametrize(("path", "content_type"), [
    ("/ui/app.js", "text/javascript; charset=utf-8"), ("/ui/app.css", "text/css; charset=utf-8")])
def test_scripts_and_styles_have_their_content_types(path: str, content_type: str) -> None:
    file = answer("HEAD", path)

    assert (file.status, file.headers["Content-Type"]) == (200, content_type)
    assert file.headers["Content-Security-Policy"] == SECURITY_HEADERS["Content-Security-Policy"]


@pytest.mark.parametrize("path", [
    "/ui/", "/ui/index.html", "/ui/README.md", "/ui/nothing.js", "/ui/../pyproject.toml", "/ui/../../etc/passwd",
    "/ui/%2e%2e/pyproject.toml", "/ui/..%2fpyproject.toml", "/ui//app.js", "/ui/./app.js", "/ui/app.js/",
])
def test_anything_else_under_ui_is_not_found(path: str) -> None:
    refused = answer("GET", path)

    assert refused.status == 404
    assert refused.body == b"not found\n"


def test_only_get_and_head_are_answered() -> None:
    refused = answer("POST", "/ui")

    assert refused.status == 405
    assert refused.headers["Allow"] == "GET, HEAD"


def test_only_the_pages_own_kinds_of_file_at_the_top_of_its_directory_are_served(tmp_path: Path) -> None:
    # Given a directory with the page, a script, a note, a subdirectory and a file beside the directory
    site = tmp_path / "site"
    (site / "sub").mkdir(parents=True)
    (site / "index.html").write_text("<p>page</p>")
    (site / "x.js").write_text("x")
    (site / "notes.txt").write_text("private")
    (site / "sub" / "y.js").write_text("y")
    (tmp_path / "secret.js").write_text("secret")

    # Then only the page and the script are served
    assert routes(site) == {"/ui": "index.html", "/ui/x.js": "x.js"}
    assert answer("GET", "/ui/x.js", site).body == b"x"
    for path in ("/ui/notes.txt", "/ui/sub/y.js", "/ui/../secret.js", "/ui/sub", "/ui/..%2fsecret.js"):
        assert answer("GET", path, site).status == 404, path


@pytest.mark.parametrize(("path", "ours"), [
    ("/ui", True), ("/ui/app.js", True), ("/ui/../jobs", True), ("/uix", False), ("/jobs", False), ("/", False)])
def test_the_dashboard_answers_ui_and_everything_under_it(path: str, ours: bool) -> None:
    assert is_dashboard_path(path) is ours


def test_the_prefix_is_the_one_the_page_strips_to_find_the_api() -> None:
    # app.js and api.js find the API by removing /ui from the page's path: the prefix must be that one
    for script in ("app.js", "api.js"):
        assert r"location.pathname.replace(/\/ui\/?$/, '')" in (DASHBOARD_DIR / script).read_text(encoding="utf-8")
    assert dashboard.PREFIX == "/ui"
