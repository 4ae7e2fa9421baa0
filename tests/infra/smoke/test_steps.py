"""The smoke test's steps against a fake API on a manual clock: what passes, and what each failure says."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.smoke.runner import run_phases
from infra.smoke.steps import Options, Smoke
from jobrunner_client.cli.client import ApiClient, BearerAuth
from tests.infra.smoke.fakes import URL

if TYPE_CHECKING:
    from infra.smoke.runner import ManualClock, StepResult
    from tests.infra.smoke.fakes import FakeApi


def smoke(api: FakeApi, clock: ManualClock) -> tuple[Smoke, dict[str, StepResult]]:
    run = Smoke(ApiClient(URL, BearerAuth("t0ken"), api), clock, Options(lead_s=5, patience_s=30, run_id="r1"))
    results = run_phases(run.phases(), clock, lambda _: None, concurrent=False)
    return run, {r.name: r for r in results}


def test_every_step_passes_against_a_system_that_works(api: FakeApi, clock: ManualClock) -> None:
    run, results = smoke(api, clock)
    assert {name: r.ok for name, r in results.items() if not r.ok} == {}
    assert results["at: a few seconds ahead"].detail == "published 10 ms after its due second, then SUCCESS"
    assert results["retry: fails once, then succeeds"].detail.startswith("attempt 1 FAILED (RuntimeError: it failed)")
    assert "a minute later (not awaited)" in results["every minute"].detail
    # The jobs are tagged with the run, the failing ones with a short backoff and few retries
    submitted = [body for method, path, body in api.sent if (method, path) == ("POST", "/jobs")]
    assert {body["tags"]["smoke"] for body in submitted} == {"r1"}
    assert [(b["payload"]["type"], b["max_retries"], b["backoff"]["initial_delay_s"])
            for b in submitted if "backoff" in b] == [("flaky", 2, 1), ("fail", 1, 1)]
    # And the clean-up cancels the recurring jobs, not the one-time jobs that ended
    cancelled = {path.split("/")[2] for method, path, _ in api.sent if method == "DELETE"}
    assert cancelled == {run.jobs[role]["job_id"] for role in ("every", "run", "edit")}


def test_without_a_worker_the_steps_that_need_one_say_so_and_name_the_topic(api: FakeApi, clock: ManualClock) -> None:
    api.worker = False
    run, results = smoke(api, clock)
    failed = {name for name, r in results.items() if not r.ok}
    assert failed == {"at: a few seconds ahead", "run now", "retry: fails once, then succeeds", "dead letter",
                      "history and ledger"}
    for name in failed - {"history and ledger"}:
        assert "but no result came within 30 s: no worker consumed topic 'jobs'" in results[name].detail
        assert "docs/deploy.md says, 'Running a worker against the stack'" in results[name].detail
    # The every-minute job needs no worker: its fire is published and its next run planned
    assert results["every minute"].ok and results["clean up"].ok
    # And every job left unfinished is cancelled
    assert {path.split("/")[2] for method, path, _ in api.sent if method == "DELETE"} == {
        job["job_id"] for job in run.jobs.values()}


def test_nothing_published_points_at_the_scans(api: FakeApi, clock: ManualClock) -> None:
    api.publishes = False
    _, results = smoke(api, clock)
    detail = results["at: a few seconds ahead"].detail
    assert detail.startswith("nothing published 30 s after its due time") and "no scan ran it" in detail
    assert not results["every minute"].ok


def test_a_ledger_that_cannot_account_for_a_fire_fails_its_step(api: FakeApi, clock: ManualClock) -> None:
    api.unaccounted = 1
    _, results = smoke(api, clock)
    assert [name for name, r in results.items() if not r.ok] == ["history and ledger"]
    assert "1 unaccounted" in results["history and ledger"].detail


def test_an_api_that_cannot_be_reached_stops_the_smoke_before_submitting(api: FakeApi, clock: ManualClock) -> None:
    api.down = True
    _, results = smoke(api, clock)
    assert results["API answers"].detail.startswith("cannot connect to the API")
    assert {r.detail for name, r in results.items() if name not in ("API answers", "clean up")} == {
        "not run: API answers failed"}
    assert results["clean up"].ok and results["clean up"].detail.startswith("cancelled 0 jobs")
