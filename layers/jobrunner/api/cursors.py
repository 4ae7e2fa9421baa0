"""Opaque cursors of the executions list: the (scheduled_at, attempt, execution_id) of the last record returned.

Two executions can share a (scheduled_at, attempt) (a run now at the instant of a scheduled fire), so the
cursor names the execution too: the next page starts right after it, skipping and repeating nothing.
A cursor of the older, two-part form (no execution) is still accepted: its page starts after every
record of its (scheduled_at, attempt), as it did when only one record could have them.
"""

from __future__ import annotations

import base64
import re
from typing import TYPE_CHECKING

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.time import from_epoch_ms, to_epoch_ms

if TYPE_CHECKING:
    from datetime import datetime

    from jobrunner.domain.jobs import ExecutionRecord


MAX_EPOCH_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
MAX_ATTEMPT = 1000
#: What an execution id may look like in a cursor (ours are UUIDs).
EXECUTION_ID = re.compile(r"[0-9A-Za-z-]{1,64}")
#: The longest cursor ``encode_execution_cursor`` can make (base64 of 15 + 1 + 4 + 1 + 64 bytes).
MAX_CURSOR_LENGTH = 114


def encode_execution_cursor(record: ExecutionRecord) -> str:
    raw = f"{to_epoch_ms(record.scheduled_at)}:{record.attempt}:{record.execution_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_execution_cursor(cursor: str) -> tuple[datetime, int, str | None]:
    """(scheduled_at, attempt, execution_id); execution_id None for a cursor of the older, two-part form."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        parts = raw.split(":")
        if len(parts) not in (2, 3) or (len(parts) == 3 and not EXECUTION_ID.fullmatch(parts[2])):
            raise ValueError(raw)
        epoch_ms, attempt = int(parts[0]), int(parts[1])
        if not (0 <= epoch_ms <= MAX_EPOCH_MS and 1 <= attempt <= MAX_ATTEMPT):
            raise ValueError(raw)
        return from_epoch_ms(epoch_ms), attempt, parts[2] if len(parts) == 3 else None
    except (ValueError, UnicodeDecodeError, OverflowError):
        raise InvalidField("cursor", "not a cursor this API returned") from None


def encode_change_cursor(changed_at: datetime, change_id: str) -> str:
    """The change log's cursor: the (changed_at, change_id) of the last entry returned."""
    raw = f"{to_epoch_ms(changed_at)}:{change_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_change_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        epoch_text, _, change_id = raw.partition(":")
        epoch_ms = int(epoch_text)
        if not (0 <= epoch_ms <= MAX_EPOCH_MS and EXECUTION_ID.fullmatch(change_id)):
            raise ValueError(raw)
        return from_epoch_ms(epoch_ms), change_id
    except (ValueError, UnicodeDecodeError, OverflowError):
        raise InvalidField("cursor", "not a cursor this API returned") from None


def encode_fire_cursor(fire: datetime) -> str:
    """The firing ledger's cursor: the last fire of the page returned."""
    return base64.urlsafe_b64encode(f"f:{to_epoch_ms(fire)}".encode()).decode().rstrip("=")


def decode_fire_cursor(cursor: str) -> datetime:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        tag, _, epoch_text = raw.partition(":")
        epoch_ms = int(epoch_text)
        if tag != "f" or not 0 <= epoch_ms <= MAX_EPOCH_MS:
            raise ValueError(raw)
        return from_epoch_ms(epoch_ms)
    except (ValueError, UnicodeDecodeError, OverflowError):
        raise InvalidField("cursor", "not a cursor this API returned") from None
