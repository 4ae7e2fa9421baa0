"""What an answer means: success, a retryable failure or a permanent one, and how long a retry waits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrunner.domain.spec import RetryPolicy
from jobrunner.domain.targets.outcomes import (
    MAX_EXCERPT,
    Outcome,
    Verdict,
    aws_error_outcome,
    connection_outcome,
    excerpt,
    http_outcome,
    lambda_outcome,
    parse_retry_after,
    refused_address_outcome,
    timeout_outcome,
)

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
POLICY = RetryPolicy(max_retries=5, initial_delay_s=10, multiplier=2, max_delay_s=300)


@pytest.mark.parametrize(("status", "verdict"), [
    (200, Verdict.SUCCESS), (201, Verdict.SUCCESS), (202, Verdict.SUCCESS), (204, Verdict.SUCCESS),
    (299, Verdict.SUCCESS),
    (408, Verdict.RETRYABLE), (429, Verdict.RETRYABLE), (500, Verdict.RETRYABLE), (502, Verdict.RETRYABLE),
    (503, Verdict.RETRYABLE), (504, Verdict.RETRYABLE), (599, Verdict.RETRYABLE),
    (400, Verdict.PERMANENT), (401, Verdict.PERMANENT), (403, Verdict.PERMANENT), (404, Verdict.PERMANENT),
    (409, Verdict.PERMANENT), (410, Verdict.PERMANENT), (413, Verdict.PERMANENT), (422, Verdict.PERMANENT),
    (301, Verdict.PERMANENT), (302, Verdict.PERMANENT), (307, Verdict.PERMANENT), (308, Verdict.PERMANENT),
    (100, Verdict.RETRYABLE), (600, Verdict.RETRYABLE), (0, Verdict.RETRYABLE),
])
def test_the_status_decides_the_verdict(status: int, verdict: Verdict) -> None:
    assert http_outcome(status, b"", now=NOW).verdict is verdict


def test_success_has_no_error() -> None:
    assert http_outcome(200, b"ok", now=NOW) == Outcome(Verdict.SUCCESS)


def test_a_failure_keeps_the_status_and_an_excerpt_of_the_body() -> None:
    outcome = http_outcome(404, b'{"error": "no such route"}\n', now=NOW)
    assert outcome == Outcome(Verdict.PERMANENT, 'HTTP 404: {"error": "no such route"}')
    assert http_outcome(500, b"", now=NOW).error == "HTTP 500"


def test_an_unfollowed_redirect_says_so() -> None:
    assert http_outcome(302, b"<html>moved</html>", now=NOW).error == \
        "HTTP 302: redirect not followed (only to the same host)"


@pytest.mark.parametrize(("header", "wait"), [
    ("120", timedelta(seconds=120)),
    (" 0 ", timedelta(0)),
    ("Sun, 22 Nov 2026 10:01:30 GMT", timedelta(seconds=90)),
    ("Sun, 22 Nov 2026 09:59:00 GMT", timedelta(0)),  # a date past: no wait
    ("-5", None), ("1.5", None), ("soon", None), ("", None), ("9" * 13, None),
])
def test_retry_after_reads_seconds_or_an_http_date(header: str, wait: timedelta | None) -> None:
    assert parse_retry_after(header, NOW) == wait


@pytest.mark.parametrize("status", [429, 503])
def test_a_retryable_answer_keeps_its_retry_after(status: int) -> None:
    assert http_outcome(status, b"slow down", retry_after="30", now=NOW) == Outcome(
        Verdict.RETRYABLE, f"HTTP {status}: slow down", timedelta(seconds=30))


def test_a_permanent_answer_ignores_retry_after() -> None:
    assert http_outcome(404, b"", retry_after="30", now=NOW).retry_after is None


def test_timeouts_and_connection_errors_are_retried() -> None:
    assert timeout_outcome(10) == Outcome(Verdict.RETRYABLE, "timed out after 10 s")
    assert connection_outcome("[Errno 111] Connection refused") == Outcome(
        Verdict.RETRYABLE, "connection failed: [Errno 111] Connection refused")


def test_a_refused_address_is_not_retried() -> None:
    assert refused_address_outcome("internal.example.com", "a private address") == Outcome(
        Verdict.PERMANENT, "address refused: internal.example.com is a private address")


def test_a_lambda_function_error_is_retried_with_its_error_object() -> None:
    assert lambda_outcome(None, b'{"ok": true}') == Outcome(Verdict.SUCCESS)
    assert lambda_outcome("Unhandled", b'{"errorMessage": "boom", "errorType": "ValueError"}') == Outcome(
        Verdict.RETRYABLE, 'Lambda function error (Unhandled): {"errorMessage": "boom", "errorType": "ValueError"}')


@pytest.mark.parametrize(("service", "code", "status", "verdict"), [
    ("Lambda", "TooManyRequestsException", 429, Verdict.RETRYABLE),
    ("Lambda", "ServiceException", 500, Verdict.RETRYABLE),
    ("Lambda", "ResourceConflictException", 409, Verdict.RETRYABLE),  # the function is being updated
    ("Lambda", "ResourceNotFoundException", 404, Verdict.PERMANENT),
    ("Lambda", "AccessDeniedException", 403, Verdict.PERMANENT),
    ("Lambda", "RequestTooLargeException", 413, Verdict.PERMANENT),
    ("SQS", "AWS.SimpleQueueService.NonExistentQueue", 400, Verdict.PERMANENT),
    ("SQS", "KmsAccessDenied", 400, Verdict.PERMANENT),
    ("SQS", "RequestThrottled", 400, Verdict.RETRYABLE),
    ("SQS", "KmsThrottled", 400, Verdict.RETRYABLE),
    ("SQS", "InternalError", 500, Verdict.RETRYABLE),
    ("SQS", "SomethingNew", 400, Verdict.PERMANENT),  # an unknown code follows its status
    ("SQS", "SomethingNew", 503, Verdict.RETRYABLE),
    ("SQS", "SomethingNew", None, Verdict.RETRYABLE),
])
def test_an_aws_error_code_decides_the_verdict(service: str, code: str, status: int | None,
                                               verdict: Verdict) -> None:
    outcome = aws_error_outcome(service, code, "the message", status)
    assert (outcome.verdict, outcome.error) == (verdict, f"{service} {code}: the message")


def test_an_excerpt_is_bounded_and_marks_the_cut() -> None:
    text = excerpt(b"x" * 5000)
    assert len(text) == MAX_EXCERPT
    assert text.endswith("…")
    assert excerpt(b"x" * MAX_EXCERPT) == "x" * MAX_EXCERPT


def test_an_excerpt_strips_control_characters_and_folds_whitespace() -> None:
    assert excerpt(b"line one\r\n\tline two\x00\x1b[31m red\x7f \xe2\x80\xae end") == \
        "line one line two [31m red end"


def test_an_excerpt_never_cuts_a_character() -> None:
    # Given a body of multi-byte characters cut mid-character by the read bound, nothing mangled is kept
    body = "é".encode() * 3000
    assert set(excerpt(body).rstrip("…")) == {"é"}
    assert excerpt(b"ok \xff\xfe") == "ok \ufffd\ufffd"  # bytes that are no UTF-8 are shown as such


@given(st.binary(max_size=3000))
def test_any_body_gives_a_bounded_printable_excerpt(body: bytes) -> None:
    text = excerpt(body)
    assert len(text) <= MAX_EXCERPT
    assert all(ch.isprintable() or ch == " " for ch in text)
    assert text == text.strip()
