"""What the scheduler and its clients (the CLI, the worker SDK) must agree on (DESIGN.md, "Kafka messages").

The server imports these names rather than keeping copies: job statuses as the API reports them, the
execution and cancel messages on a job's topic (value fields and header names), and the ``job-results``
message a worker sends back. Standard library and pydantic only: the Lambda layer ships this module.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, field_validator


class JobStatus(StrEnum):
    """What the API reports: PENDING -> SCHEDULED -> RUNNING -> SUCCESS | FAILED, plus PAUSED, CANCELLED."""

    PENDING = "PENDING"
    SCHEDULED = "SCHEDULED"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    PAUSED = "PAUSED"
    CANCELLED = "CANCELLED"
    DELETED = "DELETED"


# --- The execution message (a job's topic) -------------------------------------------------------------------

#: The headers of an execution message: its identity, and (when the job was submitted with one) the W3C trace
#: context of the execution's span, a child of the submitting request's.
EXECUTION_ID_HEADER = "execution_id"
SCHEDULED_AT_HEADER = "scheduled_at"
ATTEMPT_HEADER = "attempt"
TRACEPARENT_HEADER = "traceparent"
#: The header that marks a cancel message on a job's topic (its value: the execution id to cancel).
CANCEL_HEADER = "jobrunner-cancel"
#: The trigger of an execution message that names none.
DEFAULT_TRIGGER = "SCHEDULE"


class ExecutionMessage(TypedDict):
    """The value of the message that hands one execution to the workers (JSON)."""

    execution_id: str
    job_id: str
    user_id: str
    #: RFC 3339, UTC, milliseconds (``2026-11-22T10:00:00.000Z``).
    scheduled_at: str
    attempt: int
    #: SCHEDULE, MANUAL, BACKFILL or RETRY; absent: ``DEFAULT_TRIGGER``.
    trigger: NotRequired[str]
    payload: Any
    #: The proof of origin the worker sends back with its result (the results function refuses a result
    #: without the token of its execution).
    result_token: NotRequired[str]
    #: The job's target (``{"https": {...}}``, ``{"lambda": {...}}`` or ``{"sqs": {...}}``, docs/targets.md), only
    #: in the messages of a job with a target, which go to the delivery function's topic, not to workers.
    target: NotRequired[dict[str, Any]]


class CancelMessage(TypedDict):
    """The value of a cancel message (header ``CANCEL_HEADER``): the overlap policy ``cancel_other``."""

    cancel: Literal[True]
    execution_id: str
    job_id: str
    user_id: str
    scheduled_at: str
    attempt: int
    reason: str


# --- The result message (``job-results``) --------------------------------------------------------------------

#: The longest error text kept from a result.
MAX_ERROR_CHARS = 2000

ResultStatus = Literal["SUCCESS", "FAILED"]

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def parse_traceparent(value: str | None) -> str | None:
    """The header if it is a valid version-00 traceparent (all-zero ids are invalid), else None."""
    if not value:
        return None
    match = _TRACEPARENT.match(value.strip().lower())
    if match is None or set(match.group(1)) == {"0"} or set(match.group(2)) == {"0"}:
        return None
    return match.group(0)


def parse_rfc3339(value: object) -> datetime:
    """An RFC 3339 date-time, keeping the offset it was written with; an offset is required. Raises
    ``ValueError`` whose text says what is wrong."""
    if not isinstance(value, str):  # a parsed JSON value may be anything
        raise ValueError(f"not an RFC 3339 date-time: {value!r}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"not an RFC 3339 date-time: {value!r}") from None
    if parsed.tzinfo is None:
        raise ValueError("needs a UTC offset, e.g. 2026-11-22T10:00:00Z")
    try:
        parsed.astimezone(UTC)
    except OverflowError:
        raise ValueError("is outside the years 0001 to 9999 in UTC") from None
    return parsed


class ResultMessage(BaseModel):
    """A worker's report of one execution on ``job-results``: what the results function accepts, declared once.

    Identity fields and the outcome are strict (a message that gets them wrong is not a result: counted and
    skipped, never retried, so a poison message cannot block its partition); the helpers a worker may add
    are read leniently (a trace context or a token that is not a string is dropped, not a reason to refuse).
    ``scheduled_at`` and ``attempt`` are optional (the worker SDK sends them: they make the results function's
    lookup a point read)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    execution_id: Annotated[StrictStr, Field(min_length=1)]
    job_id: Annotated[StrictStr, Field(min_length=1)]
    status: ResultStatus
    #: An RFC 3339 instant with its offset (a number or an offset-less text is refused), read as UTC at
    #: millisecond precision.
    scheduled_at: datetime | None = None
    attempt: Annotated[StrictInt, Field(ge=1)] | None = None
    error: str | None = None
    traceparent: str | None = None
    result_token: str | None = None
    #: The worker stopped it on a cancel message (only with FAILED).
    cancelled: bool = False
    #: Only with FAILED: ``False`` says the failure would recur (a delivery's 404): dead-lettered at once, never
    #: retried. Absent or anything but ``false``: retried under the job's retry policy.
    retryable: bool = True
    #: Only with a retryable FAILED: the least wait the failed call asked for (a ``Retry-After``), in seconds; it
    #: lengthens the job's backoff for the next attempt, never past the job's ``max_delay_s``.
    retry_after_s: int | None = None

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("scheduled_at", mode="before")
    @classmethod
    def _instant(cls, value: Any) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise ValueError("an RFC 3339 instant")
        instant = parse_rfc3339(value).astimezone(UTC)
        return instant.replace(microsecond=instant.microsecond // 1000 * 1000)

    @field_validator("error", mode="before")
    @classmethod
    def _error(cls, value: Any) -> str | None:
        return str(value)[:MAX_ERROR_CHARS] if value else None

    @field_validator("traceparent", mode="before")
    @classmethod
    def _trace(cls, value: Any) -> str | None:
        return parse_traceparent(value) if isinstance(value, str) else None

    @field_validator("result_token", mode="before")
    @classmethod
    def _token(cls, value: Any) -> str | None:
        return value if isinstance(value, str) else None

    @field_validator("cancelled", mode="before")
    @classmethod
    def _cancelled(cls, value: Any) -> bool:
        return value is True

    @field_validator("retryable", mode="before")
    @classmethod
    def _retryable(cls, value: Any) -> bool:
        return value is not False

    @field_validator("retry_after_s", mode="before")
    @classmethod
    def _retry_after(cls, value: Any) -> int | None:
        return value if type(value) is int and value >= 0 else None
