"""A job's ``target`` as a body holds it: exactly one of ``https``, ``lambda`` or ``sqs``, named by its key.

The models check the shape only (which keys, of which JSON types); the rules (an https URL, an ARN, a queue URL,
a FIFO queue's group, the reserved headers...) are the domain's (``domain.targets.target_from_dict``), run on the
shape by ``Checked`` with the body's other fields, so a wrong target is reported with every other wrong field,
named to its own field (``target.https.url``: ``api.errors`` reads the rest of the path from the error).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, Discriminator, Field, Tag
from pydantic_core import PydanticCustomError

from jobrunner.api.schemas.common import Strict
from jobrunner.domain.errors import InvalidField
from jobrunner.domain.targets import Target, target_from_dict
from jobrunner.domain.targets.model import DEFAULT_TIMEOUT_S, MAX_HEADERS, MAX_TIMEOUT_S, METHODS, MIN_TIMEOUT_S

#: The kinds, as a body's key names them.
KINDS = ("https", "lambda", "sqs")
#: A union's errors carry the tag of the member tried in their location; ``api.errors`` leaves these out.
TARGET_TAGS = frozenset(f"{kind} target" for kind in KINDS)
#: The type of the error a domain rule raises, its ``field`` the rest of the path below ``target``.
RULE_ERROR = "target_rule"


class HttpsIn(Strict):
    """An HTTPS endpoint, called once per attempt with a signed request (Standard Webhooks; docs/targets.md)."""

    url: str = Field(description="https only, no user information nor fragment; a public address when called")
    method: str = Field(METHODS[0], description=f"one of {', '.join(METHODS)} (GET and DELETE send no body)")
    headers: dict[str, str] = Field(default_factory=dict, description=(
        f"your own headers (an API key...), at most {MAX_HEADERS}; the delivery's own (webhook-*, jobrunner-*, "
        "content-type...) are reserved"))
    timeout_s: int = Field(DEFAULT_TIMEOUT_S, description=f"{MIN_TIMEOUT_S} to {MAX_TIMEOUT_S} seconds")


class LambdaIn(Strict):
    """An AWS Lambda function on the deployment's allow-list, invoked once per attempt."""

    function_arn: str = Field(description="arn:aws:lambda:<region>:<account>:function:<name>[:<version or alias>]")


class SqsIn(Strict):
    """An SQS queue on the deployment's allow-list, sent one message per attempt."""

    queue_url: str = Field(description="https://sqs.<region>.amazonaws.com/<account>/<queue name>")
    message_group_id: str | None = Field(None, description="required for a FIFO queue (.fifo), refused otherwise")


class HttpsTargetIn(Strict):
    https: HttpsIn


class LambdaTargetIn(Strict):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    function: LambdaIn = Field(alias="lambda")


class SqsTargetIn(Strict):
    sqs: SqsIn


def kind_of(body: Any) -> str | None:
    """The tag of the kind ``body`` is: the one key it holds, or None for none, several or another."""
    if isinstance(body, HttpsTargetIn | LambdaTargetIn | SqsTargetIn):
        return f"{next(iter(shape_of(body)))} target"
    if isinstance(body, dict) and len(body) == 1 and next(iter(body)) in KINDS:
        return f"{next(iter(body))} target"
    return None


def shape_of(body: HttpsTargetIn | LambdaTargetIn | SqsTargetIn) -> dict[str, dict[str, Any]]:
    """The JSON shape of ``body``, with only the fields it was given (the domain's defaults for the others)."""
    return body.model_dump(by_alias=True, exclude_unset=True)


def target_of(body: HttpsTargetIn | LambdaTargetIn | SqsTargetIn) -> Target:
    """The domain's target ``body`` describes (``InvalidField`` naming the field if it breaks a rule)."""
    return target_from_dict(shape_of(body))


def _kept_rules(body: HttpsTargetIn | LambdaTargetIn | SqsTargetIn) -> HttpsTargetIn | LambdaTargetIn | SqsTargetIn:
    try:
        target_of(body)
    except InvalidField as wrong:
        below = wrong.field.partition(".")[2]
        raise PydanticCustomError(RULE_ERROR, "{reason}", {"reason": wrong.reason, "field": below}) from None
    return body


#: A target's shape (what an answer shows).
TargetShape = Annotated[
    Annotated[HttpsTargetIn, Tag("https target")] | Annotated[LambdaTargetIn, Tag("lambda target")]
    | Annotated[SqsTargetIn, Tag("sqs target")],
    Discriminator(kind_of, custom_error_type="target_kind",
                  custom_error_message=f"must be an object with exactly one of {', '.join(KINDS)}"),
]
#: A target as a request gives it: its shape, then the domain's rules.
TargetIn = Annotated[TargetShape, AfterValidator(_kept_rules)]
