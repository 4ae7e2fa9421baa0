"""The crash suite's load (``chaos.suite_load``), without servers."""

from __future__ import annotations

from datetime import UTC, datetime

from chaos.suite_load import job_bodies
from jobrunner.domain.schedules import parse_instant


def test_the_jobs_due_soonest_are_submitted_first() -> None:
    # A minute's late lane opens 90 s before it: the jobs of the first minute must be in before the others
    bodies = job_bodies(datetime(2026, 11, 28, 4, 0, tzinfo=UTC), executions=120, spread_minutes=2)
    firsts = [parse_instant(b["schedule"].get("at") or b["schedule"]["start"], "due") for b in bodies]
    assert len(bodies) == 124 and firsts == sorted(firsts)
    assert len({b["idempotency_key"] for b in bodies}) == 124
