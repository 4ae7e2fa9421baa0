"""What the route modules share: who is calling, and how an answer is written.

The names keep the underscore they had in ``app.py`` so that each route's body moved from there unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import BaseRouter
from aws_lambda_powertools.event_handler.openapi.params import Path
from pydantic import BaseModel

from jobrunner.api.errors import REFUSALS, refusal, refusals
from jobrunner.api.schemas import JobOut
from jobrunner.domain.errors import DomainError
from jobrunner.domain.jobs import Job
from jobrunner.wiring import container

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse, OpenAPIResponseContentModel

JobId = Annotated[str, Path(min_length=1, max_length=64)]


#: The 429 every request that may take from a tenant's limits documents (``domain/limits.py``).
_OVER_A_LIMIT = REFUSALS[429]
#: The 409 of a submission whose idempotency_key is another request's.
_KEY_REUSED = "conflict: idempotency_key was already used for a different request"
#: The 403 of a job that names a topic the tenant may not publish to.
_TOPIC_NOT_GRANTED = "forbidden: the topic is not granted to this tenant"

#: What a route answers with a status, as its OpenAPI ``responses`` say: the model of its body, with what it
#: means (``(model, "why")``; ``(None, "why")``: no body), or, for a refusal, what it means (an ``ErrorOut`` body).
Answer = type[BaseModel] | tuple[type[BaseModel] | None, str] | str


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


def documented(answers: Mapping[int, Answer], *refused: int) -> dict[int, OpenAPIResponse]:
    """A route's ``responses``: ``answers``, and the statuses ``refused`` as ``errors.REFUSALS`` describes them.

    What the api may answer any route with (401, 413, 415, 422, ...) is added to each when it is registered
    (``app.edge_refusals``). A status without a body (``(None, "why")``) has no content, so no media type."""
    responses: dict[int, OpenAPIResponse] = {}
    for status, answer in answers.items():
        if isinstance(answer, str):
            responses[status] = refusal(answer)
            continue
        model, description = answer if isinstance(answer, tuple) else (answer, HTTPStatus(status).phrase)
        body: OpenAPIResponseContentModel = {"model": model}
        responses[status] = {"description": description,
                             "content": {content_types.APPLICATION_JSON: body} if model is not None else {}}
    return {**responses, **refusals(refused)}


def _header(headers: Mapping[str, Any] | None, name: str) -> str | None:
    return next((str(v) for k, v in (headers or {}).items() if k.lower() == name), None)
