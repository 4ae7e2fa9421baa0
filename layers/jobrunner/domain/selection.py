"""Which of a tenant's jobs a list or a bulk change selects: by their status, their schedule's kind and their tags."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.schedules.parsing import KINDS
from jobrunner.domain.tags import parse_tag_filter

if TYPE_CHECKING:
    from jobrunner.domain.jobs import Job, JobStatus


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
        if self.kind is not None and job.spec.schedule.kind != self.kind:
            return False
        return all(key in job.spec.tags and (value is None or job.spec.tags[key] == value) for key, value in self.tags)

    @classmethod
    def of(cls, status: JobStatus | None = None, kind: str | None = None, tag: str | None = None) -> JobFilter:
        if kind is not None and kind not in KINDS:
            raise InvalidField("kind", f"must be one of {', '.join(KINDS)}")
        tags: tuple[tuple[str, str | None], ...] = ()
        if tag:
            key, value = parse_tag_filter(tag)
            tags = ((key, value if ":" in tag else None),)
        return cls(status, kind, tags)
