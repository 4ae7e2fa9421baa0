"""The store's codec: what a job read from its row knows of the change that set its schedule version."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from jobrunner.adapters.stores import codec
from jobrunner.adapters.stores.cassandra import INSERT_JOB, UPDATE_JOB_SETTINGS, UPDATE_JOB_USER_FIELDS
from jobrunner.domain.jobs import Job, JobState
from jobrunner.domain.schedules import Every
from jobrunner.domain.spec import JobSpec

T0 = datetime(2026, 11, 22, 10, tzinfo=UTC)
FIRST = T0 + timedelta(minutes=1)


def columns(statement: str) -> list[str]:
    """The columns a statement binds, in order (an INSERT's list, or an UPDATE's SET)."""
    if statement.startswith("INSERT"):
        return [c.strip() for c in statement.split("(", 1)[1].split(")", 1)[0].split(",")]
    return re.findall(r"(\w+) = \?", statement.split(" WHERE ")[0])


def blank() -> dict[str, Any]:
    """The columns a row read has that no job write binds (the scan's own, from an older release)."""
    return {"scan_schedule_version": None, "scan_next_run_at": None}


def submitted() -> Job:
    return Job(user_id="alice", job_id="j1", spec=JobSpec(Every(timedelta(minutes=1), start=FIRST), {"n": 1}, "jobs"),
               created_at=T0, updated_at=T0, next_run_at=FIRST, schedule_from=FIRST)


def inserted(job: Job) -> dict[str, Any]:
    return {**blank(), **dict(zip(columns(INSERT_JOB), codec.job_values(job), strict=True))}


def updated(row: dict[str, Any], statement: str, values: tuple[Any, ...]) -> dict[str, Any]:
    return {**row, **dict(zip(columns(statement), values, strict=True))}


def read(row: dict[str, Any]) -> Job:
    return codec.job_from_row(SimpleNamespace(**row))


def test_the_first_fire_of_a_schedule_version_is_the_next_run_its_change_wrote() -> None:
    # A submit plans from its first run
    row = inserted(submitted())
    assert read(row).schedule_from == FIRST
    # a change of schedule or state from the next run it wrote, which a change of anything else keeps
    resumed = submitted().with_changes(version=2, schedule_version=2, next_run_at=FIRST + timedelta(minutes=5))
    row = updated(row, UPDATE_JOB_USER_FIELDS, codec.job_user_fields(resumed))
    assert read(row).schedule_from == FIRST + timedelta(minutes=5)
    patched = resumed.with_changes(version=3, payload={"n": 2}, next_run_at=FIRST + timedelta(minutes=9))
    row = updated(row, UPDATE_JOB_SETTINGS, codec.job_settings(patched))
    assert (read(row).version, read(row).schedule_from) == (3, FIRST + timedelta(minutes=5))
    # and a pause plans nothing
    paused = patched.with_changes(version=4, schedule_version=4, state=JobState.PAUSED, next_run_at=None)
    assert read(updated(row, UPDATE_JOB_USER_FIELDS, codec.job_user_fields(paused))).schedule_from is None


def test_a_row_whose_schedule_version_is_not_known_or_whose_next_run_a_scan_wrote_checks_nothing() -> None:
    row = inserted(submitted())
    # last changed by a release before the schedule version: its next run may be any of its fires
    assert read({**row, "schedule_version_set_at": None}).schedule_from is None
    # a scan of a release that wrote the job's next run under its schedule version
    scanned = {**row, "scan_schedule_version": 1, "scan_next_run_at": FIRST + timedelta(minutes=3)}
    assert (read(scanned).next_run_at, read(scanned).schedule_from) == (FIRST + timedelta(minutes=3), None)
