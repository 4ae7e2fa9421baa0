"""A job's target: where its executions are delivered when no worker consumes them (issue 35).

A target is one of three frozen values, parsed from the JSON shape ``{"https": {...}}``, ``{"lambda": {...}}``
or ``{"sqs": {...}}`` (exactly one key) by ``target_from_dict``, which raises ``InvalidField`` naming the field
(``target.https.url``); ``to_dict`` gives the shape back. The rules are told for users in ``docs/targets.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.targets.urls import check_https_url

#: The methods an HTTPS target may use. GET and DELETE send no body (their context travels in headers only);
#: HEAD and OPTIONS, which deliver nothing, are refused.
METHODS = ("POST", "PUT", "PATCH", "GET", "DELETE")
#: Bounds of an HTTPS call's timeout, in seconds: a call must end well within the delivery function's own.
MIN_TIMEOUT_S = 1
MAX_TIMEOUT_S = 30
DEFAULT_TIMEOUT_S = 10
#: Headers a target may set: how many, each name's and value's length, and all of them together.
MAX_HEADERS = 20
MAX_HEADER_NAME = 64
MAX_HEADER_VALUE = 1024
MAX_HEADERS_TOTAL = 8192
#: Headers the delivery sets itself (signature, context, framing), or that a hop would act on: never the user's.
RESERVED_HEADERS = frozenset({
    "host", "content-length", "content-type", "transfer-encoding", "connection", "keep-alive", "upgrade",
    "te", "trailer", "expect", "proxy-authorization", "proxy-connection", "forwarded", "x-forwarded-for",
    "x-forwarded-host", "x-forwarded-proto", "user-agent",
})
#: Prefixes of reserved header names: Standard Webhooks' (``webhook-id``...) and ours (``jobrunner-attempt``...).
RESERVED_PREFIXES = ("webhook-", "jobrunner-", "proxy-")
#: The longest FIFO message group id SQS accepts.
MAX_MESSAGE_GROUP_ID = 128

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token: a header name
_HEADER_VALUE = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?")  # visible ASCII, inner spaces
_LAMBDA_ARN = re.compile(
    r"arn:(?P<partition>aws(-[a-z]+)*):lambda:(?P<region>[a-z]{2}(-[a-z]+)+-\d{1,2}):(?P<account>\d{12}):"
    r"function:(?P<name>[A-Za-z0-9_-]{1,64})(:(?P<qualifier>\$LATEST|[A-Za-z0-9_-]{1,128}))?"
)
_SQS_HOST = re.compile(
    r"(sqs\.(?P<region>[a-z]{2}(-[a-z]+)+-\d{1,2})|(?P<legacy>[a-z]{2}(-[a-z]+)+-\d{1,2})\.queue)"
    r"\.amazonaws\.com(\.cn)?"
)
_SQS_PATH = re.compile(r"/(?P<account>\d{12})/(?P<name>[A-Za-z0-9_-]{1,75}(\.fifo)?|[A-Za-z0-9_-]{76,80})")
_MESSAGE_GROUP_ID = re.compile(r"[\x21-\x7e]+")  # SQS: letters, digits and punctuation


@dataclass(frozen=True)
class HttpsTarget:
    """An HTTPS endpoint called once per attempt, its request signed as a Standard Webhook."""

    url: str
    method: str = "POST"
    #: The user's own headers (an API key, a tenant id), sent with every call; names as written.
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: int = DEFAULT_TIMEOUT_S

    def to_dict(self) -> dict[str, Any]:
        return {"https": {"url": self.url, "method": self.method, "headers": dict(self.headers),
                          "timeout_s": self.timeout_s}}

    def checked(self, path: str = "target.https") -> HttpsTarget:
        """This target, if it keeps every rule; else ``InvalidField`` naming the first field that does not."""
        check_https_url(self.url, f"{path}.url")
        if self.method not in METHODS:
            raise InvalidField(f"{path}.method", f"must be one of {', '.join(METHODS)}")
        check_headers(self.headers, f"{path}.headers")
        if type(self.timeout_s) is not int or not MIN_TIMEOUT_S <= self.timeout_s <= MAX_TIMEOUT_S:
            raise InvalidField(f"{path}.timeout_s", f"must be a whole number of seconds from {MIN_TIMEOUT_S} "
                                                    f"to {MAX_TIMEOUT_S}")
        return self


@dataclass(frozen=True)
class LambdaTarget:
    """An AWS Lambda function (optionally a version or alias) invoked once per attempt with the body."""

    function_arn: str

    def to_dict(self) -> dict[str, Any]:
        return {"lambda": {"function_arn": self.function_arn}}

    def checked(self, path: str = "target.lambda") -> LambdaTarget:
        if not isinstance(self.function_arn, str) or not _LAMBDA_ARN.fullmatch(self.function_arn):
            raise InvalidField(f"{path}.function_arn", "must be a Lambda function ARN: "
                               "arn:aws:lambda:<region>:<12-digit account>:function:<name>[:<version or alias>]")
        return self

    @property
    def region(self) -> str:
        return self._part("region")

    @property
    def account(self) -> str:
        return self._part("account")

    @property
    def function_name(self) -> str:
        return self._part("name")

    @property
    def qualifier(self) -> str | None:
        """The version or alias the ARN names, or None for the unqualified function."""
        match = _LAMBDA_ARN.fullmatch(self.function_arn)
        return match["qualifier"] if match else None

    def _part(self, name: str) -> str:
        match = _LAMBDA_ARN.fullmatch(self.function_arn)
        if match is None:
            raise ValueError(f"not a Lambda function ARN: {self.function_arn!r}")
        return match[name]


@dataclass(frozen=True)
class SqsTarget:
    """An SQS queue sent one message per attempt; a FIFO queue (``.fifo``) needs a ``message_group_id``."""

    queue_url: str
    message_group_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"queue_url": self.queue_url}
        if self.message_group_id is not None:
            body["message_group_id"] = self.message_group_id
        return {"sqs": body}

    def checked(self, path: str = "target.sqs") -> SqsTarget:
        if not isinstance(self.queue_url, str) or _queue_parts(self.queue_url) is None:
            raise InvalidField(f"{path}.queue_url", "must be an SQS queue URL: "
                               "https://sqs.<region>.amazonaws.com/<12-digit account>/<queue name>")
        group = self.message_group_id
        if self.fifo and group is None:
            raise InvalidField(f"{path}.message_group_id", "is required for a FIFO queue (.fifo)")
        if not self.fifo and group is not None:
            raise InvalidField(f"{path}.message_group_id", "is only for a FIFO queue (.fifo)")
        if group is not None and (not isinstance(group, str) or len(group) > MAX_MESSAGE_GROUP_ID
                                  or not _MESSAGE_GROUP_ID.fullmatch(group)):
            raise InvalidField(f"{path}.message_group_id", f"must be 1 to {MAX_MESSAGE_GROUP_ID} letters, digits "
                                                           "or punctuation")
        return self

    @property
    def fifo(self) -> bool:
        return isinstance(self.queue_url, str) and self.queue_url.endswith(".fifo")

    @property
    def region(self) -> str:
        return self._parts()[0]

    @property
    def account(self) -> str:
        return self._parts()[1]

    @property
    def queue_name(self) -> str:
        return self._parts()[2]

    def _parts(self) -> tuple[str, str, str]:
        parts = _queue_parts(self.queue_url)
        if parts is None:
            raise ValueError(f"not an SQS queue URL: {self.queue_url!r}")
        return parts


#: What a job's executions may be delivered to.
Target = HttpsTarget | LambdaTarget | SqsTarget


def _queue_parts(url: str) -> tuple[str, str, str] | None:
    """(region, account, queue name) of an SQS queue URL, or None if ``url`` is not one."""
    if len(url) > 512 or not url.startswith("https://"):
        return None
    host, _, path = url.removeprefix("https://").partition("/")
    host_match, path_match = _SQS_HOST.fullmatch(host), _SQS_PATH.fullmatch("/" + path)
    if host_match is None or path_match is None:
        return None
    return host_match["region"] or host_match["legacy"], path_match["account"], path_match["name"]


def check_headers(headers: object, path: str) -> None:
    """``headers`` is a JSON object of at most ``MAX_HEADERS`` valid, unreserved names (none twice in any case)
    with bounded visible-ASCII values; else ``InvalidField`` at ``path`` or ``path.<name>``."""
    if not isinstance(headers, dict):
        raise InvalidField(path, "must be an object of header names to values")
    if len(headers) > MAX_HEADERS:
        raise InvalidField(path, f"must have at most {MAX_HEADERS} headers")
    seen: set[str] = set()
    for name, value in headers.items():
        _check_header_name(name, path)
        if name.lower() in seen:
            raise InvalidField(f"{path}.{name}", "is given twice (header names ignore case)")
        seen.add(name.lower())
        if not isinstance(value, str) or len(value) > MAX_HEADER_VALUE or not _HEADER_VALUE.fullmatch(value):
            raise InvalidField(f"{path}.{name}", f"must be 1 to {MAX_HEADER_VALUE} visible ASCII characters, "
                                                 "spaces inside only")
    if sum(len(name) + len(value) for name, value in headers.items()) > MAX_HEADERS_TOTAL:
        raise InvalidField(path, f"must total at most {MAX_HEADERS_TOTAL} characters")


def _check_header_name(name: object, path: str) -> None:
    if not isinstance(name, str) or len(name) > MAX_HEADER_NAME or not _TOKEN.fullmatch(name):
        raise InvalidField(f"{path}.{name}", f"must be a header name of 1 to {MAX_HEADER_NAME} letters, digits or "
                                             "!#$%&'*+-.^_`|~")
    lowered = name.lower()
    if lowered in RESERVED_HEADERS or lowered.startswith(RESERVED_PREFIXES):
        raise InvalidField(f"{path}.{name}", "is set by the delivery itself and cannot be given")


_KINDS: dict[str, tuple[type[HttpsTarget] | type[LambdaTarget] | type[SqsTarget], frozenset[str],
                        frozenset[str]]] = {
    # kind: (class, required fields, optional fields)
    "https": (HttpsTarget, frozenset({"url"}), frozenset({"method", "headers", "timeout_s"})),
    "lambda": (LambdaTarget, frozenset({"function_arn"}), frozenset()),
    "sqs": (SqsTarget, frozenset({"queue_url"}), frozenset({"message_group_id"})),
}


def target_from_dict(value: object, path: str = "target") -> Target:
    """The target ``value`` (the JSON shape) describes, checked; else ``InvalidField`` naming the field."""
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in _KINDS:
        raise InvalidField(path, f"must be an object with exactly one of {', '.join(sorted(_KINDS))}")
    kind, body = next(iter(value.items()))
    cls, required, optional = _KINDS[kind]
    if not isinstance(body, dict):
        raise InvalidField(f"{path}.{kind}", "must be an object")
    if missing := sorted(required - body.keys()):
        raise InvalidField(f"{path}.{kind}.{missing[0]}", "is required")
    if unknown := sorted(body.keys() - required - optional):
        raise InvalidField(f"{path}.{kind}.{unknown[0]}", "is not a field of this target")
    if kind == "https" and "method" in body and isinstance(body["method"], str):
        body = {**body, "method": body["method"].upper()}
    return cls(**body).checked(f"{path}.{kind}")
