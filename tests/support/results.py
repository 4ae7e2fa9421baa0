"""Worker reports as a worker holding the execution's message sends them (with its result token)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from jobrunner.domain.receipts import result_token

if TYPE_CHECKING:
    from jobrunner.services.results import WorkerReport


def signed(report: WorkerReport, key: bytes = b"") -> WorkerReport:
    """``report`` with its execution's result token under ``key`` (the services' default key in unit tests)."""
    return replace(report, result_token=result_token(key, report.execution_id))
