"""The opaque cursors: of the executions list (api.cursors) and of the job list (adapters.stores.cursors).

A cursor comes back from the client, so decoding it is input validation: anything but a cursor the API
could have made is the caller's mistake, ``InvalidField("cursor")``, never another exception.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest

from jobrunner.adapters.stores.cursors import decode_job_cursor, encode_job_cursor
from jobrunner.api.cursors import (
    MAX_ATTEMPT,
    MAX_CURSOR_LENGTH,
    MAX_EPOCH_MS,
    decode_execution_cursor,
    encode_execution_cursor,
)
from jobrunner.domain.errors import InvalidField
from jobrunner.domain.jobs import ExecutionRecord, ExecutionStatus, Trigger
from jobrunner.domain.time import to_epoch_ms


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


EXECUTION_ID = "5f0c7f4e-8a2b-5c3d-9e1f-0a1b2c3d4e5f"


def record(scheduled_at: datetime, attempt: int, execution_id: str = EXECUTION_ID) -> ExecutionRecord:
    return ExecutionRecord(
        job_id="job-1", scheduled_at=scheduled_at, attempt=attempt, execution_id=execution_id, user_id="alice",
        status=ExecutionStatus.SUCCESS, trigger=Trigger.SCHEDULE, due_at=scheduled_at,
    )


# -- executions ------------------------------------------------------------------------------------------


def test_the_bounds_are_the_last_millisecond_of_year_9999_and_attempt_1000() -> None:
    assert to_epoch_ms(datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)) == MAX_EPOCH_MS
    assert MAX_ATTEMPT == 1000


@pytest.mark.parametrize(
    ("scheduled_at", "attempt"),
    [
        (datetime(2026, 11, 22, 10, 10, 0, 123000, tzinfo=UTC), 2),
        (datetime(1970, 1, 1, tzinfo=UTC), 1),
        (datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC), MAX_ATTEMPT),
    ],
    ids=["ordinary", "lowest", "highest"],
)
def test_an_execution_cursor_round_trips(scheduled_at: datetime, attempt: int) -> None:
    cursor = encode_execution_cursor(record(scheduled_at, attempt))
    assert "=" not in cursor
    assert decode_execution_cursor(cursor) == (scheduled_at, attempt, EXECUTION_ID)


def test_the_longest_cursor_fits_the_query_limit() -> None:
    longest = record(datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC), MAX_ATTEMPT, "f" * 64)
    assert len(encode_execution_cursor(longest)) == MAX_CURSOR_LENGTH


def test_a_cursor_of_the_older_two_part_form_is_still_accepted() -> None:
    # Given a cursor an older API returned: (scheduled_at, attempt), no execution id
    scheduled_at = datetime(2026, 11, 22, 10, 10, 0, 123000, tzinfo=UTC)
    # Then it decodes with no execution id: its next page starts after every record of that fire and attempt
    assert decode_execution_cursor(b64(f"{to_epoch_ms(scheduled_at)}:2".encode())) == (scheduled_at, 2, None)


@pytest.mark.parametrize(
    "cursor",
    [
        b64(b"-1:1"), b64(f"{MAX_EPOCH_MS + 1}:1".encode()), b64(b"99999999999999999999999:1"),
        b64(b"1795000000000:0"), b64(b"1795000000000:-1"), b64(f"1795000000000:{MAX_ATTEMPT + 1}".encode()),
        b64(b"1795000000000:99999999999999999999999"), b64(b"1795000000000"), b64(b"1795000000000:1:a:b"),
        b64(b"1795000000000:1:"), b64(b"1795000000000:1:a b"), b64(b"1795000000000:1:" + b"a" * 65),
        b64(b"soon:1"), b64(b"1795000000000:first"), b64(b":"), b64(b"\xff\xfe:1"), "not-a-cursor", "",
        "\u00e9t\u00e9",
    ],
    ids=[
        "before-1970", "after-9999", "overflowing-instant", "attempt-zero", "attempt-negative", "attempt-too-high",
        "overflowing-attempt", "one-part", "four-parts", "empty-execution", "execution-with-a-space",
        "execution-too-long", "instant-not-a-number", "attempt-not-a-number",
        "empty-parts", "not-utf8", "not-base64", "empty", "not-ascii",
    ],
)
def test_a_bad_execution_cursor_names_the_cursor(cursor: str) -> None:
    with pytest.raises(InvalidField) as caught:
        decode_execution_cursor(cursor)
    assert caught.value.field == "cursor"


# -- jobs ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("job_id", ["f4e82fc4-8451-48b8-bcef-e76047388ff1", "a", "with:colons:", "\u00fcnicode"])
def test_a_job_cursor_is_the_versioned_job_id_in_unpadded_url_safe_base64(job_id: str) -> None:
    cursor = encode_job_cursor(job_id)
    assert cursor == b64(f"j1:{job_id}".encode())
    assert decode_job_cursor(cursor) == job_id


@pytest.mark.parametrize(
    "cursor",
    [
        b64(b"j1:"), b64(b"j2:job-a"), b64(b"job-a"), b64(b"J1:job-a"), b64(b"j1:\xff\xfe"), "j1:job-a", "",
        "garbage", "!!!", "\u00e9t\u00e9",
    ],
    ids=[
        "empty-job-id", "other-version", "no-prefix", "prefix-case", "not-utf8", "not-encoded", "empty", "word",
        "punctuation", "not-ascii",
    ],
)
def test_a_bad_job_cursor_names_the_cursor(cursor: str) -> None:
    with pytest.raises(InvalidField) as caught:
        decode_job_cursor(cursor)
    assert caught.value.field == "cursor"
