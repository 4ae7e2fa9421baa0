"""Opaque cursors of the executions list: the (scheduled_at, attempt) of the last record returned."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.time import from_epoch_ms, to_epoch_ms

if TYPE_CHECKING:
    from datetime import datetime

    from jobrunner.domain.jobs import ExecutionRecord


MAX_EPOCH_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
MAX_ATTEMPT = 1000


def encode_execution_cursor(record: ExecutionRecord) -> str:
    raw = f"{to_epoch_ms(record.scheduled_at)}:{record.attempt}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_execution_cursor(cursor: str) -> tuple[datetime, int]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        epoch_ms, attempt = (int(part) for part in raw.split(":"))
        if not (0 <= epoch_ms <= MAX_EPOCH_MS and 1 <= attempt <= MAX_ATTEMPT):
            raise ValueError(raw)
        return from_epoch_ms(epoch_ms), attempt
    except (ValueError, UnicodeDecodeError, OverflowError):
        raise InvalidField("cursor", "not a cursor this API returned") from None
