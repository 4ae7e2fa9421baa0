"""The job-list cursor: opaque to clients, the same for every store (the last job id of the page).

Paging by ``job_id > ?`` rather than with the driver's paging state keeps cursors valid across
store instances and connections, and a forged cursor can only ever select the caller's own jobs.
"""

from __future__ import annotations

import base64
import binascii

from jobrunner.domain.errors import InvalidField

_PREFIX = "j1:"


def encode_job_cursor(last_job_id: str) -> str:
    return base64.urlsafe_b64encode((_PREFIX + last_job_id).encode()).decode().rstrip("=")


def decode_job_cursor(cursor: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raw = ""
    if not raw.startswith(_PREFIX) or len(raw) == len(_PREFIX):
        raise InvalidField("cursor", "not a cursor this API returned")
    return raw[len(_PREFIX):]
