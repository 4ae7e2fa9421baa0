"""The smoke test's jobs and what is checked of each, through the public API only.

Every job is submitted up front (due ``lead_s`` ahead), then each step follows its own job at once with the others:
the whole smoke takes about the lead plus the retries' backoff (1 s each). A step fails when its job shows no
progress (a publish, a result, a retry) for ``patience_s``; the failure says what was last seen and what that
points at (no scan published it; published, but no worker reported a result).

The job every minute starts ``lead_s`` ahead: its first fire is awaited and its second is checked to be planned a
minute later, not awaited (that would add a minute to every run of the smoke).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from infra.smoke.runner import Phase, Step, StepFailed
from jobrunner.domain.policies import MISFIRE_GRACE
from jobrunner_client.cli.client import ApiError, CannotConnect

if TYPE_CHECKING:
    from collections.abc import Callable

    from infra.smoke.runner import Clock
    from jobrunner_client.cli.client import ApiClient

NO_WORKER = ("no worker consumed topic '{topic}' (or its results were not applied): start one as docs/deploy.md "
             "says, 'Running a worker against the stack' (locally the stack runs examples/worker.py itself)")
NOT_PUBLISHED = ("nothing published {patience:g} s after its due time {due}: no scan ran it (the tick and scan "
                 "functions: docs/deploy.md, 'The smoke test')")
#: The retry policy of the jobs that fail: 1 s between attempts (0.5 to 1 s with jitter), so they end fast.
FAST_BACKOFF = {"initial_delay_s": 1, "multiplier": 1, "max_delay_s": 1}
ENDED = ("SUCCESS", "FAILED", "SKIPPED", "CANCELLED")


@dataclass(frozen=True)
class Options:
    #: How far ahead the one-time jobs and the first fire of the job every minute are due.
    lead_s: float = 10.0
    #: How long a job may show no progress before its step fails.
    patience_s: float = 30.0
    #: Most a fire may be published after its due instant (the ledger's grace: later is "caught up").
    late_s: float = MISFIRE_GRACE.total_seconds()
    poll_s: float = 0.5
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])


def instant(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def clock_time(at: datetime) -> str:
    return at.strftime("%H:%M:%S") + "Z"


def ms(delta: timedelta) -> str:
    return f"{delta.total_seconds() * 1000:.0f} ms"


def attempts(records: list[dict[str, Any]]) -> str:
    return ", ".join(f"{r['attempt']} {r['status']}" for r in records) or "none"


class Smoke:
    """One run of the smoke test against ``client``. ``jobs`` holds every job it created (by role), so that the
    clean-up cancels them whatever failed; ``ended`` the one-time jobs seen to end (they hold nothing)."""

    def __init__(self, client: ApiClient, clock: Clock, options: Options | None = None) -> None:
        self.client = client
        self.clock = clock
        self.options = options or Options()
        self.jobs: dict[str, dict[str, Any]] = {}
        self.ended: set[str] = set()
        self.due: datetime | None = None

    @property
    def tag(self) -> str:
        return f"smoke:{self.options.run_id}"

    def phases(self) -> list[Phase]:
        return [
            Phase([Step("API answers", self.api_answers)], needed=True),
            Phase([Step("submit", self.submit)], needed=True),
            Phase([Step("at: a few seconds ahead", self.one_time), Step("run now", self.run_now),
                   Step("every minute", self.every_minute), Step("PATCH", self.patch),
                   Step("retry: fails once, then succeeds", self.retried),
                   Step("dead letter", self.dead_letter)]),
            Phase([Step("pause and resume", self.pause_and_resume), Step("history and ledger", self.ledger)]),
            Phase([Step("clean up", self.clean_up)], always=True),
        ]

    # --- the steps ----------------------------------------------------------------------------------------

    def api_answers(self) -> str:
        try:
            health = self.client.call("GET", "/health").data
            self.client.list_jobs(limit=1)
        except CannotConnect as exc:
            raise StepFailed(f"cannot connect to the API: {exc}") from None
        except ApiError as exc:
            hint = (": check that these credentials may invoke the API (execute-api:Invoke), or the token"
                    if exc.status in (401, 403) else "")
            raise StepFailed(f"the API refused: {exc.message} (HTTP {exc.status}){hint}") from None
        if health != {"status": "ok"}:
            raise StepFailed(f"GET /health answered {health!r}")
        return "healthy, and the caller's jobs can be listed"

    def submit(self) -> str:
        now = self.clock.now()
        due = now.replace(microsecond=0) + timedelta(seconds=int(self.options.lead_s) + 1)
        self.due = due
        tags = {"smoke": self.options.run_id}

        def body(schedule: dict[str, Any], payload: dict[str, Any], **more: Any) -> dict[str, Any]:
            return {"schedule": schedule, "payload": {**payload, "smoke": self.options.run_id}, "tags": tags, **more}

        plan = {
            "at": body({"at": due.isoformat()}, {"type": "echo"}),
            "every": body({"every": "PT1M", "start": due.isoformat()}, {"type": "echo"}),
            "run": body({"every": "PT1H"}, {"type": "echo"}),
            "edit": body({"every": "PT1H"}, {"type": "echo"}),
            "flaky": body({"at": due.isoformat()}, {"type": "flaky", "fail_attempts": 1}, max_retries=2,
                          backoff=FAST_BACKOFF),
            "dead": body({"at": due.isoformat()}, {"type": "fail"}, max_retries=1, backoff=FAST_BACKOFF),
        }
        for role, request in plan.items():
            answer = self.client.submit(request)
            job: dict[str, Any] = answer.data
            self.jobs[role] = job
            if answer.status != 201 or job.get("status") != "SCHEDULED":
                raise StepFailed(f"the {role} job was answered {answer.status} {job.get('status')}, not 201 SCHEDULED")
        for role in ("at", "every", "flaky", "dead"):
            planned = self.jobs[role]["next_run_at"]
            if planned is None or instant(planned) != due:
                raise StepFailed(f"the {role} job's next_run_at is {planned}, not {due.isoformat()}")
        preview = self.client.job(self.jobs["every"]["job_id"], preview=2)["next_runs"] or []
        wanted = [due, due + timedelta(minutes=1)]
        if [instant(t) for t in preview] != wanted:
            raise StepFailed(f"the job every minute would fire at {preview}, not {[t.isoformat() for t in wanted]}")
        ahead = (due - self.clock.now()).total_seconds()
        return f"{len(plan)} jobs, tagged {self.tag}; due at {clock_time(due)}, {ahead:.0f} s from now"

    def one_time(self) -> str:
        due = self._due()
        job = self.jobs["at"]
        records = self._follow(job, since=due, done=lambda rs: any(r["status"] in ENDED for r in rs))
        if len(records) != 1:
            raise StepFailed(f"{len(records)} executions (attempts {attempts(records)}), not one")
        record = records[0]
        lateness = self._on_time(record, due)
        self._succeeded(record, job)
        self.ended.add(job["job_id"])
        return f"published {ms(lateness)} after its due second, then SUCCESS"

    def run_now(self) -> str:
        job = self.jobs["run"]
        queued = self.client.run(job["job_id"])
        execution_id, due = queued["execution_id"], instant(queued["due_at"])
        if queued.get("trigger") != "MANUAL":
            raise StepFailed(f"POST /run answered trigger {queued.get('trigger')}, not MANUAL")
        mine = self._follow(job, since=due, pick=lambda r: r["execution_id"] == execution_id,
                            done=lambda rs: any(r["status"] in ENDED for r in rs))
        lateness = self._on_time(mine[0], due)
        self._succeeded(mine[0], job)
        return f"queued for {clock_time(due)}, published {ms(lateness)} after it, then SUCCESS"

    def every_minute(self) -> str:
        start = self._due()
        job = self.jobs["every"]
        first = self._follow(job, since=start, pick=lambda r: instant(r["scheduled_at"]) == start,
                             done=lambda rs: any(r["published_at"] for r in rs))
        lateness = self._on_time(first[0], start)
        following = start + timedelta(minutes=1)
        now = self._until(lambda: self.client.job(job["job_id"]),
                          lambda j: j["next_run_at"] is not None and instant(j["next_run_at"]) == following,
                          lambda j: f"after its first fire its next run is {j['next_run_at']}, "
                                    f"not {following.isoformat()}")
        return (f"first fire published {ms(lateness)} late; next run {clock_time(instant(now['next_run_at']))}, a "
                f"minute later (not awaited)")

    def patch(self) -> str:
        job = self.jobs["edit"]
        changed = self.client.change(job["job_id"], {"schedule": {"every": "PT2H"},
                                                     "payload": {"type": "echo", "patched": True}})
        before = instant(job["next_run_at"])
        wrong = []
        if changed["version"] != job["version"] + 1:
            wrong.append(f"version {changed['version']}, not {job['version'] + 1}")
        if changed["schedule"].get("every") != "PT2H" or changed["payload"] != {"type": "echo", "patched": True}:
            wrong.append(f"schedule {changed['schedule']} and payload {changed['payload']}")
        if changed["next_run_at"] is None or instant(changed["next_run_at"]) <= before:
            wrong.append(f"next run {changed['next_run_at']}, not after {before.isoformat()}")
        read = self.client.job(job["job_id"])
        if read["version"] != changed["version"] or read["schedule"] != changed["schedule"]:
            wrong.append(f"read back as version {read['version']}, schedule {read['schedule']}")
        if wrong:
            raise StepFailed("PATCH every PT1H -> PT2H left " + "; ".join(wrong))
        self.jobs["edit"] = read
        return (f"every PT1H -> PT2H, version {job['version']} -> {changed['version']}, next run "
                f"{clock_time(before)} -> {clock_time(instant(changed['next_run_at']))}")

    def retried(self) -> str:
        due, job = self._due(), self.jobs["flaky"]
        records = self._follow(job, since=due, done=lambda rs: any(r["status"] == "SUCCESS" for r in rs)
                               or len([r for r in rs if r["status"] in ENDED]) >= 3)
        seen = [(r["attempt"], r["status"], r["trigger"]) for r in records]
        if seen != [(1, "FAILED", "SCHEDULE"), (2, "SUCCESS", "RETRY")]:
            raise StepFailed(f"attempts {seen}, not 1 FAILED then a RETRY 2 SUCCESS")
        gap = instant(records[1]["published_at"]) - instant(records[0]["finished_at"] or records[0]["published_at"])
        self.ended.add(job["job_id"])
        return f"attempt 1 FAILED ({records[0]['error']}), retried {gap.total_seconds():.1f} s later: SUCCESS"

    def dead_letter(self) -> str:
        due, job = self._due(), self.jobs["dead"]
        last = job["max_retries"] + 1
        records = self._follow(job, since=due, done=lambda rs: len([r for r in rs if r["status"] in ENDED]) >= last)
        seen = [(r["attempt"], r["status"]) for r in records]
        if seen != [(n, "FAILED") for n in range(1, last + 1)]:
            raise StepFailed(f"attempts {seen}, not {last} FAILED")
        final = self._until(lambda: self.client.job(job["job_id"]), lambda j: j["status"] == "FAILED",
                            lambda j: f"the job is {j['status']} after its last attempt failed, not FAILED")
        self.ended.add(job["job_id"])
        return (f"attempts {attempts(records)} ({records[-1]['error']}): the last went to job-dlq, "
                f"the job is {final['status']}")

    def pause_and_resume(self) -> str:
        job = self.jobs["edit"]
        paused = self.client.pause(job["job_id"])
        if (paused["status"], paused["next_run_at"]) != ("PAUSED", None):
            raise StepFailed(f"paused, the job is {paused['status']} with next run {paused['next_run_at']}")
        resumed = self.client.resume(job["job_id"])
        if resumed["status"] != "SCHEDULED" or resumed["next_run_at"] is None:
            raise StepFailed(f"resumed, the job is {resumed['status']} with next run {resumed['next_run_at']}")
        if instant(resumed["next_run_at"]) <= self.clock.now():
            raise StepFailed(f"resumed, its next run {resumed['next_run_at']} is not after now")
        log = [c["action"] for c in self.client.changes(job["job_id"], limit=10)["items"]]
        if log[:4] != ["resume", "pause", "patch", "submit"]:
            raise StepFailed(f"its change log reads {log}, not resume, pause, patch, submit")
        return f"PAUSED, then SCHEDULED for {clock_time(instant(resumed['next_run_at']))}; change log {', '.join(log)}"

    def ledger(self) -> str:
        due = self._due()
        wanted = {"at": ["SUCCESS"], "every": None, "flaky": ["FAILED", "SUCCESS"], "dead": ["FAILED", "FAILED"]}
        said = []
        for role, statuses in wanted.items():
            page = self.client.fires(self.jobs[role]["job_id"], (due - timedelta(minutes=1)).isoformat(),
                                     self.clock.now().isoformat(), limit=10)
            fires = [f for f in page["items"] if instant(f["at"]) == due]
            if not fires or fires[0]["outcome"] != "published" or page["unaccounted"]:
                raise StepFailed(f"the {role} job's ledger reads {[(f['at'], f['outcome']) for f in page['items']]}, "
                                 f"{page['unaccounted']} unaccounted: not its fire at {clock_time(due)} published")
            runs = [e["status"] for e in sorted(fires[0]["executions"], key=lambda e: e["attempt"])]
            if statuses is not None and runs != statuses:
                raise StepFailed(f"the {role} job's fire ran {runs} in its ledger, not {statuses}")
            said.append(f"{role} {fires[0]['outcome']} ({'/'.join(runs)})")
        return "fires " + ", ".join(said) + "; nothing unaccounted"

    def clean_up(self) -> str:
        left = {role: job for role, job in self.jobs.items() if job["job_id"] not in self.ended}
        for job in left.values():
            try:
                self.client.cancel(job["job_id"])
            except ApiError as exc:
                if exc.status != 404:  # 404: gone already
                    raise StepFailed(f"cancelling {job['job_id']}: {exc.message} (HTTP {exc.status})") from None
        kept = len(self.jobs) - len(left)
        return (f"cancelled {len(left)} jobs ({', '.join(left) or 'none'}); {kept} one-time jobs that ended hold "
                f"nothing and keep their history (tag {self.tag})")

    # --- following a job ------------------------------------------------------------------------------------

    def _due(self) -> datetime:
        if self.due is None:
            raise StepFailed("nothing was submitted")
        return self.due

    def _executions(self, job_id: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.client.executions(job_id, limit=50)["items"]
        return sorted(items, key=lambda r: (r["scheduled_at"], r["attempt"]))

    def _follow(self, job: dict[str, Any], *, since: datetime, done: Callable[[list[dict[str, Any]]], bool],
                pick: Callable[[dict[str, Any]], bool] = lambda _: True) -> list[dict[str, Any]]:
        """Poll the job's executions (those ``pick`` selects) until ``done`` holds of them; fail when they have not
        changed for ``patience_s`` (counted from ``since`` at the earliest), saying what was last seen."""
        seen: list[tuple[Any, ...]] | None = None
        moved = since
        while True:
            records = [r for r in self._executions(job["job_id"]) if pick(r)]
            if done(records):
                return records
            now = self.clock.now()
            state = [(r["execution_id"], r["status"], r["published_at"]) for r in records]
            if state != seen:
                seen, moved = state, max(now, since)
            if (now - moved).total_seconds() > self.options.patience_s:
                raise StepFailed(self._stalled(job, records, since))
            self.clock.sleep(self.options.poll_s)

    def _stalled(self, job: dict[str, Any], records: list[dict[str, Any]], since: datetime) -> str:
        patience = self.options.patience_s
        if not records:
            return NOT_PUBLISHED.format(patience=patience, due=since.isoformat())
        last = records[-1]
        if last["status"] == "RUNNING" and last["published_at"]:
            return (f"attempt {last['attempt']} was published at {clock_time(instant(last['published_at']))} but no "
                    f"result came within {patience:g} s: " + NO_WORKER.format(topic=job.get("topic", "jobs")))
        if last["status"] == "FAILED":
            return (f"attempts {attempts(records)}, and no retry was published within {patience:g} s of the last "
                    f"result (the results function plans retries)")
        return f"no progress within {patience:g} s: attempts {attempts(records)}"

    def _until(self, read: Callable[[], dict[str, Any]], done: Callable[[dict[str, Any]], bool],
               wrong: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
        deadline = self.clock.monotonic() + self.options.patience_s
        while True:
            value = read()
            if done(value):
                return value
            if self.clock.monotonic() > deadline:
                raise StepFailed(wrong(value))
            self.clock.sleep(self.options.poll_s)

    def _on_time(self, record: dict[str, Any], due: datetime) -> timedelta:
        lateness = instant(record["published_at"]) - instant(record["due_at"])
        if instant(record["scheduled_at"]) != due and record["trigger"] != "MANUAL":
            raise StepFailed(f"its execution is for {record['scheduled_at']}, not {due.isoformat()}")
        if not timedelta(0) <= lateness <= timedelta(seconds=self.options.late_s):
            raise StepFailed(f"published {ms(lateness)} after its due instant {record['due_at']} "
                             f"(at most {self.options.late_s:g} s expected)")
        return lateness

    @staticmethod
    def _succeeded(record: dict[str, Any], job: dict[str, Any]) -> None:
        if record["status"] != "SUCCESS":
            raise StepFailed(f"attempt {record['attempt']} ended {record['status']}: {record['error']} (the example "
                             f"worker succeeds on payload type {job['payload'].get('type')!r})")
