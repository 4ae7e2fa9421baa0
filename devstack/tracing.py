"""Where the local stack's spans go: ``JOBRUNNER_OTEL_EXPORTER`` and ``JOBRUNNER_OTEL_FILE``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from devstack import servers
from jobrunner import telemetry

if TYPE_CHECKING:
    from jobrunner.config import Settings


def configure_tracing(settings: Settings) -> None:
    """Export spans as ``JOBRUNNER_OTEL_EXPORTER`` says (refuses an unknown exporter)."""
    telemetry.configure(settings.otel_exporter, path=traces_path(settings))


def traces_path(settings: Settings) -> Path:
    """Where the file exporter appends: ``JOBRUNNER_OTEL_FILE``, else ``.local/logs/traces.jsonl``."""
    return Path(settings.otel_file) if settings.otel_file else servers.LOG_DIR / "traces.jsonl"
