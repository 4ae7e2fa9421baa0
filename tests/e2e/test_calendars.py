"""Calendars on the real stack: stored in Cassandra, named by a job, applied by the scans, said by the ledger."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import pytest

from devstack import tokens
from jobrunner.domain.schedules import parse_instant
from tests.support.stack_api import api, eventually

if TYPE_CHECKING:
    from devstack.stack import LocalStack

pytestmark = pytest.mark.e2e


def local(instant: datetime) -> str:
    """A wall-clock time in Europe/Paris, as a calendar's range is written."""
    return instant.astimezone(ZoneInfo("Europe/Paris")).strftime("%Y-%m-%dT%H:%M:%S")


def test_a_job_skips_the_fires_its_calendar_excludes_and_the_calendar_is_kept_while_named(
    local_stack: LocalStack,
) -> None:
    # Given a calendar (in Paris time) excluding the next 20 seconds, and a job every 10 s naming it
    now = datetime.now(UTC).replace(microsecond=0)
    start = now + timedelta(seconds=4)
    window = {"from": local(start), "to": local(start + timedelta(seconds=20)), "note": "freeze"}
    name = f"freeze-{uuid.uuid4().hex[:6]}"
    put = api(local_stack, "PUT", f"/calendars/{name}", {"timezone": "Europe/Paris", "exclude": [window]})
    assert put.status_code == 201, put.text
    job = api(local_stack, "POST", "/jobs", {"schedule": {"every": "PT10S", "start": start.isoformat()},
                                            "calendar": name}).json()
    preview = api(local_stack, "GET", f"/jobs/{job['job_id']}?preview=4").json()
    assert len(preview["excluded_runs"]) == 2, preview
    # When the scans reach its fires, Then the two in the window are recorded SKIPPED, and the next one runs
    history: list[dict[str, Any]] = eventually(
        lambda: api(local_stack, "GET", f"/jobs/{job['job_id']}/executions").json()["items"],
        lambda h: any(e["status"] == "SUCCESS" for e in h), timeout_s=60)
    by_fire = {parse_instant(e["scheduled_at"], ""): e for e in history}
    skipped = [by_fire[start + timedelta(seconds=s)] for s in (0, 10)]
    assert [e["status"] for e in skipped] == ["SKIPPED", "SKIPPED"], history
    assert skipped[0]["error"].startswith(f"calendar: excluded by calendar {name}") and "freeze" in skipped[0]["error"]
    assert by_fire[start + timedelta(seconds=20)]["status"] == "SUCCESS"
    # and the ledger says which fires the calendar excluded
    fires = api(local_stack, "GET", f"/jobs/{job['job_id']}/fires?from={start.isoformat().replace('+00:00', 'Z')}"
                                    f"&to={(start + timedelta(seconds=20)).isoformat().replace('+00:00', 'Z')}").json()
    assert [f["outcome"] for f in fires["items"]] == ["excluded", "excluded", "published"], fires
    # When the calendar is deleted while the job names it, Then the API refuses (409), naming the job
    refused = api(local_stack, "DELETE", f"/calendars/{name}")
    assert refused.status_code == 409 and job["job_id"] in refused.json()["message"]
    # and another tenant can neither read nor delete it
    stranger = tokens.add(f"stranger-{uuid.uuid4().hex[:6]}")
    assert api(local_stack, "GET", f"/calendars/{name}", token=stranger).status_code == 404
    assert api(local_stack, "DELETE", f"/calendars/{name}", token=stranger).status_code == 404
    assert api(local_stack, "POST", "/jobs", {"schedule": {"every": "PT1H"}, "calendar": name},
               token=stranger).status_code == 422
    # When the job is cancelled, Then the calendar can be deleted
    api(local_stack, "DELETE", f"/jobs/{job['job_id']}")
    assert api(local_stack, "DELETE", f"/calendars/{name}").status_code == 204
    assert api(local_stack, "GET", f"/calendars/{name}").status_code == 404
