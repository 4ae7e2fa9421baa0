"""Tags and the filters that select a tenant's jobs by tag, status and kind."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.jobs import Job, JobState, JobStatus
from jobrunner.domain.schedules import At, Cron, Every
from jobrunner.domain.selection import JobFilter
from jobrunner.domain.spec import JobSpec
from jobrunner.domain.tags import parse_tags

NOW = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)


def job(schedule: object, tags: dict[str, str], state: JobState = JobState.ACTIVE) -> Job:
    return Job(user_id="t", job_id="j", spec=JobSpec(schedule=schedule, payload={}, topic="jobs", tags=tags),
               # type: ignore[arg-type]
               created_at=NOW, updated_at=NOW, state=state,
               next_run_at=NOW + timedelta(hours=1))


@pytest.mark.parametrize(("tags", "field", "reason"), [
    (["team"], "tags", "must be an object"),
    ({f"k{n}": "v" for n in range(21)}, "tags", "has 21 tags; at most 20"),
    ({"team:x": "a"}, "tags.team:x", "a key is 1 to 64"),
    ({"": "a"}, "tags.", "a key is 1 to 64"),
    ({"k" * 65: "a"}, "tags." + "k" * 65, "a key is 1 to 64"),
    ({"team": 3}, "tags.team", "a value is a string"),
    ({"team": "v" * 257}, "tags.team", "at most 256 characters"),
])
def test_a_wrong_tag_names_its_field_and_why(tags: object, field: str, reason: str) -> None:
    with pytest.raises(InvalidField) as caught:
        parse_tags(tags)
    assert caught.value.field == field and reason in caught.value.reason


def test_a_filter_selects_by_every_condition_given() -> None:
    payments = job(Cron("0 9 * * *"), {"team": "payments", "env": "prod"})
    reports = job(Every(timedelta(hours=1), start=NOW), {"team": "reports"})
    once = job(At(NOW + timedelta(hours=2)), {"team": "payments"}, state=JobState.PAUSED)
    jobs = [payments, reports, once]
    assert [j for j in jobs if JobFilter.of(tag="team:payments").matches(j)] == [payments, once]
    assert [j for j in jobs if JobFilter.of(tag="env").matches(j)] == [payments]  # a key alone: any value
    assert [j for j in jobs if JobFilter.of(tag="team:").matches(j)] == []  # the empty value is a value
    assert [j for j in jobs if JobFilter.of(JobStatus.PAUSED, tag="team:payments").matches(j)] == [once]
    assert [j for j in jobs if JobFilter.of(kind="cron", tag="team:payments").matches(j)] == [payments]
    assert JobFilter.of().everything and not JobFilter.of(kind="at").everything
    with pytest.raises(InvalidField, match="must be key:value"):
        JobFilter.of(tag="bad key:x")
