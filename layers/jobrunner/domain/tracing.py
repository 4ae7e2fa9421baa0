"""W3C trace context (``traceparent``) carried from the submitting request to every execution.

The job keeps the traceparent of the request that created it; each execution's message carries a
child of it whose span id is derived from the execution id, so that every copy of one execution
(after a crash) names the same span, and the worker continues the trace when it reports.
"""

from __future__ import annotations

import hashlib
import secrets

# Shared with the worker SDK, which continues the trace: one definition of a valid traceparent.
from jobrunner_client.protocol import parse_traceparent

__all__ = ["child_traceparent", "new_traceparent", "parse_traceparent"]


def new_traceparent() -> str:
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def child_traceparent(parent: str, execution_id: str) -> str:
    """A child span of ``parent`` for one execution, the same for every copy of that execution."""
    _, trace_id, _, flags = parent.split("-")
    span_id = hashlib.blake2b(execution_id.encode(), digest_size=8).hexdigest()
    return f"00-{trace_id}-{span_id}-{flags}"
