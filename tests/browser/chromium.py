"""Debian's Chromium for the browser tests: found where it is, installed with apt where it is not.

CI machines start fresh, so the browser tests install what they need themselves. Playwright drives this
system Chromium (``executable_path``); ``playwright install`` and its own browser builds are never used.
``python -m tests.browser.chromium`` installs it ahead of a test run.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class ChromiumUnavailable(RuntimeError):
    pass


def chromium_path() -> str:
    """The path of the system Chromium, installing Debian's ``chromium`` package first when it is missing."""
    found = _find()
    if found:
        return found
    install()
    found = _find()
    if not found:
        raise ChromiumUnavailable("apt-get installed 'chromium' but no chromium executable is on this machine")
    return found


def _find() -> str | None:
    if CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK):
        return str(CHROMIUM)
    return shutil.which("chromium")


def install() -> None:
    """``apt-get update && apt-get install -y chromium`` (needs root, as on the project's machines)."""
    if shutil.which("apt-get") is None:
        raise ChromiumUnavailable("no chromium and no apt-get: install Chromium and put it at /usr/bin/chromium")
    sudo: list[str] = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    log.warning("installing Debian's chromium package for the browser tests (once per machine)")
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        result = subprocess.run([*sudo, *command], env=env, capture_output=True, text=True, timeout=900, check=False)
        if result.returncode != 0:
            raise ChromiumUnavailable(f"{' '.join(command)} failed ({result.returncode}): {result.stderr[-2000:]}")


if __name__ == "__main__":
    print(chromium_path())
