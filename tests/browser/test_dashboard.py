"""The dashboard in a real headless Chromium against the whole local stack (real Cassandra, Kafka, moto).

The local stack runs the example worker, so a job submitted in the form really runs: it is published to
Kafka at its due second, the worker reports SUCCESS on `job-results`, and the page shows it.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from playwright.sync_api import expect

from tests.support.stack_api import api

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route

    from devstack.stack import LocalStack
    from tests.browser.conftest import Dashboard

pytestmark = pytest.mark.e2e


def rfc3339(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def submit(stack: LocalStack, body: dict[str, Any]) -> dict[str, Any]:
    response = api(stack, "POST", "/jobs", body)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def execution_rows(page: Page) -> list[dict[str, str]]:
    """The executions table as the user reads it: attempt, trigger and status of each row, newest first."""
    rows: list[dict[str, str]] = page.locator("#exec-table tbody tr").evaluate_all(
        "rows => rows.map(r => ({attempt: r.cells[0].innerText, trigger: r.cells[1].innerText,"
        " status: r.cells[2].innerText, lateness: r.cells[5].innerText}))"
    )
    return rows


def wait_for_rows(page: Page, done: Any, timeout_s: float, seen: list[str]) -> list[dict[str, str]]:
    """Let the page poll on its own until its executions table satisfies ``done``; records every status seen."""
    deadline = time.monotonic() + timeout_s
    rows = execution_rows(page)
    while not done(rows) and time.monotonic() < deadline:
        page.wait_for_timeout(250)
        rows = execution_rows(page)
        for row in rows:
            if not seen or seen[-1] != row["status"]:
                seen.append(row["status"])
    assert done(rows), f"the executions table never got there; it shows {rows}"
    return rows


def test_a_job_submitted_in_the_form_runs_and_a_manual_run_adds_to_its_history(dashboard: Dashboard) -> None:
    page = dashboard.open("#/submit")
    # Given the submit form, When the schedule is not a date-time, Then the field says why at once
    page.locator("#in-at").fill("tomorrow at noon")
    expect(page.locator('[data-error-for="schedule.at"]')).to_contain_text("not an RFC 3339 date-time")
    expect(page.locator("#preview-note")).to_contain_text("Fix the schedule")
    # When it is a one-time job due in a few seconds, Then the preview shows its single fire time
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=6)
    page.locator("#in-at").fill(rfc3339(due))
    expect(page.locator('[data-error-for="schedule.at"]')).to_be_empty()
    expect(page.locator("#preview-list li")).to_have_count(1)
    expect(page.locator("#preview-list li").first).to_contain_text(due.strftime("%Y-%m-%d %H:%M:%SZ"))
    page.locator("#in-payload").fill('{"type": "echo", "from": "browser test"}')
    page.locator("#in-jitter").fill("2")
    dashboard.screenshot("1-form")

    # When the form is submitted, Then the API's own preview and a link to the new job appear
    page.get_by_role("button", name="Submit job").click()
    link = page.locator("#submit-link")
    expect(link).to_be_visible()
    expect(page.locator("#preview-note")).to_contain_text("From the API")
    expect(page.locator("#preview-list li")).to_have_count(1)
    job_id = link.inner_text()
    link.click()

    # Then the job page shows it, and it runs: an execution appears and ends in SUCCESS
    expect(page.locator("#job-title")).to_contain_text(job_id)
    expect(page.locator("#job-payload")).to_contain_text("browser test")
    expect(page.locator("#job-fields")).to_contain_text("up to 2 s after each fire")
    seen: list[str] = []
    rows = wait_for_rows(page, lambda r: [x["status"] for x in r] == ["SUCCESS"], 60, seen)
    assert rows[0]["trigger"] == "SCHEDULE"
    assert rows[0]["lateness"].endswith(("ms", "s")), rows  # published_at - due_at is shown
    expect(page.locator("#job-status")).to_have_text("SUCCESS")
    expect(page.locator("#exec-chart .bar")).to_have_count(1)
    dashboard.screenshot("2-ran")

    # When the user runs it now by hand, Then the history gains a MANUAL execution that also succeeds
    page.get_by_role("button", name="Run now").click()
    expect(page.locator("#toast")).to_contain_text("Run queued")
    rows = wait_for_rows(page, lambda r: len(r) == 2 and all(x["status"] == "SUCCESS" for x in r), 60, seen)
    assert sorted(x["trigger"] for x in rows) == ["MANUAL", "SCHEDULE"]
    expect(page.locator("#exec-chart .bar")).to_have_count(2)
    dashboard.screenshot("3-manual-run")
    # And the API agrees with what the page shows
    history = api(dashboard.stack, "GET", f"/jobs/{job_id}/executions").json()["items"]
    assert sorted((e["trigger"], e["status"]) for e in history) == [("MANUAL", "SUCCESS"), ("SCHEDULE", "SUCCESS")]
    assert "SUCCESS" in seen


def test_a_failed_attempt_shows_its_error_and_the_retry_that_followed(dashboard: Dashboard) -> None:
    # Given a job the example worker fails once, retried after about a second
    job = submit(dashboard.stack, {
        "schedule": {"at": rfc3339(datetime.now(UTC) + timedelta(seconds=3))},
        "payload": {"type": "flaky", "fail_attempts": 1}, "max_retries": 2,
        "backoff": {"initial_delay_s": 1, "multiplier": 1, "max_delay_s": 1},
    })
    page = dashboard.open(f"#/jobs/{job['job_id']}")
    # When it runs, Then the timeline shows the failed attempt with its error, then the successful retry
    seen: list[str] = []
    rows = wait_for_rows(page, lambda r: [(x["attempt"], x["status"]) for x in r] == [
        ("2", "SUCCESS"), ("1", "FAILED")], 60, seen)
    assert [x["trigger"] for x in rows] == ["RETRY", "SCHEDULE"]
    failed = page.locator('#exec-table tr[data-status="FAILED"]')
    expect(failed.locator(".error-text")).to_contain_text("flaky failure on attempt 1")
    expect(page.locator("#exec-chart .bar.s-failed")).to_have_count(1)
    expect(page.locator("#exec-chart .bar.s-success")).to_have_count(1)
    # And a manual run is a new execution with the same policy: it fails once too, then its retry succeeds
    page.get_by_role("button", name="Run now").click()
    rows = wait_for_rows(page, lambda r: len(r) == 4 and r[0]["status"] == "SUCCESS", 60, seen)
    assert [(x["trigger"], x["status"]) for x in rows[:2]] == [("RETRY", "SUCCESS"), ("MANUAL", "FAILED")]
    page.locator("#toast").wait_for(state="hidden", timeout=10_000)
    dashboard.screenshot("history", full_page=False)


def test_the_browser_computes_the_same_fire_times_as_the_api(dashboard: Dashboard) -> None:
    """The form's live preview (at, every, fixed-length ISO 8601) against the API's ?preview=5 of the same job."""
    now = datetime.now(UTC).replace(microsecond=0)
    schedules = [
        {"every": "PT10M", "start": rfc3339(now + timedelta(minutes=7))},
        {"every": "PT1H", "start": rfc3339(now - timedelta(minutes=10)), "end": rfc3339(now + timedelta(hours=3))},
        {"every": "P1DT30S", "start": rfc3339(now - timedelta(days=3, minutes=1))},
        {"iso8601": f"R3/{rfc3339(now + timedelta(minutes=5))}/PT1H"},
        {"iso8601": f"R/{rfc3339(now - timedelta(minutes=90))}/PT1H"},
        {"iso8601": f"R4/PT30M/{rfc3339(now + timedelta(hours=1))}"},
        {"iso8601": f"R6/{rfc3339(now + timedelta(minutes=1))}/{rfc3339(now + timedelta(minutes=21))}"},
        {"at": rfc3339(now + timedelta(hours=2))},
    ]
    page = dashboard.open("#/submit")
    for schedule in schedules:
        job = submit(dashboard.stack, {"schedule": schedule, "payload": {}})
        from_api = api(dashboard.stack, "GET", f"/jobs/{job['job_id']}?preview=5").json()["next_runs"]
        if "at" in schedule:
            from_api = [job["next_run_at"]]  # a one-time job that has not run yet: its next run is its only fire
        in_browser = page.evaluate(
            "body => JobSchedules.localFires(body).map(t => new Date(t).toISOString())", {"schedule": schedule})
        assert in_browser == from_api, schedule


def test_durations_and_relative_times_round_whole_units_and_never_show_60(dashboard: Dashboard) -> None:
    """A preview 29 min 59.6 s away read "in 29 min 60 s" (a CI run of the form's test): each unit is rounded
    before it is split."""
    page = dashboard.open("#/submit")
    durations = [0.4, 999.4, 999.6, 9_994, 9_996, 59_940, 59_960, 119_600, 1_799_600, 3_599_600, 5_399_600,
                 86_369_999, 86_399_999, -1_799_600]
    shown = page.evaluate("values => values.map(JobFormat.fmtDuration)", durations)
    assert shown == ["0 ms", "999 ms", "1.00 s", "9.99 s", "10.0 s", "59.9 s", "1 min 0 s", "2 min 0 s",
                     "30 min 0 s", "1 h 0 min", "1 h 30 min", "23 h 59 min", "1.0 d", "-30 min 0 s"]
    base = 1_800_000_000_000
    offsets = [200, 700, 59_400, 59_600, 1_799_600, -1_799_600, -400]
    relative = page.evaluate(
        "([base, offsets]) => offsets.map(o => JobFormat.relative(new Date(base + o).toISOString(), base))",
        [base, offsets])
    assert relative == ["now", "in 1 s", "in 59 s", "in 1 min 0 s", "in 30 min 0 s", "30 min 0 s ago", "now"]


def test_pause_resume_and_cancel_from_the_job_page(dashboard: Dashboard) -> None:
    start = datetime.now(UTC) + timedelta(hours=1)
    job = submit(dashboard.stack, {"schedule": {"every": "PT30M", "start": rfc3339(start)}, "payload": {}})
    page = dashboard.open(f"#/jobs/{job['job_id']}")
    # The next fire times come from the API (?preview=5): start, start + 30 min, ...
    fires = page.locator("#job-next li")
    expect(fires).to_have_count(5)
    expect(fires.nth(1)).to_contain_text((start + timedelta(minutes=30)).strftime("%Y-%m-%d %H:%M:%SZ"))
    expect(page.locator("#job-status")).to_have_text("SCHEDULED")
    expect(page.get_by_role("button", name="Resume")).to_be_disabled()

    page.get_by_role("button", name="Pause").click()
    expect(page.locator("#job-status")).to_have_text("PAUSED")
    expect(page.locator("#job-next li")).to_have_text(["none planned"])
    expect(page.get_by_role("button", name="Pause")).to_be_disabled()

    page.get_by_role("button", name="Resume").click()
    expect(page.locator("#job-status")).to_have_text("SCHEDULED")
    expect(page.locator("#job-next li")).to_have_count(5)

    # Cancel asks once more in place; only the second click cancels
    cancel = page.locator("#act-cancel")
    cancel.click()
    expect(cancel).to_have_text("Really cancel?")
    assert api(dashboard.stack, "GET", f"/jobs/{job['job_id']}").json()["status"] == "SCHEDULED"
    cancel.click()
    expect(page.locator("#job-status")).to_have_text("CANCELLED")
    for name in ("Run now", "Pause", "Resume", "Cancel job"):
        expect(page.get_by_role("button", name=name)).to_be_disabled()
    assert api(dashboard.stack, "GET", f"/jobs/{job['job_id']}").json()["status"] == "CANCELLED"
    # and the change log beside them lists each of these requests, newest first
    page.reload()
    expect(page.locator("#changes-table tbody tr")).to_have_count(4)
    expect(page.locator("#changes-table tbody tr td:nth-child(2)")).to_have_text(
        ["cancel", "resume", "pause", "submit"])


def test_the_job_page_shows_each_fire_and_what_became_of_it(dashboard: Dashboard) -> None:
    # Given a job every 10 s from a few seconds from now
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=4)
    job = submit(dashboard.stack, {"schedule": {"every": "PT10S", "start": rfc3339(start)}, "payload": {}})
    page = dashboard.open(f"#/jobs/{job['job_id']}")
    # Then the fires card lists its fires to come, from the API's ledger
    expect(page.locator('#fires-table tbody tr[data-outcome="upcoming"]').first).to_be_visible()
    # When two of them have run, Then each shows as published, with its lateness, and the verdict says so
    page.wait_for_function(
        "() => document.querySelectorAll('#fires-table tbody tr[data-outcome=\"published\"]').length >= 2",
        timeout=60_000)
    first = page.locator('#fires-table tbody tr[data-outcome="published"]').first
    expect(first.locator("td").nth(0)).to_contain_text(start.strftime("%Y-%m-%d %H:%M:%SZ"))
    expect(first.locator("td").nth(2)).to_contain_text("ms")
    expect(page.locator("#fires-verdict")).to_contain_text("every past fire ran once")
    # When the job is cancelled, Then the fires after it say cancelled, and nothing is unaccounted for
    cancelled = api(dashboard.stack, "DELETE", f"/jobs/{job['job_id']}").json()
    assert cancelled["state"] == "CANCELLED"
    page.reload()
    expect(page.locator('#fires-table tbody tr[data-outcome="cancelled"]').first).to_be_visible()
    expect(page.locator('#fires-table tbody tr[data-outcome="missing"]')).to_have_count(0)
    expect(page.locator("#fires-verdict")).to_contain_text("cancelled")
    # And the range can be narrowed to the last hour
    page.locator("#fires-range").select_option("1")
    expect(page.locator('#fires-table tbody tr[data-outcome="published"]').first).to_be_visible()
    dashboard.screenshot("fires")


def test_a_backfill_from_the_job_page_lists_then_runs_the_past_fires(dashboard: Dashboard) -> None:
    # Given a job every 10 minutes whose schedule started 55 minutes ago
    now = datetime.now(UTC).replace(microsecond=0)
    job = submit(dashboard.stack, {"schedule": {"every": "PT10M", "start": rfc3339(now - timedelta(minutes=55))},
                                   "payload": {"type": "echo"}})
    page = dashboard.open(f"#/jobs/{job['job_id']}")
    # When a range in the future is asked for, Then the API's reason shows under the field it names
    page.locator("#bf-from").fill("-1h")
    page.locator("#bf-to").fill("+1h")
    page.get_by_role("button", name="List the fires").click()
    expect(page.locator('[data-bf-error-for="to"]')).to_contain_text("in the future")
    # When the last hour is listed, Then its six past fires show, and nothing is queued
    page.locator("#bf-to").fill("now")
    page.get_by_role("button", name="List the fires").click()
    expect(page.locator("#bf-status")).to_contain_text("6 fires would run")
    expect(page.locator("#bf-fires li")).to_have_count(6)
    expect(page.locator('[data-bf-error-for="to"]')).to_be_empty()
    expect(page.locator("#bf-fires li").first).to_contain_text(
        (now - timedelta(minutes=55)).strftime("%Y-%m-%d %H:%M:%SZ"))
    assert api(dashboard.stack, "GET", f"/jobs/{job['job_id']}/executions").json()["items"] == []
    # When they are backfilled, Then each runs once, as a BACKFILL execution the worker reports
    page.get_by_role("button", name="Backfill").click()
    expect(page.locator("#toast")).to_contain_text("Backfill queued: 6 fires")
    rows = wait_for_rows(page, lambda r: len(r) == 6 and all(x["status"] == "SUCCESS" for x in r), 60, [])
    assert {x["trigger"] for x in rows} == {"BACKFILL"}
    dashboard.screenshot("backfill")
    # And the change log beside it says who asked for it
    expect(page.locator('#changes-table tbody tr[data-action="backfill"]')).to_have_count(1)


def test_calendars_are_made_named_by_a_job_shown_in_its_preview_and_kept_while_named(dashboard: Dashboard) -> None:
    page = dashboard.open("#/calendars")
    expect(page.locator("#cal-empty")).to_be_visible()
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date()
    # When a calendar with a wrong line is saved, Then the line and the reason show under the field
    page.locator("#cal-name").fill("holidays")
    page.locator("#cal-timezone").fill("UTC")
    page.locator("#cal-exclude").fill(f"{tomorrow.isoformat()} a day off\n2026-12-31..2026-12-30 backwards")
    page.get_by_role("button", name="Create or replace").click()
    expect(page.locator('[data-cal-error-for="exclude"]')).to_contain_text("line 2: is before from")
    # When it is fixed, Then it is saved and listed
    page.locator("#cal-exclude").fill(f"{tomorrow.isoformat()} a day off")
    page.get_by_role("button", name="Create or replace").click()
    expect(page.locator('#cal-table tbody tr[data-calendar="holidays"]')).to_contain_text("a day off")
    # Given a job every 6 hours from today's midnight that names it, Then its page shows tomorrow's fires excluded
    midnight = datetime.combine(datetime.now(UTC).date(), datetime.min.time(), UTC)
    job = submit(dashboard.stack, {"schedule": {"every": "PT6H", "start": rfc3339(midnight)}, "payload": {},
                                   "calendar": "holidays"})
    dashboard.go(f"#/jobs/{job['job_id']}")
    expect(page.locator("#job-fields")).to_contain_text("holidays")
    expect(page.locator("#job-next li.excluded").first).to_contain_text(tomorrow.isoformat())
    excluded = api(dashboard.stack, "GET", f"/jobs/{job['job_id']}?preview=5").json()["excluded_runs"]
    expect(page.locator("#job-next li.excluded")).to_have_count(len(excluded))
    # When the calendar is deleted while the job names it, Then the API refuses, and the page says why
    dashboard.go("#/calendars")
    page.locator('#cal-table tbody tr[data-calendar="holidays"]').get_by_role("button", name="Delete").click()
    expect(page.locator("#toast")).to_contain_text("named by 1 job")
    expect(page.locator('#cal-table tbody tr[data-calendar="holidays"]')).to_have_count(1)
    # When the job is cancelled, Then the delete goes through
    api(dashboard.stack, "DELETE", f"/jobs/{job['job_id']}")
    page.locator('#cal-table tbody tr[data-calendar="holidays"]').get_by_role("button", name="Delete").click()
    expect(page.locator('#cal-table tbody tr[data-calendar="holidays"]')).to_have_count(0)
    dashboard.screenshot("calendars")


def test_a_job_of_two_fires_from_the_form_runs_twice_then_is_deleted_keeping_its_history(
    dashboard: Dashboard,
) -> None:
    page = dashboard.open("#/submit")
    # Given an every-10-seconds job of two fires, to be deleted after its last
    page.locator("input[name=kind][value=every]").check()
    page.locator("#in-every").fill("PT10S")
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=4)
    page.locator("#in-start").fill(rfc3339(start))
    page.locator("#in-count").fill("2")
    page.locator("#in-delete-after").check()
    # Then the preview (computed in the browser) shows exactly two fires
    expect(page.locator("#preview-list li")).to_have_count(2)
    page.get_by_role("button", name="Submit job").click()
    link = page.locator("#submit-link")
    expect(link).to_be_visible()
    job_id = link.inner_text()
    link.click()
    # and its page says how it ends
    expect(page.locator("#job-fields")).to_contain_text("after 2 fires")
    expect(page.locator("#job-fields")).to_contain_text("then the job is deleted")
    # When both fires have run and reported, Then it is deleted, and its page shows what is left: its history
    expect(page.locator("#job-status")).to_have_text("DELETED", timeout=60_000)
    expect(page.locator("#job-fields")).to_contain_text("deleted after its last fire")
    rows = execution_rows(page)
    assert [r["status"] for r in rows] == ["SUCCESS", "SUCCESS"], rows
    expect(page.locator('#changes-table tbody tr[data-action="delete"]')).to_have_count(1)
    assert api(dashboard.stack, "GET", f"/jobs/{job_id}").status_code == 404
    dashboard.screenshot("deleted")


def test_a_job_with_the_overlap_policy_skip_shows_its_skipped_fires(dashboard: Dashboard) -> None:
    page = dashboard.open("#/submit")
    # Given an every-10-seconds job whose executions take 25 s, made with the overlap policy skip
    page.locator("input[name=kind][value=every]").check()
    page.locator("#in-every").fill("PT10S")
    page.locator("#in-start").fill(rfc3339(datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)))
    page.locator("#in-overlap").select_option("skip")
    page.locator("#in-catchup-most").fill("1")
    page.locator("#in-payload").fill('{"type": "sleep", "seconds": 25}')
    page.get_by_role("button", name="Submit job").click()
    link = page.locator("#submit-link")
    expect(link).to_be_visible()
    link.click()
    expect(page.locator("#job-fields")).to_contain_text("skip")
    expect(page.locator("#job-fields")).to_contain_text("most 1")
    # Then the fires that come while the first execution runs are skipped, and the page says why
    skipped = page.locator('#fires-table tbody tr[data-outcome="skipped"]')
    expect(skipped.first).to_be_visible(timeout=60_000)
    expect(skipped.first).to_contain_text("the previous execution had not reported")
    expect(page.locator('#exec-table tbody tr[data-status="SKIPPED"]').first).to_be_visible()
    dashboard.screenshot("overlap-skip")


def test_the_form_shows_the_servers_field_errors_next_to_the_fields(dashboard: Dashboard) -> None:
    page = dashboard.open("#/submit")
    page.locator("input[name=kind][value=cron]").check()
    # February never has a 31st: the browser's check passes it, the API's does not
    page.locator("#in-cron").fill("0 0 31 2 *")
    expect(page.locator("#preview-note")).to_contain_text("once the job is submitted")
    page.locator("#in-timezone").fill("Mars/Olympus_Mons")
    expect(page.locator('[data-error-for="schedule.timezone"]')).to_contain_text("unknown time zone")
    page.locator("#in-timezone").fill("Europe/Paris")
    page.get_by_role("button", name="Submit job").click()
    expect(page.locator('[data-error-for="schedule.cron"]')).to_contain_text("never fires")
    expect(page.locator("#in-cron")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#submit-status")).to_contain_text("rejected")
    dashboard.screenshot("server-422")

    # The live preview of an `every` schedule, and its own rule (at least ten seconds)
    page.locator("input[name=kind][value=every]").check()
    page.locator("#in-every").fill("PT5S")
    expect(page.locator('[data-error-for="schedule.every"]')).to_have_text("must be at least 10 seconds")
    page.locator("#in-every").fill("PT15M")
    expect(page.locator("#preview-list li")).to_have_count(5)
    expect(page.locator("#preview-list li").nth(1)).to_contain_text("in 30 min")
    page.locator("input[name=kind][value=cron]").check()

    # A fixed schedule submits, and the API previews five cron fires in Paris time
    page.locator("#in-cron").fill("30 9 * * MON-FRI")
    page.get_by_role("button", name="Submit job").click()
    expect(page.locator("#submit-link")).to_be_visible()
    expect(page.locator("#preview-list li")).to_have_count(5)
    first = page.locator("#preview-list li").first.inner_text()
    assert first[11:16] in ("07:30", "08:30"), first  # 09:30 in Paris is 07:30 or 08:30 UTC


def test_the_jobs_list_filters_by_status_schedule_kind_and_next_run(dashboard: Dashboard) -> None:
    soon = datetime.now(UTC) + timedelta(minutes=20)
    tag = f"filters-{time.time_ns()}"
    cron = submit(dashboard.stack, {"schedule": {"cron": "0 3 * * *"}, "payload": {"tag": tag},
                                    "tags": {"browser": tag}})
    every = submit(dashboard.stack, {"schedule": {"every": "PT10M", "start": rfc3339(soon)}, "payload": {"tag": tag}})
    later = submit(dashboard.stack, {"schedule": {"at": rfc3339(soon + timedelta(days=3))}, "payload": {"tag": tag}})
    paused = submit(dashboard.stack, {"schedule": {"every": "PT1H"}, "payload": {"tag": tag}})
    assert api(dashboard.stack, "POST", f"/jobs/{paused['job_id']}/pause").status_code == 200
    page = dashboard.open("#/jobs")

    def listed(job: dict[str, Any]) -> Any:
        return page.locator(f'#jobs-table tr[data-job-id="{job["job_id"]}"]')

    for job in (cron, every, later, paused):
        expect(listed(job)).to_have_count(1)
    page.locator("#f-kind").select_option("cron")
    expect(listed(cron)).to_have_count(1)
    expect(listed(every)).to_have_count(0)
    page.locator("#f-kind").select_option("")

    page.locator("#f-next").select_option("1h")
    expect(listed(every)).to_have_count(1)
    expect(listed(later)).to_have_count(0)
    page.locator("#f-next").select_option("later")
    expect(listed(later)).to_have_count(1)
    expect(listed(every)).to_have_count(0)
    page.locator("#f-next").select_option("none")
    expect(listed(paused)).to_have_count(1)
    expect(listed(later)).to_have_count(0)
    page.locator("#f-next").select_option("")

    page.locator("#f-status").select_option("PAUSED")  # filtered by the API (?status=PAUSED)
    expect(listed(paused)).to_have_count(1)
    expect(listed(cron)).to_have_count(0)
    expect(page.locator("#jobs-table tbody tr .badge")).to_have_text(["PAUSED"] * page.locator(
        "#jobs-table tbody tr").count())
    page.locator("#f-status").select_option("")
    expect(listed(cron)).to_have_count(1)
    # a tag is filtered by the API (?tag=browser:<tag>): only the job carrying it is listed
    page.locator("#f-tag").fill(f"browser:{tag}")
    page.locator("#f-tag").press("Enter")
    expect(listed(every)).to_have_count(0)
    expect(listed(cron)).to_have_count(1)
    expect(page.locator("#jobs-table tbody tr")).to_have_count(1)
    page.locator("#f-tag").fill("")
    page.locator("#f-tag").press("Enter")
    expect(listed(every)).to_have_count(1)
    dashboard.screenshot("jobs")

    listed(every).click()
    expect(page.locator("#job-title")).to_contain_text(every["job_id"])


def test_segment_health_turns_red_when_a_segment_falls_behind(dashboard: Dashboard) -> None:
    segments = dashboard.stack.settings.segments
    page = dashboard.open("#/segments")
    cells = page.locator("#heat .cell")
    expect(cells).to_have_count(segments)
    expect(page.locator("#seg-table tbody tr")).to_have_count(segments)
    # Each cell is coloured from the API's own verdict
    truth = {s["segment"]: s["healthy"] for s in api(dashboard.stack, "GET", "/segments").json()["items"]}
    for segment, healthy in truth.items():
        cell = page.locator(f'#heat .cell[data-segment="{segment}"]')
        expect(cell).to_have_class("cell healthy" if healthy else "cell behind", timeout=20_000)

    # When the API reports segment 1 an hour behind, Then its cell and row turn red and the summary says so
    def one_behind(route: Route) -> None:
        body = route.fetch().json()
        for item in body["items"]:
            item.update(healthy=True, lag_s=0.0)
            if item["segment"] == 1:
                item.update(healthy=False, lag_s=3600.0)
        route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    page.route("**/segments", one_behind)
    page.get_by_role("button", name="Refresh").click()
    behind = page.locator('#heat .cell[data-segment="1"]')
    expect(behind).to_have_class("cell behind")
    expect(behind).to_have_css("background-color", "rgb(210, 60, 60)")
    expect(page.locator('#heat .cell[data-segment="0"]')).to_have_css("background-color", "rgb(46, 158, 98)")
    expect(page.locator('#seg-table tr[data-segment="1"]')).to_contain_text("1 h 0 min")
    expect(page.locator("#seg-summary")).to_have_text(f"{segments} segments, 1 behind")
    dashboard.screenshot("segments")


def test_the_shell_is_public_but_the_data_needs_a_token(dashboard: Dashboard) -> None:
    page = dashboard.open("#/jobs", sign_in=False)
    expect(page.locator("#banner")).to_contain_text("Paste a bearer token")
    expect(page.locator("#conn")).to_have_text("no token")
    page.get_by_placeholder("paste a bearer token").fill("not-a-token")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#conn")).to_have_text("token rejected")
    expect(page.locator("#banner")).to_contain_text("rejected this token")
    # The page sets a strict Content-Security-Policy, and nothing it does violates it (see the fixture)
    response = page.request.get(f"{dashboard.stack.url}/ui")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert page.request.get(f"{dashboard.stack.url}/jobs").status == 401


def test_the_api_reference_renders_the_openapi_document_and_tries_a_request(dashboard: Dashboard) -> None:
    # Given the dashboard's API view, rendered from the public /openapi.json
    page = dashboard.open("#/api")
    expect(page.locator('[data-nav="api"]')).to_have_class("active")
    expect(page.locator("#api-summary")).to_contain_text("operations")
    spec = page.request.get(f"{dashboard.stack.url}/openapi.json").json()
    operations = {f"{method.upper()} {path}" for path, item in spec["paths"].items() for method in item}
    # Then every operation of the document is listed, POST /jobs and GET /jobs/{job_id} among them
    listed = set(page.locator("#api-ops details.op").evaluate_all("cards => cards.map(c => c.dataset.op)"))
    assert listed == operations
    assert {"POST /jobs", "GET /jobs/{job_id}", "GET /health"} <= listed

    # When POST /jobs is opened, Then its body fields are shown, the $ref'd schedule expanded below its field
    submit_op = page.locator('details.op[data-op="POST /jobs"]')
    submit_op.locator("summary").click()
    schedule = submit_op.locator('.request-body tr[data-field="schedule"]')
    expect(schedule).to_be_visible()
    expect(schedule).to_contain_text("ScheduleIn")
    expect(schedule).to_contain_text("required")
    expect(submit_op.locator('tr[data-field="schedule.cron"]')).to_contain_text("five-field cron expression")
    expect(submit_op.locator('tr[data-field="backoff.multiplier"]')).to_contain_text("≤ 10")
    expect(submit_op.locator('.responses-table tr[data-status="201"]')).to_contain_text("created")
    # And GET /jobs/{job_id} lists its path parameter with its constraints
    get_job = page.locator('details.op[data-op="GET /jobs/{job_id}"]')
    get_job.locator("summary").click()
    expect(get_job.locator('.params-table tr[data-param="job_id"]')).to_contain_text("path")
    expect(get_job.locator('.params-table tr[data-param="job_id"]')).to_contain_text("length ≤ 64")
    expect(get_job.locator('.params-table tr[data-param="preview"]')).to_contain_text("≤ 50")
    dashboard.screenshot("api-reference")

    # When "try it" sends GET /health, Then the status and the JSON answer are shown
    health = page.locator('details.op[data-op="GET /health"]')
    health.locator("summary").click()
    health.get_by_role("button", name="Send").click()
    expect(health.locator(".try-status")).to_have_attribute("data-status", "200")
    expect(health.locator(".try-status")).to_contain_text("200")
    expect(health.locator(".try-output")).to_contain_text('"status": "ok"')

    # And "try it" on a tenant's route sends the saved token: GET /jobs/{job_id} of a job of this tenant
    job = submit(dashboard.stack, {"schedule": {"every": "PT1H"}, "payload": {"from": "api reference"}})
    get_job.locator('input[name="job_id"]').fill(job["job_id"])
    get_job.locator('input[name="preview"]').fill("2")
    get_job.get_by_role("button", name="Send").click()
    expect(get_job.locator(".try-status")).to_have_attribute("data-status", "200")
    expect(get_job.locator(".try-output")).to_contain_text(job["job_id"])
    expect(get_job.locator(".try-output")).to_contain_text('"next_runs"')
    health.locator("summary").click()  # closed again, so the screenshot shows the job's answer
    dashboard.screenshot("api-try-it")
