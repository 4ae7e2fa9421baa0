"""What every body shares: unknown fields refused (``Strict``), the payload's size limit, errors and health."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue
from pydantic_core import PydanticCustomError

from jobrunner.api.schedules import checked_by
from jobrunner.domain.limits import DEFAULT_MAX_PAYLOAD_BYTES, payload_refusal
from jobrunner.domain.tags import MAX_TAGS, parse_tags

if TYPE_CHECKING:
    from collections.abc import Callable


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _default_limit() -> int:
    return DEFAULT_MAX_PAYLOAD_BYTES


#: The payload limit of the tenant whose request is being validated (``JobService.payload_limit``), set around
#: each request by the api (``app.py``), read only when a body has a payload: the model checks a payload's size
#: with its other fields.
PAYLOAD_LIMIT: ContextVar[Callable[[], int]] = ContextVar("payload_limit", default=_default_limit)


def _within_limit(payload: JsonValue) -> JsonValue:
    refusal = payload_refusal(payload, PAYLOAD_LIMIT.get()())
    if refusal is not None:
        raise PydanticCustomError("too_large", "{reason}", {"reason": refusal})
    return payload


Payload = Annotated[JsonValue, AfterValidator(_within_limit)]
#: A tag's key and value, each checked as the domain checks a job's tags (an error names ``tags.<key>``).
TagKey = Annotated[str, checked_by(lambda key, path: next(iter(parse_tags({key: ""}, path))))]
TagValue = Annotated[str, checked_by(lambda value, path: parse_tags({"key": value}, path)["key"])]
Tags = Annotated[dict[TagKey, TagValue], Field(max_length=MAX_TAGS)]


class SegmentOut(BaseModel):
    segment: int
    watermark: str | None
    lag_s: float | None
    last_heartbeat: str | None
    last_owner: str | None
    published_total: int
    healthy: bool
    #: A segment above the configured count, still scanned for rows written under a larger count.
    retired: bool = False
    #: Partitions of the segment whose scans kept failing, retried with backoff until done.
    parked: int = 0


class SegmentsOut(BaseModel):
    items: list[SegmentOut]


class HealthOut(BaseModel):
    status: Literal["ok"]


class ErrorDetail(BaseModel):
    field: str
    reason: str


class ErrorOut(BaseModel):
    error: str
    message: str
    errors: list[ErrorDetail] = []
