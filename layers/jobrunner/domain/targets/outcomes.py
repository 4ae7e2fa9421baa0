"""What a delivery's answer means for its execution: success, a failure worth retrying, or one that is not.

A RETRYABLE failure is retried under the job's retry policy like a worker's failed result (so ``max_retries``
still bounds it); a PERMANENT one is dead-lettered at once, because the same call would get the same answer.
The rules, for users, are in ``docs/targets.md`` ("Outcomes").
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from enum import StrEnum

#: The longest excerpt of an answer's body kept in an execution's error, in characters.
MAX_EXCERPT = 512
#: HTTP statuses retried besides 5xx: Request Timeout and Too Many Requests.
RETRYABLE_STATUSES = frozenset({408, 429})
#: Lambda and SQS error codes that say "later" (throttling, a service fault, a function being updated).
RETRYABLE_AWS_ERRORS = frozenset({
    "TooManyRequestsException", "ThrottlingException", "Throttling", "RequestThrottled", "KmsThrottled",
    "ServiceException", "ServiceUnavailable", "InternalError", "InternalFailure", "ResourceNotReadyException",
    "ResourceConflictException", "EC2ThrottledException", "EC2UnexpectedException", "ENILimitReachedException",
    "SubnetIPAddressLimitReachedException", "SnapStartTimeoutException", "RequestTimeout", "RequestTimeoutException",
})
#: Codes that say "never": the target does not exist, may not be called, or refuses what is sent.
PERMANENT_AWS_ERRORS = frozenset({
    "ResourceNotFoundException", "AccessDeniedException", "AccessDenied", "InvalidParameterValueException",
    "InvalidParameterValue", "RequestTooLargeException", "UnsupportedMediaTypeException",
    "InvalidRequestContentException", "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist",
    "InvalidMessageContents", "UnsupportedOperation", "InvalidAddress", "InvalidSecurity", "KmsAccessDenied",
    "KmsDisabled", "KmsNotFound", "KmsInvalidState", "KmsInvalidKeyUsage", "KmsOptInRequired",
    "UnrecognizedClientException", "InvalidClientTokenId", "MissingParameter",
})

_SPACES = re.compile(r"\s+")
_RETRY_AFTER_SECONDS = re.compile(r"[0-9]{1,12}")


class Verdict(StrEnum):
    SUCCESS = "SUCCESS"
    RETRYABLE = "RETRYABLE"
    PERMANENT = "PERMANENT"


@dataclass(frozen=True)
class Outcome:
    """An attempt's verdict, the text its execution's history keeps (None on success), and the wait the
    target asked for before another attempt (``Retry-After``; None when it asked none)."""

    verdict: Verdict
    error: str | None = None
    retry_after: timedelta | None = None


def excerpt(body: bytes | str, limit: int = MAX_EXCERPT) -> str:
    """At most ``limit`` characters of ``body`` for a history: UTF-8 decoded without cutting a character
    (invalid bytes become U+FFFD), unprintable characters and runs of whitespace as one space, "…" if cut."""
    if isinstance(body, bytes):
        # Decode no more than a bounded prefix; an incomplete last character is dropped, not mangled.
        text = codecs.getincrementaldecoder("utf-8")("replace").decode(body[: limit * 4 + 4], final=False)
    else:
        text = body[: limit * 4 + 4]
    # Control, format, separator, private-use and unassigned characters would garble a log line or a page.
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    text = _SPACES.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _with_excerpt(head: str, body: bytes | str) -> str:
    shown = excerpt(body)
    return f"{head}: {shown}" if shown else head


def http_outcome(status: int, body: bytes, *, retry_after: str | None = None, now: datetime) -> Outcome:
    """The outcome of an HTTPS answer with ``status`` and ``body`` (its ``Retry-After`` header, if any, read
    at ``now``). 2xx succeeds; 408, 429 and 5xx are retried; 3xx (a redirect the delivery did not follow: to
    another host, or too many) and the other 4xx are not; a status outside 200-599 is a broken answer, retried
    like a broken connection."""
    head = f"HTTP {status}"
    if 200 <= status <= 299:
        return Outcome(Verdict.SUCCESS)
    if status in RETRYABLE_STATUSES or 500 <= status <= 599:
        wait = parse_retry_after(retry_after, now) if retry_after else None
        return Outcome(Verdict.RETRYABLE, _with_excerpt(head, body), wait)
    if 300 <= status <= 399:
        return Outcome(Verdict.PERMANENT, f"{head}: redirect not followed (only to the same host)")
    if 400 <= status <= 499:
        return Outcome(Verdict.PERMANENT, _with_excerpt(head, body))
    return Outcome(Verdict.RETRYABLE, f"{head}: not a valid final status")


def timeout_outcome(timeout_s: float) -> Outcome:
    """The target did not answer within the target's timeout: retried."""
    return Outcome(Verdict.RETRYABLE, f"timed out after {timeout_s:g} s")


def connection_outcome(reason: str) -> Outcome:
    """No answer at all (DNS failure, refused or reset connection, TLS failure): retried."""
    return Outcome(Verdict.RETRYABLE, _with_excerpt("connection failed", reason))


def refused_address_outcome(host: str, reason: str) -> Outcome:
    """The host resolved to an address deliveries may not reach (``addresses``): not retried, since calling
    it is what must not happen, and a retry would resolve the same."""
    return Outcome(Verdict.PERMANENT, excerpt(f"address refused: {host} is {reason}"))


def lambda_outcome(function_error: str | None, payload: bytes) -> Outcome:
    """The outcome of an invocation the Lambda service accepted. A function error (``Unhandled``: it raised,
    timed out or ran out of memory; ``Handled``) is the function's failed result, retried under the job's
    policy like a worker's; ``payload`` (its error object) goes into the history."""
    if function_error is None:
        return Outcome(Verdict.SUCCESS)
    return Outcome(Verdict.RETRYABLE, _with_excerpt(f"Lambda function error ({function_error})", payload))


def aws_error_outcome(service: str, code: str, message: str, http_status: int | None = None) -> Outcome:
    """The outcome of a call Lambda or SQS refused with error ``code``. Codes in ``RETRYABLE_AWS_ERRORS`` are
    retried, those in ``PERMANENT_AWS_ERRORS`` are not; another code follows its HTTP status (4xx: not retried),
    and with none is retried (the job's ``max_retries`` bounds it)."""
    text = _with_excerpt(f"{service} {code}", message)
    if code in RETRYABLE_AWS_ERRORS:
        return Outcome(Verdict.RETRYABLE, text)
    if code in PERMANENT_AWS_ERRORS or (http_status is not None and 400 <= http_status <= 499):
        return Outcome(Verdict.PERMANENT, text)
    return Outcome(Verdict.RETRYABLE, text)


def parse_retry_after(value: str, now: datetime) -> timedelta | None:
    """The wait a ``Retry-After`` header asks for: delay-seconds or an HTTP date (a date past is no wait).
    None when the value is neither."""
    value = value.strip()
    if _RETRY_AFTER_SECONDS.fullmatch(value):
        return timedelta(seconds=int(value))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is always GMT
        when = when.replace(tzinfo=UTC)
    return max(timedelta(0), when - now)
