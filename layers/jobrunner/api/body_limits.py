"""What the api refuses in a request's body bytes, before the resolver reads them.

API Gateway hands the function bodies of up to 10 MB with whatever Content-Type the client sent. Left to
itself, Powertools' resolver parses a body without Content-Type as JSON (accepting ``NaN``, lone surrogates,
and nesting deep enough to overflow the parser's stack: a 500), raises on ``multipart/form-data`` without a
boundary and on a base64 body that is not UTF-8 (a 500), and its request validation runs before any
middleware of ours. So these checks run on the event of a request some route serves (an unknown route or
method is left to the resolver's not-found hook: ``errors.no_route``), in this order, and answer with the
JSON error body of every other error (``ErrorOut``):

- a body over ``MAX_BODY_BYTES``: 413 ``payload_too_large`` (the job's ``payload`` has its own, smaller
  limit, checked by the service: 422 naming ``payload``);
- a body that is not UTF-8: 400 ``malformed_json``;
- a POST, PUT or PATCH body whose Content-Type is not ``application/json`` (``; charset=utf-8`` allowed):
  415 ``unsupported_media_type``;
- a body that is not strict JSON (RFC 8259: no ``NaN`` or ``Infinity``, no lone UTF-16 surrogates): 400
  ``malformed_json``; JSON that Python cannot hold faithfully (nested deeper than ``MAX_JSON_DEPTH``,
  a number beyond a double's range or with more digits than Python parses): 422 ``validation_error``.

- a body that is JSON but not an object (``[]``, ``"x"``, ``3``): 422 naming ``body``.

What an object holds is the route's to validate (its Pydantic model, in one pass: 422 naming each field).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from jobrunner.api.errors import shorten
from jobrunner.api.schemas import ErrorDetail, ErrorOut

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

#: The whole request body, well above the 64 KiB payload limit (room for JSON escapes and formatting).
MAX_BODY_BYTES = 256 * 1024
#: Objects and arrays inside one another (.NET's default; Pydantic gives up a little past 250).
MAX_JSON_DEPTH = 64
#: Methods whose body the api reads. A body on any other method is ignored (but still size-limited).
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
JSON_MEDIA_TYPE = "application/json"
UTF8_NAMES = frozenset({"utf-8", "utf8"})

@dataclass(frozen=True)
class Rejection:
    status: HTTPStatus
    error: str
    message: str
    errors: tuple[ErrorDetail, ...] = ()

    def response(self) -> dict[str, Any]:
        """The API Gateway (REST, proxy) response."""
        body = ErrorOut(error=self.error, message=self.message, errors=list(self.errors))
        return {
            "statusCode": int(self.status),
            "headers": {"Content-Type": "application/json"},
            "body": body.model_dump_json(),
            "isBase64Encoded": False,
        }


def check(event: Mapping[str, Any]) -> Rejection | None:
    """Why the body of ``event`` (an API Gateway REST proxy event) is refused, or None to resolve it."""
    return check_body(str(event.get("httpMethod") or "").upper(), event)


def check_body(method: str, event: Mapping[str, Any]) -> Rejection | None:
    """Size and encoding for any method; media type and JSON for the methods whose body the api reads."""
    body = event.get("body")
    if not body:
        return None
    text = _text(body, bool(event.get("isBase64Encoded")))
    if isinstance(text, Rejection):
        return text
    if method not in BODY_METHODS:
        return None
    return check_media_type(content_type(event)) or check_json(text)


def content_type(event: Mapping[str, Any]) -> str | None:
    """The request's Content-Type, whatever the case of the header's name."""
    for key, value in (event.get("headers") or {}).items():
        if key.lower() == "content-type" and value is not None:
            return str(value)
    for key, values in (event.get("multiValueHeaders") or {}).items():
        if key.lower() == "content-type" and values:
            return str(values[-1])
    return None


def normalized(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` with its Content-Type in lower case, as the resolver matches it (``Application/JSON`` is JSON
    too: media types are case-insensitive, RFC 9110 8.3.1). The event itself is left as it is."""
    value = content_type(event)
    if value is None or value == value.lower():
        return event
    headers = {k: (v.lower() if k.lower() == "content-type" and v is not None else v)
               for k, v in (event.get("headers") or {}).items()}
    multi = {k: ([v.lower() for v in values] if k.lower() == "content-type" and values else values)
             for k, values in (event.get("multiValueHeaders") or {}).items()}
    return {**event, "headers": headers, "multiValueHeaders": multi}


