"""A real headless Chromium (Debian's, driven by Playwright) on the dashboard of the whole local stack."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.browser.chromium import LAUNCH_ARGS, chromium_path

if TYPE_CHECKING:
    from collections.abc import Iterator

    from playwright.sync_api import Browser, ConsoleMessage, Page, Playwright

    from devstack.stack import LocalStack

SCREENSHOTS = Path(__file__).resolve().parents[2] / ".local" / "screenshots"
#: The browser logs every 4xx the page receives on purpose (a rejected form); those are not faults.
_EXPECTED_CONSOLE = re.compile(r"^Failed to load resource: the server responded with a status of 4\d\d")


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def browser(playwright: Playwright) -> Iterator[Browser]:
    browser = playwright.chromium.launch(executable_path=chromium_path(), headless=True, args=LAUNCH_ARGS)
    yield browser
    browser.close()


class Dashboard:
    """The dashboard of ``stack`` open in ``page``; keeps what the browser console said."""

    def __init__(self, page: Page, stack: LocalStack, name: str) -> None:
        self.page = page
        self.stack = stack
        self.name = name
        self.console_errors: list[str] = []
        page.on("console", self._on_console)
        page.on("pageerror", lambda exc: self.console_errors.append(f"uncaught: {exc}"))

    def _on_console(self, message: ConsoleMessage) -> None:
        if message.type == "error" and not _EXPECTED_CONSOLE.match(message.text):
            self.console_errors.append(message.text)

    def open(self, fragment: str = "#/jobs", sign_in: bool = True) -> Page:
        """Open the dashboard at ``fragment``; signing in is pasting the stack's token and saving it."""
        self.page.goto(f"{self.stack.url}/ui{fragment}")
        if sign_in:
            self.page.get_by_placeholder("paste a bearer token").fill(self.stack.token)
            self.page.get_by_role("button", name="Save").click()
            self.page.locator("#conn.up").wait_for()
        return self.page

    def go(self, fragment: str) -> None:
        self.page.evaluate("fragment => { location.hash = fragment; }", fragment)

    def screenshot(self, step: str, full_page: bool = True) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{self.name}-{step}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        return path


@pytest.fixture
def dashboard(browser: Browser, local_stack: LocalStack, request: pytest.FixtureRequest) -> Iterator[Dashboard]:
    context = browser.new_context(viewport={"width": 1440, "height": 900}, timezone_id="UTC", locale="en-GB")
    context.set_default_timeout(15_000)
    page = context.new_page()
    board = Dashboard(page, local_stack, request.node.name)
    yield board
    board.screenshot("last")  # what the page showed when the test ended, passed or not
    errors: list[Any] = list(board.console_errors)
    context.close()
    assert not errors, f"the browser console reported errors: {errors}"
