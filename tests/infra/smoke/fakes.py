"""A fake of the API for the smoke test's unit tests: a transport that answers as the deployed system would, from
what was submitted and the manual clock's time (published 10 ms after the due instant, a result half a second
later, a retry a second after a failure), with a worker or without one."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from jobrunner_client.cli.client import CannotConnect, HttpRequest, HttpResponse

if TYPE_CHECKING:
    from infra.smoke.runner import ManualClock

START = datetime(2026, 11, 22, 10, 0, 0, 250_000, tzinfo=UTC)
URL = "https://abc123.execute-api.eu-west-1.amazonaws.com/dev/"

PUBLISH_AFTER = timedelta(milliseconds=10)
RESULT_AFTER = timedelta(milliseconds=500)
RETRY_AFTER = timedelta(seconds=1)


def ts(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def answer(status: int, body: Any) -> HttpResponse:
    return HttpResponse(status, json.dumps(body).encode())


@dataclass
class Lineage:
    """The executions of one fire or one run now: due at ``due``, attempts as the payload's type says."""

    job: dict[str, Any]
    due: datetime
    trigger: str
    execution_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def records(self, now: datetime, *, worker: bool, publishes: bool) -> list[dict[str, Any]]:
        payload, found, published = self.job["payload"], [], self.due + PUBLISH_AFTER
        for attempt in range(1, self.job["max_retries"] + 2):
            if not publishes or now < published:
                break
            finished = published + RESULT_AFTER if worker else None
            failed = payload.get("type") == "fail" or (
                payload.get("type") == "flaky" and attempt <= payload.get("fail_attempts", 1))
            done = finished is not None and now >= finished
            status = ("FAILED" if failed else "SUCCESS") if done else "RUNNING"
            found.append({
                "execution_id": f"{self.execution_id}-{attempt}", "scheduled_at": ts(self.due), "attempt": attempt,
                "status": status, "trigger": self.trigger if attempt == 1 else "RETRY",
                "due_at": ts(self.due if attempt == 1 else published), "published_at": ts(published),
                "finished_at": ts(finished) if done and finished else None,
                "error": "RuntimeError: it failed" if done and failed else None,
            })
            if status != "FAILED" or finished is None:
                break
            published = finished + RETRY_AFTER
        return found


