"""Tags: a job's key/value labels (``JobSpec.tags``), and a filter by one (``domain.selection`` selects jobs by them).

A job has at most ``MAX_TAGS`` tags. A key is 1 to 64 letters, digits and ``_ . / -`` (no ``:``, which
separates a key from its value in a filter: ``team:payments``); a value is 0 to 256 characters. Tags are
the tenant's own: every list and bulk change reads only the tenant's partition.
"""

from __future__ import annotations

import re
from typing import Any

from jobrunner.domain.errors import InvalidField

MAX_TAGS = 20
MAX_VALUE = 256
_KEY = re.compile(r"[A-Za-z0-9_./-]{1,64}")


def parse_tags(value: Any, path: str = "tags") -> dict[str, str]:
    """Validate a tags object, naming the field and the reason."""
    if not isinstance(value, dict):
        raise InvalidField(path, 'must be an object of key -> value, e.g. {"team": "payments"}')
    if len(value) > MAX_TAGS:
        raise InvalidField(path, f"has {len(value)} tags; at most {MAX_TAGS}")
    for key, text in value.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise InvalidField(f"{path}.{key}", "a key is 1 to 64 letters, digits, '_', '.', '/' or '-'")
        if not isinstance(text, str) or len(text) > MAX_VALUE:
            raise InvalidField(f"{path}.{key}", f"a value is a string of at most {MAX_VALUE} characters")
    return dict(value)


def parse_tag_filter(text: str, path: str = "tag") -> tuple[str, str]:
    """``key:value`` (or ``key`` alone: any value) as a filter."""
    key, _, value = text.partition(":")
    if not _KEY.fullmatch(key):
        raise InvalidField(path, "must be key:value (or key), the key 1 to 64 letters, digits, '_', '.', '/' or '-'")
    return key, value
