"""Invoker that starts the scan function with an asynchronous Lambda invoke."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from jobrunner.domain.errors import Unavailable
from jobrunner.domain.time import rfc3339
from jobrunner.ports import Invoker, ScanRequest


def scan_event(request: ScanRequest) -> dict[str, Any]:
    """The event the scan function receives (also used by the local invoker)."""
    return {"segment": request.segment, "minute": rfc3339(request.bucket)}


class LambdaInvoker(Invoker):
    def __init__(self, function_name: str, lambda_client: Any) -> None:
        self._function = function_name
        self._client = lambda_client

    def invoke_scan(self, request: ScanRequest) -> None:
        try:
            self._client.invoke(
                FunctionName=self._function,
                InvocationType="Event",
                Payload=json.dumps(scan_event(request)).encode("utf-8"),
            )
        except (ClientError, BotoCoreError) as exc:
            raise Unavailable(f"cannot invoke {self._function}: {exc}") from exc
