"""Fetching the servers' jars: Maven copies the runtime dependencies of ``devstack/<name>/pom.xml`` into
``.local/<name>/lib``, once per version of the pom (a marker holds the pom's hash and the jar list)."""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import time
from typing import TYPE_CHECKING

from devstack.servers import settings
from devstack.servers.settings import DEVSTACK_DIR, LOG_TAIL_LINES, DevstackError

if TYPE_CHECKING:
    from pathlib import Path

log = logging.getLogger(__name__)

MAVEN_COPY_GOAL = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies"


def _jars_are_complete(lib: Path, pom_digest: str) -> bool:
    """True if ``lib`` holds every jar of the last successful copy for this exact pom."""
    marker = lib / ".devstack-complete"
    if not marker.is_file():
        return False
    digest, *jars = marker.read_text().split()
    return digest == pom_digest and bool(jars) and all((lib / jar).is_file() for jar in jars)


def fetch_jars(name: str) -> float:
    """Copy the runtime jars of ``devstack/<name>/pom.xml`` into ``.local/<name>/lib``.

    Does nothing if the folder is already complete for the current pom (a marker file holds
    the pom's hash and the jar list). Returns the seconds spent fetching (0.0 if nothing was
    done). Jars come from Maven's repositories through ``mvn``; ``~/.m2`` caches them.
    """
    pom = DEVSTACK_DIR / name / "pom.xml"
    lib = settings.lib_dir(name)
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()
    if _jars_are_complete(lib, digest):
        return 0.0
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DevstackError(f"Maven (mvn) is needed to fetch the {name} jars but is not on PATH")
    log.info("fetching %s jars into %s", name, lib)
    started = time.monotonic()
    partial = lib.with_name("lib.partial")
    shutil.rmtree(partial, ignore_errors=True)
    command = [mvn, "-B", "-q", MAVEN_COPY_GOAL, f"-DoutputDirectory={partial}", "-DincludeScope=runtime"]
    command += ["-f", str(pom)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    jars = sorted(path.name for path in partial.glob("*.jar"))
    if result.returncode != 0 or not jars:
        output = "\n".join((result.stdout + result.stderr).splitlines()[-LOG_TAIL_LINES:])
        raise DevstackError(f"Maven could not fetch the {name} jars (exit {result.returncode}):\n{output}")
    (partial / ".devstack-complete").write_text("\n".join([digest, *jars]) + "\n")
    # Swap the whole folder so jars of an older version never end up on the classpath.
    shutil.rmtree(lib, ignore_errors=True)
    partial.rename(lib)
    seconds = time.monotonic() - started
    log.info("fetched %d %s jars in %.1f s", len(jars), name, seconds)
    return seconds
