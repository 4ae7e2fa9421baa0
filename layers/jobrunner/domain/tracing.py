"""W3C trace context (``traceparent``) carried from the submitting request to every execution.

The job keeps the traceparent of the request that created it; each execution's message carries a
child of it whose span id is derived from the execution id, so that every copy of one execution
(after a crash) names the same span, and the worker continues the trace when it reports.
"""

from __future__ import annotations

import hashlib
import re
import secrets

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def parse_traceparent(value: str | None) -> str | None:
    """The header if it is a valid version-00 traceparent (all-zero ids are invalid), else None."""
    if not value:
        return None
    match = _TRACEPARENT.match(value.strip().lower())
    if match is None or set(match.group(1)) == {"0"} or set(match.group(2)) == {"0"}:
        return None
    return match.group(0)


def new_traceparent() -> str:
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def child_traceparent(parent: str, execution_id: str) -> str:
    """A child span of ``parent`` for one execution, the same for every copy of that execution."""
    _, trace_id, _, flags = parent.split("-")
    span_id = hashlib.blake2b(execution_id.encode(), digest_size=8).hexdigest()
    return f"00-{trace_id}-{span_id}-{flags}"
