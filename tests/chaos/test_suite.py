"""The crash suite's schedule (``chaos.suite``), without servers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from chaos.suite import FULL, SMALL, SUBMISSIONS_PER_S, first_due_minute
from jobrunner.domain.jobs import Lane
from jobrunner.domain.placement import OPEN_AHEAD, place
from jobrunner.domain.time import MINUTE, minute_bucket

if TYPE_CHECKING:
    from chaos.suite_faults import Plan

T0 = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)


@pytest.mark.parametrize("plan", [SMALL, FULL], ids=["small", "full"])
@pytest.mark.parametrize("second", range(60))
def test_every_job_is_submitted_before_its_minutes_late_lane_opens(plan: Plan, second: int) -> None:
    # Given a suite that starts submitting at any second of its minute, at the rate it allows for
    now = T0 + timedelta(seconds=second, milliseconds=500)
    first = minute_bucket(first_due_minute(plan, now))
    submitted_by = now + timedelta(seconds=plan.executions / SUBMISSIONS_PER_S)
    # Then the job due first is still a planned row when the last job is submitted (a late row would wake
    # its partition's scan, one process a submission until the tick's scan holds the lease)
    assert first == first_due_minute(plan, now)  # a whole minute
    assert place(first, submitted_by)[1] is Lane.PLANNED
    # and the suite waits less than a minute more than that needs
    assert first - submitted_by < OPEN_AHEAD + MINUTE
