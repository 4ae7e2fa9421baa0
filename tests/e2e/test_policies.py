"""Overlap policies and the catch-up window on the real stack: Cassandra, Kafka, the scans and the example worker
(whose ``sleep`` executions take as long as asked, and stop on a cancel message)."""

from __future__ import annotations

import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.stack_api import api, eventually

if TYPE_CHECKING:
    from devstack.stack import LocalStack

pytestmark = pytest.mark.e2e


def submit(stack: LocalStack, body: dict[str, Any]) -> dict[str, Any]:
    response = api(stack, "POST", "/jobs", body)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def history(stack: LocalStack, job_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = api(stack, "GET", f"/jobs/{job_id}/executions?limit=500").json()["items"]
    return sorted(items, key=lambda e: (e["scheduled_at"], e["attempt"]))


def every_10s(stack: LocalStack, seconds: float, **options: Any) -> dict[str, Any]:
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=4)
    return submit(stack, {"schedule": {"every": "PT10S", "start": start.isoformat()},
                          "payload": {"type": "sleep", "seconds": seconds}, **options})


def test_skip_records_the_fires_that_come_while_the_previous_execution_runs(local_stack: LocalStack) -> None:
    job = every_10s(local_stack, 25, overlap="skip")
    # When the first execution (25 s) has run to its end and a later fire ran
    done = eventually(lambda: history(local_stack, job["job_id"]),
                      lambda h: len([e for e in h if e["status"] == "SUCCESS"]) >= 1 and len(h) >= 4, timeout_s=90)
    # Then the fires that came while it ran were skipped, each saying why, and none ran beside it
    first, second, third = done[:3]
    assert first["status"] == "SUCCESS"
    assert (second["status"], third["status"]) == ("SKIPPED", "SKIPPED")
    assert second["error"].startswith("overlap: skip: the previous execution had not reported: the fire at "
                                      + first["scheduled_at"])
    api(local_stack, "DELETE", f"/jobs/{job['job_id']}")


def test_cancel_other_stops_the_previous_execution_through_the_worker_and_never_retries_it(
    local_stack: LocalStack,
) -> None:
    job = every_10s(local_stack, 25, overlap="cancel_other", max_retries=2)
    # When the second fire comes while the first sleeps
    done = eventually(lambda: history(local_stack, job["job_id"]),
                      lambda h: len(h) >= 2 and h[0]["status"] == "FAILED", timeout_s=60)
    api(local_stack, "DELETE", f"/jobs/{job['job_id']}")
    # Then the worker stopped the first on the cancel message: FAILED as cancelled, with no retry
    first = done[0]
    # (or, on a loaded machine, before it started: the worker had both messages when it came to the first)
    reason = "overlap policy cancel_other: the fire at " + done[1]["scheduled_at"]
    assert first["error"].startswith((f"cancelled: {reason}", f"cancelled before it started: {reason}")), first
    # before its 25 s were up (the example worker's sleep counts them from the fire; the shared worker runs one
    # execution at a time, so it may have started late, behind an earlier test's)
    finished = datetime.fromisoformat(first["finished_at"].replace("Z", "+00:00"))
    fire = datetime.fromisoformat(first["scheduled_at"].replace("Z", "+00:00"))
    assert finished < fire + timedelta(seconds=24), first
    assert [e["attempt"] for e in done if e["scheduled_at"] == first["scheduled_at"]] == [1]


def test_buffer_all_runs_the_fires_one_after_another(local_stack: LocalStack) -> None:
    job = every_10s(local_stack, 14, overlap="buffer_all")
    done = eventually(lambda: history(local_stack, job["job_id"]),
                      lambda h: len([e for e in h if e["status"] == "SUCCESS"]) >= 3, timeout_s=120)
    api(local_stack, "DELETE", f"/jobs/{job['job_id']}")
    ran = [e for e in done if e["status"] == "SUCCESS"][:3]
    # Then each started only once the one before had finished, in the order of their fires
    for before, after in itertools.pairwise(ran):
        assert after["scheduled_at"] > before["scheduled_at"]
        assert after["published_at"] >= before["finished_at"], (before, after)


def test_a_resume_with_catch_up_replays_only_the_latest_missed_fire(local_stack: LocalStack) -> None:
    job = every_10s(local_stack, 0, catch_up={"most": 1})
    eventually(lambda: history(local_stack, job["job_id"]), lambda h: len(h) >= 1, timeout_s=60)
    # Given a pause over about four fires, then a resume with catch-up
    assert api(local_stack, "POST", f"/jobs/{job['job_id']}/pause").status_code == 200
    time.sleep(42)
    assert api(local_stack, "POST", f"/jobs/{job['job_id']}/resume", {"catch_up": True}).status_code == 200
    done = eventually(lambda: history(local_stack, job["job_id"]),
                      lambda h: any(e["status"] == "SKIPPED" for e in h)
                      and any(e["status"] == "SUCCESS" for e in h[2:]), timeout_s=60)
    api(local_stack, "DELETE", f"/jobs/{job['job_id']}")
    # Then the missed fires but the latest are dropped, with one record naming where the schedule resumed
    [dropped] = [e for e in done if e["status"] == "SKIPPED"]
    assert dropped["error"].startswith("catch_up: missed; outside the catch-up window (most 1)")
    assert "where the schedule resumes" in dropped["error"]
