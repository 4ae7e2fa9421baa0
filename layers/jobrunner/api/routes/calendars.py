"""/calendars: the tenant's calendars of excluded dates and ranges."""

from __future__ import annotations

from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from jobrunner.api.routes.common import _json, _tenant, documented
from jobrunner.api.schemas import CalendarIn, CalendarOut, CalendarsOut
from jobrunner.wiring import container

router = Router()

CalendarName = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]


@router.put(
    "/calendars/<name>", responses=documented({201: (CalendarOut, "created"), 200: (CalendarOut, "replaced")}),
    description="Create or replace one of the tenant's calendars of excluded dates and ranges. A change applies "
                "to every fire not yet published (the scans read it again within 10 s); docs/schedules.md.")
def put_calendar(name: CalendarName, body: Annotated[CalendarIn, Body()]) -> Response[Any]:
    calendar, created = container().calendar_admin.put(_tenant(), name, body.as_dict())
    return _json(HTTPStatus.CREATED if created else HTTPStatus.OK, CalendarOut.of(calendar))


@router.get("/calendars/<name>", responses=documented({200: CalendarOut, 404: "not_found: no such calendar"}))
def get_calendar(name: CalendarName) -> Response[Any]:
    return _json(HTTPStatus.OK, CalendarOut.of(container().calendar_admin.get(_tenant(), name)))


@router.get("/calendars", responses=documented({200: CalendarsOut}))
def list_calendars(
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    cursor: Annotated[str | None, Query(max_length=64)] = None,
) -> Response[Any]:
    calendars, next_cursor = container().calendar_admin.list(_tenant(), limit, cursor or None)
    return _json(HTTPStatus.OK, CalendarsOut(items=[CalendarOut.of(c) for c in calendars], next_cursor=next_cursor))


@router.delete("/calendars/<name>", responses=documented({
    204: (None, "deleted"), 404: "not_found: no such calendar",
    409: "conflict: a job that is not cancelled still names it"}))
def delete_calendar(name: CalendarName) -> Response[Any]:
    container().calendar_admin.delete(_tenant(), name)
    return Response(status_code=HTTPStatus.NO_CONTENT)
