"""What the route modules share: who is calling, and how an answer is written.

The names keep the underscore they had in ``app.py`` so that each route's body moved from there unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import BaseRouter
from aws_lambda_powertools.event_handler.openapi.params import Path
from pydantic import BaseModel

from jobrunner.api.schemas import JobOut
from jobrunner.domain.errors import DomainError
from jobrunner.domain.jobs import Job
from jobrunner.wiring import container

JobId = Annotated[str, Path(min_length=1, max_length=64)]


#: The 429 every request that may take from a tenant's limits documents (``domain/limits.py``).
_OVER_A_LIMIT = ("over one of the tenant's limits, named in the body (submissions_per_second, jobs_held, "
                 "executions_per_minute); see Retry-After")


class Unauthenticated(DomainError):
    pass


def _event() -> dict[str, Any]:
    """The raw event of the request being answered (Powertools sets it on every router before routing)."""
    return BaseRouter.current_event.raw_event


def _tenant() -> str:
    tenant = container().tenancy.tenant_of(_event())
    if tenant is None:  # handle() refuses these first; this keeps the type honest
        raise Unauthenticated
    return tenant


def _actor() -> str | None:
    """Who makes the request, for the change log: the caller's principal (``api/tenancy.py``)."""
    return container().tenancy.identify(_event()).principal


def _one(job: Job) -> JobOut:
    """A job answered alone (not in a list): with the fires it has left (``JobService.fires_left``)."""
    return JobOut.of(job, remaining=container().jobs.fires_left(job))


def _json(status: HTTPStatus, body: BaseModel) -> Response[Any]:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body.model_dump_json())


def _header(headers: Mapping[str, Any] | None, name: str) -> str | None:
    return next((str(v) for k, v in (headers or {}).items() if k.lower() == name), None)