@dataclass
class FakeApi:
    clock: ManualClock
    #: A worker consumes the executions and reports them.
    worker: bool = True
    #: The scans publish what is due.
    publishes: bool = True
    #: The ledger cannot account for some fire.
    unaccounted: int = 0
    down: bool = False
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    lineages: dict[str, list[Lineage]] = field(default_factory=dict)
    changes: dict[str, list[str]] = field(default_factory=dict)
    sent: list[tuple[str, str, Any]] = field(default_factory=list)

    def send(self, request: HttpRequest) -> HttpResponse:
        if self.down:
            raise CannotConnect("[Errno 111] Connection refused")
        url = urlsplit(request.url)
        path = url.path.removeprefix("/dev")
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = json.loads(request.body) if request.body else None
        self.sent.append((request.method, path, body))
        if path == "/health":
            return answer(200, {"status": "ok"})
        if (request.method, path) == ("GET", "/jobs"):
            return answer(200, {"items": list(self.jobs.values())[:1], "next_cursor": None})
        if (request.method, path) == ("POST", "/jobs"):
            return answer(201, self._submit(body))
        match = re.fullmatch(r"/jobs/([^/]+)(/[a-z]+)?", path)
        if match is None or match.group(1) not in self.jobs:
            return answer(404, {"error": "not_found", "message": f"no job at {path}"})
        return self._job_route(request.method, match.group(1), match.group(2) or "", query, body)

    def _job_route(self, method: str, job_id: str, tail: str, query: dict[str, str], body: Any) -> HttpResponse:
        job, now = self.jobs[job_id], self.clock.now()
        if (method, tail) == ("GET", ""):
            shown = self._shown(job)
            if int(query.get("preview", 0)):
                first = datetime.fromisoformat(job["schedule"]["start"])
                shown["next_runs"] = [ts(first + timedelta(minutes=n)) for n in range(int(query["preview"]))]
            return answer(200, shown)
        if (method, tail) == ("PATCH", ""):
            return answer(200, self._change(job, "patch", schedule=body["schedule"], payload=body["payload"],
                                            next_run_at=ts(now + timedelta(hours=2))))
        if (method, tail) == ("DELETE", ""):
            return answer(200, self._change(job, "cancel", state="CANCELLED", status="CANCELLED", next_run_at=None))
        if (method, tail) == ("POST", "/pause"):
            return answer(200, self._change(job, "pause", state="PAUSED", status="PAUSED", next_run_at=None))
        if (method, tail) == ("POST", "/resume"):
            return answer(200, self._change(job, "resume", state="ACTIVE", status="SCHEDULED",
                                            next_run_at=ts(now + timedelta(hours=2))))
        if (method, tail) == ("POST", "/run"):
            run = Lineage(job, now + timedelta(seconds=2), "MANUAL")
            self.lineages[job_id].append(run)
            return answer(202, {"execution_id": f"{run.execution_id}-1", "job_id": job_id, "due_at": ts(run.due),
                                "trigger": "MANUAL"})
        if (method, tail) == ("GET", "/executions"):
            return answer(200, {"items": self._records(job_id), "next_cursor": None})
        if (method, tail) == ("GET", "/changes"):
            return answer(200, {"items": [{"action": a} for a in reversed(self.changes[job_id])], "next_cursor": None})
        if (method, tail) == ("GET", "/fires"):
            return answer(200, self._fires(job_id))
        return answer(405, {"error": "method_not_allowed", "message": f"{method} {tail}"})

    def _submit(self, body: dict[str, Any]) -> dict[str, Any]:
        job_id, now = str(uuid.uuid4()), self.clock.now()
        schedule = body["schedule"]
        first = schedule.get("at") or schedule.get("start")
        job = {"job_id": job_id, "state": "ACTIVE", "status": "SCHEDULED", "schedule": schedule,
               "payload": body.get("payload"), "topic": "jobs", "max_retries": body.get("max_retries", 0),
               "version": 1, "tags": body.get("tags", {}), "created_at": ts(now),
               "next_run_at": ts(datetime.fromisoformat(first)) if first else ts(now + timedelta(hours=1))}
        self.jobs[job_id], self.changes[job_id] = job, ["submit"]
        self.lineages[job_id] = [Lineage(job, datetime.fromisoformat(first), "SCHEDULE")] if first else []
        return job

    def _change(self, job: dict[str, Any], action: str, **fields: Any) -> dict[str, Any]:
        job.update(fields, version=job["version"] + 1)
        self.changes[job["job_id"]].append(action)
        return self._shown(job)

    def _records(self, job_id: str) -> list[dict[str, Any]]:
        now = self.clock.now()
        return [r for lineage in self.lineages[job_id]
                for r in lineage.records(now, worker=self.worker, publishes=self.publishes)]

    def _shown(self, job: dict[str, Any]) -> dict[str, Any]:
        """The job as read: its status from its newest execution, the every job's next run once its fire is out."""
        shown = dict(job)
        records = self._records(job["job_id"])
        if job["state"] == "ACTIVE" and records:
            shown["status"] = records[-1]["status"]
            if "every" in job["schedule"] and "start" in job["schedule"]:
                shown["next_run_at"] = ts(datetime.fromisoformat(job["schedule"]["start"]) + timedelta(minutes=1))
        return shown

    def _fires(self, job_id: str) -> dict[str, Any]:
        records = [r for r in self._records(job_id) if r["trigger"] in ("SCHEDULE", "RETRY")]
        items = [{"at": lineage.due.isoformat(), "due_at": ts(lineage.due),
                  "outcome": "published" if records else "due",
                  "executions": [{"attempt": r["attempt"], "status": r["status"]} for r in records]}
                 for lineage in self.lineages[job_id] if lineage.trigger == "SCHEDULE"]
        return {"items": items, "next_cursor": None, "summary": {}, "unaccounted": self.unaccounted, "notes": []}
