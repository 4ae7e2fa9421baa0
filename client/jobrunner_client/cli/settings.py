"""Where the CLI finds the API and Kafka: flags first, then environment variables, then the local stack's
``.local/env`` (written by ``make run``; looked for in the working directory and its parents)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

ENV_FILE = Path(".local") / "env"
_EXECUTE_API_HOST = re.compile(r"\.execute-api\.([a-z0-9-]+)\.amazonaws\.com", re.IGNORECASE)


class UsageError(Exception):
    """The CLI was told too little or something contradictory to do its work (exit code 2)."""


@dataclass(frozen=True)
class Connection:
    url: str | None
    token: str | None
    sigv4: bool
    region: str | None
    kafka_bootstrap: str
    kafka_security: str
    env_file: Path | None

    def api_url(self) -> str:
        if not self.url:
            raise UsageError(
                "no API URL: pass --url, set JOBRUNNER_API_URL, or run `make run` (it writes .local/env)"
            )
        return self.url.rstrip("/")

    def signing_region(self) -> str:
        region = self.region or region_of(self.api_url())
        if not region:
            raise UsageError("--sigv4 needs a region: pass --region or set AWS_REGION")
        return region


def find_env_file(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        candidate = folder / ENV_FILE
        if candidate.is_file():
            return candidate
    return None


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines (``export`` and quotes allowed, ``#`` comments skipped)."""
    values: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def region_of(url: str) -> str | None:
    """The region in an API Gateway URL (``https://abc.execute-api.eu-west-1.amazonaws.com/prod``)."""
    match = _EXECUTE_API_HOST.search(url)
    return match.group(1) if match else None


def resolve(
    *,
    url: str | None,
    token: str | None,
    sigv4: bool,
    region: str | None,
    environ: Mapping[str, str],
    cwd: Path,
    env_file: Path | None = None,
) -> Connection:
    if env_file is not None and not env_file.is_file():
        raise UsageError(f"no env file {env_file}")
    found = env_file or find_env_file(cwd)
    from_file = read_env_file(found) if found else {}

    def pick(flag: str | None, name: str) -> str | None:
        return flag or environ.get(name) or from_file.get(name) or None

    return Connection(
        url=pick(url, "JOBRUNNER_API_URL"),
        token=None if sigv4 else pick(token, "JOBRUNNER_TOKEN"),
        sigv4=sigv4,
        region=region or environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or None,
        kafka_bootstrap=pick(None, "KAFKA_BOOTSTRAP") or "127.0.0.1:9092",
        kafka_security=pick(None, "KAFKA_SECURITY") or "plaintext",
        env_file=found,
    )