def check_media_type(value: str | None) -> Rejection | None:
    media_type, *parameters = (value or "").split(";")
    charsets = [v.strip().strip('"').lower() for k, _, v in (p.partition("=") for p in parameters)
                if k.strip().lower() == "charset"]
    if media_type.strip().lower() == JSON_MEDIA_TYPE and all(c in UTF8_NAMES for c in charsets):
        return None
    sent = f"Content-Type {shorten(value, 100)!r}" if value is not None else "no Content-Type"
    return Rejection(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type",
                     f"the body must be JSON (Content-Type: application/json, UTF-8); got {sent}",
                     (ErrorDetail(field="content-type", reason="must be application/json"),))


def check_json(text: str) -> Rejection | None:
    try:
        value = json.loads(text, parse_constant=_not_json)
    except _NotJson as constant:
        return _malformed(f"{constant} is not JSON")
    except json.JSONDecodeError as bad:
        return _malformed(f"not valid JSON: {bad.msg} (line {bad.lineno}, column {bad.colno})")
    except RecursionError:
        return _too_deep(())
    except ValueError as bad:  # an integer with more digits than int() takes (4300 by default)
        return _invalid("body", f"a number is too long: {shorten(str(bad), 80)}")
    return _check_values(value) or _check_shape(value)


def _check_shape(value: Any) -> Rejection | None:
    """Every body of this api is an object (``null`` is no body). Checked here because the resolver reads
    an array as its first item (Powertools' ``_normalize_field_value``): ``[job, job]`` would submit one."""
    if value is None or isinstance(value, dict):
        return None
    return _invalid("body", f"must be a JSON object, not {_json_type(value)}")


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, list):
        return "an array"
    return "a string" if isinstance(value, str) else "a number"


def _check_values(value: Any) -> Rejection | None:
    """Walk the parsed body (without recursion) for what strict JSON or Python cannot hold.

    Only containers are pushed with their path; scalars are checked in place, so a long array of
    numbers costs one type test per item."""
    if isinstance(value, str | float):
        return _check_scalar(value, ())
    if not isinstance(value, dict | list):
        return None
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if len(path) >= MAX_JSON_DEPTH:
            return _too_deep(path)
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, item in items:
            if isinstance(key, str) and not _is_unicode(key):
                return _malformed("a lone UTF-16 surrogate is not Unicode", _field(path))
            if isinstance(item, dict | list):
                stack.append((item, (*path, key)))
            elif isinstance(item, str | float) and (bad := _check_scalar(item, (*path, key))):
                return bad
    return None


def _check_scalar(value: str | float, path: tuple[str | int, ...]) -> Rejection | None:
    if isinstance(value, str):
        return None if _is_unicode(value) else _malformed("a lone UTF-16 surrogate is not Unicode", _field(path))
    return None if math.isfinite(value) else _invalid(_field(path), "number out of range")


def _text(body: Any, is_base64: bool) -> str | Rejection:
    """The body as text, or why it is refused (too large, not UTF-8)."""
    if is_base64:
        if len(body) > (MAX_BODY_BYTES + 2) // 3 * 4:
            return _too_large()
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            return _malformed("not valid base64 (isBase64Encoded)")
        if len(raw) > MAX_BODY_BYTES:
            return _too_large()
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            return _malformed(f"not valid UTF-8 (byte {bad.start})")
    text = str(body)
    if len(text) > MAX_BODY_BYTES:  # every character is at least one byte
        return _too_large()
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as bad:  # undecodable bytes passed on as surrogates (surrogateescape)
        return _malformed(f"not valid UTF-8 (character {bad.start})")
    return _too_large() if size > MAX_BODY_BYTES else text


class _NotJson(ValueError):
    pass


def _not_json(constant: str) -> Any:
    raise _NotJson(constant)


def _is_unicode(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _field(path: Sequence[str | int]) -> str:
    """``schedule.at``, ``payload.items.3``, as the other errors name fields; ``body`` for the body itself."""
    parts = ["body"] if not path or isinstance(path[0], int) else []
    return shorten(".".join([*parts, *(str(part) for part in path)]), 200)


def _too_large() -> Rejection:
    return Rejection(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "payload_too_large",
                     f"the request body is over {MAX_BODY_BYTES // 1024} KiB",
                     (ErrorDetail(field="body", reason=f"larger than {MAX_BODY_BYTES} bytes"),))


def _too_deep(path: tuple[str | int, ...]) -> Rejection:
    # Named by its top-level field: the full path of a deep value is as long as it is deep.
    top = path[:1] if path and isinstance(path[0], str) else ()
    return _invalid(_field(top), f"nested deeper than {MAX_JSON_DEPTH} levels")


def _malformed(reason: str, where: str = "body") -> Rejection:
    return Rejection(HTTPStatus.BAD_REQUEST, "malformed_json", "the body is not valid JSON",
                     (ErrorDetail(field=where, reason=reason),))


def _invalid(where: str, reason: str) -> Rejection:
    return Rejection(HTTPStatus.UNPROCESSABLE_ENTITY, "validation_error", f"{where}: {reason}",
                     (ErrorDetail(field=where, reason=reason),))
