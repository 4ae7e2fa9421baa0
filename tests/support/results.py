"""Worker reports as a worker holding the execution's message sends them (with its result token)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from jobrunner.domain.receipts import result_token

if TYPE_CHECKING:
    from jobrunner.services.results import WorkerReport

#: The result key a unit test's deployment is configured with (``JOBRUNNER_RESULT_KEY``).
RESULT_KEY = "unit-test-result-key"


def signed(report: WorkerReport, tenant: str, attempt: int | None = None, *,
           key: bytes = RESULT_KEY.encode()) -> WorkerReport:
    """``report`` with the result token of its execution of ``tenant`` under ``key`` (``RESULT_KEY`` unless
    told), for ``attempt`` (None: the report's own, else 1)."""
    attempt = attempt if attempt is not None else report.attempt if report.attempt is not None else 1
    return replace(report, result_token=result_token(key, tenant=tenant, execution_id=report.execution_id,
                                                     attempt=attempt))
