"""The messages workers send to the scheduler, as declared models (DESIGN.md, "Kafka messages").

``ResultMessage`` is a ``job-results`` message: what the results function accepts, declared once. Identity
fields and the outcome are strict (a message that gets them wrong is not a result: counted and skipped,
never retried, so a poison message cannot block its partition); the helpers a worker may add are read
leniently (a trace context or a token that is not a string is dropped, not a reason to refuse).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, field_validator

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.schedules import parse_instant
from jobrunner.domain.tracing import parse_traceparent

#: The longest error text kept from a result.
MAX_ERROR_CHARS = 2000


class ResultMessage(BaseModel):
    """A worker's report of one execution on ``job-results``. ``scheduled_at`` and ``attempt`` are optional
    (the worker helper sends them: they make the results function's lookup a point read)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    execution_id: Annotated[StrictStr, Field(min_length=1)]
    job_id: Annotated[StrictStr, Field(min_length=1)]
    status: Literal["SUCCESS", "FAILED"]
    #: An RFC 3339 instant with its offset (a number or an offset-less text is refused).
    scheduled_at: datetime | None = None
    attempt: Annotated[StrictInt, Field(ge=1)] | None = None
    error: str | None = None
    traceparent: str | None = None
    result_token: str | None = None
    #: The worker stopped it on a cancel message (only with FAILED).
    cancelled: bool = False

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
        try:
            return parse_instant(value, "scheduled_at")
        except InvalidField as exc:
            raise ValueError(exc.reason) from None

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
