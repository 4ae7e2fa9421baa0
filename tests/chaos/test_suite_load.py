"""The crash suite's load (``chaos.suite_load``), without servers."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

from chaos.suite_load import Load, job_bodies
from chaos.suite_report import Report
from jobrunner.domain.schedules import parse_instant


def test_the_jobs_due_soonest_are_submitted_first() -> None:
    # A minute's late lane opens 90 s before it: the jobs of the first minute must be in before the others
    bodies = job_bodies(datetime(2026, 11, 28, 4, 0, tzinfo=UTC), executions=120, spread_minutes=2)
    firsts = [parse_instant(b["schedule"].get("at") or b["schedule"]["start"], "due") for b in bodies]
    assert len(bodies) == 124 and firsts == sorted(firsts)
    assert len({b["idempotency_key"] for b in bodies}) == 124


class Answer:
    """A response of the API, as ``Load.accept`` reads it."""

    def __init__(self, status_code: int, job: dict[str, Any]) -> None:
        self.status_code, self._job = status_code, job

    def json(self) -> dict[str, Any]:
        return self._job


def test_a_submission_sent_again_after_its_job_fired_expects_the_fires_it_had() -> None:
    # Given a one-time job and a job every 30 s (start 04:00:00, end 04:01:00) submitted at 04:00:10, whose answers
    # were lost on a slow machine: sent again, the API answers 200 with the job as it now stands, fired already
    # (found by a loaded run: next_run_at null raised, and the suite wrote no report)
    load = Load("http://unused", "token", Report(plan={}), threading.Lock())
    at_body = {"schedule": {"at": "2026-11-28T04:00:30.000Z"}}
    every_body = {"schedule": {"every": "PT30S", "start": "2026-11-28T04:00:00.000Z",
                               "end": "2026-11-28T04:01:00.000Z"}}
    load.accept(at_body, Answer(200, {"job_id": "a", "next_run_at": None, "created_at": "2026-11-28T04:00:10.000Z"}))
    load.accept(every_body, Answer(200, {"job_id": "e", "next_run_at": "2026-11-28T04:01:00.000Z",
                                         "created_at": "2026-11-28T04:00:10.000Z"}))
    # Then the fires expected are the job's own from its creation: 04:00:30 once; 04:00:30 and 04:01:00 every 30 s
    at = [parse_instant(t, "t") for t in ("2026-11-28T04:00:30.000Z", "2026-11-28T04:01:00.000Z")]
    assert sorted(load.expected) == [("a", at[0]), ("e", at[0]), ("e", at[1])]
    assert load.report.submitted == 2
