"""Tags: a job's key/value labels, and the filters that select jobs by them, their status and their kind.

A job has at most ``MAX_TAGS`` tags. A key is 1 to 64 letters, digits and ``_ . / -`` (no ``:``, which
separates a key from its value in a filter: ``team:payments``); a value is 0 to 256 characters. Tags are
the tenant's own: every list and bulk change reads only the tenant's partition.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobrunner.domain.errors import InvalidField

if TYPE_CHECKING:
    from jobrunner.domain.jobs import Job, JobStatus

MAX_TAGS = 20
MAX_VALUE = 256
_KEY = re.compile(r"[A-Za-z0-9_./-]{1,64}")
KINDS = ("at", "every", "cron", "iso8601")


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


@dataclass(frozen=True)
class JobFilter:
    """Which of a tenant's jobs a list or a bulk change selects: all of the conditions given."""

    status: JobStatus | None = None
    kind: str | None = None
    #: (key, value) pairs the job must carry; a value of None matches any value of the key.
    tags: tuple[tuple[str, str | None], ...] = field(default=())

    @property
    def everything(self) -> bool:
        return self.status is None and self.kind is None and not self.tags

    def matches(self, job: Job) -> bool:
        if self.status is not None and job.status is not self.status:
            return False
        if self.kind is not None and job.schedule.kind != self.kind:
            return False
        return all(key in job.tags and (value is None or job.tags[key] == value) for key, value in self.tags)

    @classmethod
    def of(cls, status: JobStatus | None = None, kind: str | None = None, tag: str | None = None) -> JobFilter:
        if kind is not None and kind not in KINDS:
            raise InvalidField("kind", f"must be one of {', '.join(KINDS)}")
        tags: tuple[tuple[str, str | None], ...] = ()
        if tag:
            key, value = parse_tag_filter(tag)
            tags = ((key, value if ":" in tag else None),)
        return cls(status, kind, tags)
