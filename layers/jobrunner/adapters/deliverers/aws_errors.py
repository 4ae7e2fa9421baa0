"""What a boto3 call's failure was, as a delivery result: shared by the Lambda and SQS deliverers."""

from __future__ import annotations

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    ReadTimeoutError,
)

from jobrunner.ports import AwsRefused, ConnectionFailed, DeliveryResult, TimedOut


def failure_of(service: str, error: Exception, read_timeout_s: float) -> DeliveryResult | None:
    """The result a failed call of ``service`` came to, or None when ``error`` is no failure of a boto3 call."""
    if isinstance(error, ClientError):
        details = error.response.get("Error", {})
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return AwsRefused(service, str(details.get("Code", "Unknown")), str(details.get("Message", "")),
                          int(status) if status else None)
    if isinstance(error, ReadTimeoutError):
        return TimedOut(read_timeout_s)
    if isinstance(error, ConnectTimeoutError | BotoCoreError):
        return ConnectionFailed(f"{service}: {error}")
    return None
