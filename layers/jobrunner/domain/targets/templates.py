"""The body a delivery sends: the job's payload as JSON, with context keywords substituted.

Like EventBridge Scheduler's ``<aws.scheduler.scheduled-time>``, a string in the payload may name the
execution's context as ``<jobrunner.NAME>`` (``KEYWORDS``). A string that is exactly one keyword becomes the
value itself (``"<jobrunner.attempt>"`` becomes the number ``2``); a keyword inside a longer string is replaced
by its text. Only string values are read, never object keys, and the result is serialised again, so whatever a
value holds is JSON-escaped and cannot break out of its string. Text that merely looks like a keyword
(``<jobrunner.other>``) is left as written; ``unknown_keywords`` lists such text so a submit can refuse it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobrunner.domain.time import rfc3339

if TYPE_CHECKING:
    from datetime import datetime

    from jobrunner.domain.jobs import Trigger

_KEYWORD = re.compile(r"<jobrunner\.([a-z0-9-]+)>")


@dataclass(frozen=True)
class DeliveryContext:
    """What an attempt is, as a receiver may want to know it (headers, keywords, message attributes)."""

    execution_id: str
    job_id: str
    scheduled_at: datetime
    attempt: int
    trigger: Trigger

    def values(self) -> dict[str, str | int]:
        """Each keyword's value, by name (``KEYWORDS``)."""
        return {
            "execution-id": self.execution_id,
            "job-id": self.job_id,
            "scheduled-time": rfc3339(self.scheduled_at),
            "attempt": self.attempt,
            "trigger": self.trigger.value,
        }


#: The context keywords a payload may use, written ``<jobrunner.NAME>``.
KEYWORDS = ("execution-id", "job-id", "scheduled-time", "attempt", "trigger")


def render_payload(payload: Any, context: DeliveryContext) -> Any:
    """``payload`` (a JSON value) with each keyword in its strings substituted (module docstring)."""
    values = context.values()

    def text(match: re.Match[str]) -> str:
        name = match[1]
        return str(values[name]) if name in values else match[0]

    def render(value: Any) -> Any:
        if isinstance(value, str):
            whole = _KEYWORD.fullmatch(value)
            if whole and whole[1] in values:
                return values[whole[1]]
            return _KEYWORD.sub(text, value)
        if isinstance(value, list):
            return [render(item) for item in value]
        if isinstance(value, dict):
            return {key: render(item) for key, item in value.items()}
        return value

    return render(payload)


def render_body(payload: Any, context: DeliveryContext) -> bytes:
    """The bytes a delivery sends: the rendered payload as compact JSON, ASCII only (``\\uXXXX`` escapes), so
    the body is the same bytes whatever the payload's characters, and what is signed is what is sent."""
    return json.dumps(render_payload(payload, context), separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode("ascii")


def unknown_keywords(payload: Any) -> list[str]:
    """Each ``<jobrunner.NAME>`` in ``payload``'s strings whose NAME is not a keyword, sorted, once each."""
    found: set[str] = set()

    def scan(value: Any) -> None:
        if isinstance(value, str):
            found.update(match[0] for match in _KEYWORD.finditer(value) if match[1] not in KEYWORDS)
        elif isinstance(value, list):
            for item in value:
                scan(item)
        elif isinstance(value, dict):
            for item in value.values():
                scan(item)

    scan(payload)
    return sorted(found)
