"""The ``schedule`` of a request body: one model per kind, and their discriminated union.

Which kind a schedule is follows from the key it has (``{"cron": ...}``), as the API has always taken it,
so the union's discriminator is a function of the body (``kind_of``), not a ``kind`` field. Each kind's
model checks what it holds (a cron expression, a time zone, an ISO 8601 repeat, instants) with field
validators that call the domain's parsers, so a wrong schedule is reported with every other wrong field
of the body, in one pass, and the route gets the domain ``Schedule`` from ``.schedule()``.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    GetJsonSchemaHandler,
    PlainValidator,
    RootModel,
    Tag,
    ValidationInfo,
    WithJsonSchema,
)
from pydantic import field_validator as field_check
from pydantic_core import PydanticCustomError

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.schedules import (
    MAX_COUNT,
    At,
    Cron,
    DstPolicy,
    Every,
    RepeatingInterval,
    parse_cron,
    parse_instant,
    parse_interval,
    parse_repeating_interval,
    parse_timezone,
)
from jobrunner.domain.schedules.parsing import END_BEFORE_START, KINDS, NO_KIND

if TYPE_CHECKING:
    from collections.abc import Callable

    from pydantic.json_schema import JsonSchemaValue
    from pydantic_core import CoreSchema

    from jobrunner.domain.schedules import Schedule

#: A union's errors carry the tag of the member that was tried in their location; these tags say which.
TAGS = {f"{kind} schedule": kind for kind in KINDS}


def checked_by(parse: Callable[[Any, str], Any]) -> PlainValidator:
    """A validator whose value is ``parse(value)`` (a domain parser of text); a refusal is reported with its reason.

    Anything but a string (a number, a list, an object) is refused before the parser sees it.
    """
    def validate(value: Any) -> Any:
        if not isinstance(value, str):
            raise PydanticCustomError("string_type", "Input should be a valid string")
        try:
            return parse(value, "")
        except InvalidField as wrong:
            raise PydanticCustomError("invalid_value", "{reason}", {"reason": wrong.reason}) from None

    return PlainValidator(validate, json_schema_input_type=str)


def _string(description: str, **extra: Any) -> WithJsonSchema:
    return WithJsonSchema({"type": "string", "description": description, **extra})


Instant = Annotated[datetime, checked_by(parse_instant), _string("RFC 3339 instant with offset", format="date-time")]
Interval = Annotated[timedelta, checked_by(parse_interval), _string(
    "ISO 8601 duration of fixed length, at least PT10S, e.g. PT5M")]
CronExpression = Annotated[str, checked_by(parse_cron), _string(
    "five-field cron expression (minute hour day-of-month month day-of-week), e.g. 0 9 * * MON-FRI")]
TimeZone = Annotated[str, checked_by(parse_timezone), _string("IANA time zone, e.g. Europe/Paris; default UTC")]
Repeat = Annotated[RepeatingInterval, checked_by(parse_repeating_interval), _string(
    "ISO 8601 repeating interval, e.g. R5/2026-11-22T10:00:00Z/PT1H")]
Count = Annotated[int, Field(ge=1, le=MAX_COUNT, description=(
    "at most this many fires, counted from the job's submission (or the PATCH that sets it); the last of them "
    "becomes the schedule's end"))]


class _Kind(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def schedule(self) -> Schedule:
        raise NotImplementedError


class _Bounded(_Kind):
    """A kind that may have an end (and, but for ``iso8601``, a start and a count)."""

    @field_check("end", check_fields=False)
    @classmethod
    def _end_after_start(cls, end: datetime | None, info: ValidationInfo) -> datetime | None:
        start = info.data.get("start")
        if end is not None and start is not None and end < start:
            raise PydanticCustomError("invalid_value", END_BEFORE_START)
        return end


class AtIn(_Kind):
    """One fire at an instant (up to 5 minutes in the past: it runs at once)."""

    at: Instant

    def schedule(self) -> At:
        return At(at=self.at)


class EveryIn(_Bounded):
    """A fixed interval from ``start`` (default: one interval after submission)."""

    every: Interval
    start: Instant | None = Field(None, description="the first fire")
    end: Instant | None = Field(None, description="no fire after this instant")
    count: Count | None = None

    def schedule(self) -> Every:
        return Every(every=self.every, start=self.start, end=self.end, count=self.count)


class DstIn(_Kind):
    gap: Literal["skip", "shift"] = Field(
        "shift", description="a local time that does not exist: skip it, or fire just after the change")
    fold: Literal["first", "second", "both"] = Field(
        "first", description="a local time that occurs twice: fire at its first occurrence, its second, or both")


class CronIn(_Bounded):
    """A five-field cron expression on the wall clock of a time zone."""

    cron: CronExpression
    timezone: TimeZone | None = None
    dst: DstIn | None = Field(None, description="what a daylight-saving change does to its fires "
                                                "(default: Debian cron's, see docs/schedules.md)")
    start: Instant | None = Field(None, description="no fire before this instant")
    end: Instant | None = Field(None, description="no fire after this instant")
    count: Count | None = None

    def schedule(self) -> Cron:
        dst = DstPolicy(gap=self.dst.gap, fold=self.dst.fold) if self.dst is not None else None
        return Cron(cron=self.cron, timezone=self.timezone or "UTC", dst=dst, start=self.start, end=self.end,
                    count=self.count)


class Iso8601In(_Bounded):
    """An ISO 8601 repeating interval; ``R<n>`` is its count."""

    iso8601: Repeat
    end: Instant | None = Field(None, description="no fire after this instant")

    def schedule(self) -> RepeatingInterval:
        return replace(self.iso8601, until=self.end)


def kind_of(body: Any) -> str | None:
    """The tag of the kind ``body`` is: the one kind key it holds (not null), or None for none or several."""
    if isinstance(body, _Kind):
        return f"{type(body).__name__.removesuffix('In').lower()} schedule"
    if not isinstance(body, dict):
        return None
    present = [kind for kind in KINDS if body.get(kind) is not None]
    return f"{present[0]} schedule" if len(present) == 1 else None


#: What a field several kinds share means in each (the kinds' own descriptions say it for one kind).
_ACROSS_KINDS = {
    "start": "with every: the first fire; with cron: no fire before it (RFC 3339)",
    "end": "with every, cron or iso8601: no fire after this instant (RFC 3339)",
    "count": ("with every or cron: at most this many fires, counted from the job's submission (or the PATCH that "
              "sets it); the last of them becomes the schedule's end (iso8601 states its own: R<n>)"),
}


class ScheduleIn(RootModel[Annotated[
    Annotated[AtIn, Tag("at schedule")] | Annotated[EveryIn, Tag("every schedule")]
    | Annotated[CronIn, Tag("cron schedule")] | Annotated[Iso8601In, Tag("iso8601 schedule")],
    Discriminator(kind_of, custom_error_type="schedule_kind", custom_error_message=NO_KIND),
]]):
    """Exactly one of the kinds, named by its key: ``at``, ``every``, ``cron`` or ``iso8601`` (``oneOf``).
    ``properties`` lists every kind's fields together, for a reader of the document; which go together is
    the ``oneOf``'s to say."""

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        schema = handler(core_schema)
        properties: dict[str, Any] = {}
        for kind in (AtIn, EveryIn, CronIn, Iso8601In):
            own = kind.model_json_schema()
            for name, field in own["properties"].items():
                inline = _inlined(field, own.get("$defs", {}))
                properties.setdefault(name, {**inline, **({"description": _ACROSS_KINDS[name]}
                                                         if name in _ACROSS_KINDS else {})})
        handler.resolve_ref_schema(schema).update(type="object", properties=properties)
        return schema

    def schedule(self) -> Schedule:
        return self.root.schedule()


def _inlined(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with its local references (``#/$defs/X``) replaced by what they name."""
    if isinstance(node, list):
        return [_inlined(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        rest = {key: value for key, value in node.items() if key != "$ref"}
        return {**_inlined(defs[node["$ref"].rsplit("/", 1)[1]], defs), **rest}
    return {key: _inlined(value, defs) for key, value in node.items()}

