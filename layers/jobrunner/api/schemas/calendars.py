"""The bodies of the calendar routes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from jobrunner.api.schemas.common import Strict
from jobrunner.domain.time import rfc3339

if TYPE_CHECKING:
    from jobrunner.domain.calendars import Calendar


class ExclusionIn(Strict):
    """Exactly a date, or from and to (both dates, whole days included; or both local date-times
    YYYY-MM-DDTHH:MM[:SS], from included, to excluded), on the calendar's wall clock."""

    date: str | None = Field(None, description="a whole local day, YYYY-MM-DD")
    start: str | None = Field(None, alias="from", description="YYYY-MM-DD, or YYYY-MM-DDTHH:MM[:SS] (local)")
    end: str | None = Field(None, alias="to", description="YYYY-MM-DD (included), or YYYY-MM-DDTHH:MM[:SS] (excluded)")
    note: str | None = Field(None, max_length=200, description="in words: Christmas, release freeze, ...")

    def as_dict(self) -> dict[str, str]:
        return {
            k: v
            for k, v in (("date", self.date), ("from", self.start), ("to", self.end), ("note", self.note))
            if v is not None
        }


class CalendarIn(Strict):
    """A calendar of excluded dates and ranges in a time zone; a PUT replaces the calendar whole."""

    timezone: str = Field("UTC", max_length=64, description="IANA time zone the dates and times are read in")
    exclude: list[ExclusionIn] = Field(default_factory=list, max_length=1000)
    description: str | None = Field(None, max_length=500)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"timezone": self.timezone, "exclude": [e.as_dict() for e in self.exclude]}
        if self.description is not None:
            out["description"] = self.description
        return out


class CalendarOut(BaseModel):
    name: str
    timezone: str
    exclude: list[dict[str, str]]
    description: str | None = None
    updated_at: str | None = None

    @classmethod
    def of(cls, calendar: Calendar) -> CalendarOut:
        data = calendar.to_dict()
        return cls(
            name=calendar.name,
            timezone=calendar.timezone,
            exclude=data["exclude"],
            description=calendar.description,
            updated_at=rfc3339(calendar.updated_at) if calendar.updated_at else None,
        )


class CalendarsOut(BaseModel):
    items: list[CalendarOut]
    next_cursor: str | None = None
