"""The crash suite's load: jobs submitted over HTTP, and the executions each acknowledged job is expected to
make (``chaos.suite``)."""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import requests

from jobrunner.domain.schedules import parse_instant
from jobrunner.domain.time import rfc3339

if TYPE_CHECKING:
    import threading

    from chaos.suite_report import Report


class Load:
    """Submits jobs to the API at ``url`` and keeps, in ``expected``, every fire of each job it acknowledged."""

    def __init__(self, url: str, token: str, report: Report, lock: threading.Lock) -> None:
        self.url, self.token, self.report, self.lock = url, token, report, lock
        self.expected: dict[tuple[str, datetime], None] = {}

    def submit(self, body: dict[str, Any], attempts: int = 1) -> requests.Response | None:
        """POST a job; with several attempts, retry timeouts (safe: the body carries an idempotency key)."""
        for _ in range(attempts):
            try:
                return requests.post(f"{self.url}/jobs", json=body, timeout=30,
                                     headers={"Authorization": f"Bearer {self.token}"})
            except requests.RequestException:
                time.sleep(1)
        return None

    @staticmethod
    def _first_fire(body: dict[str, Any], job: dict[str, Any], status: int) -> datetime:
        """The job's first fire: its next run when just created (201); for a submission sent again (200, after
        an answer lost on a slow machine) the job may have fired already (``next_run_at`` null or moved on), so
        from its schedule: the ``at``, or the first 30-s step from ``start`` at or after its creation."""
        schedule = body["schedule"]
        if status == 201 and job.get("next_run_at") is not None:
            return parse_instant(job["next_run_at"], "next_run_at")
        if "at" in schedule:
            return parse_instant(schedule["at"], "at")
        first, created = parse_instant(schedule["start"], "start"), parse_instant(job["created_at"], "created_at")
        while first < created:
            first += timedelta(seconds=30)
        return first

    def accept(self, body: dict[str, Any], response: requests.Response | None) -> None:
        if response is None:
            return
        if response.status_code == 503:
            with self.lock:
                self.report.rejected_503 += 1
            return
        if response.status_code == 422:
            # On a slow machine a job can arrive after its time (more than 5 minutes, or after a
            # recurring job's whole window): the API refuses it, so it is rightly not expected.
            with self.lock:
                self.report.refused_late += 1
            return
        if response.status_code not in (200, 201):  # 200: a retried submission, the same job
            raise AssertionError(f"unexpected answer {response.status_code}: {response.text}")
        job = response.json()
        fires = [self._first_fire(body, job, response.status_code)]
        if "every" in body["schedule"]:  # every 30 s from the first fire after submission, through end
            end = parse_instant(body["schedule"]["end"], "end")
            while fires[-1] + timedelta(seconds=30) <= end:
                fires.append(fires[-1] + timedelta(seconds=30))
        with self.lock:
            self.report.submitted += 1
            for fire in fires:
                self.expected[(job["job_id"], fire)] = None

    def submit_all(self, first: datetime, executions: int, spread_minutes: int) -> None:
        """Submit the jobs of ``job_bodies``, eight at a time, in their order."""
        bodies = job_bodies(first, executions, spread_minutes)
        with ThreadPoolExecutor(max_workers=8) as pool:
            for body, response in zip(bodies, pool.map(lambda b: self.submit(b, attempts=5), bodies), strict=True):
                self.accept(body, response)

    def missing(self, published: set[tuple[str, datetime]]) -> set[tuple[str, datetime]]:
        with self.lock:
            return set(self.expected) - published


def job_bodies(first: datetime, executions: int, spread_minutes: int) -> list[dict[str, Any]]:
    """``executions`` one-time jobs due over ``spread_minutes`` from ``first``, and a recurring job (three fires)
    for every 30 of them, in the order of their first fire: a minute's late lane opens 90 s before it
    (``domain.placement.OPEN_AHEAD``), so the jobs due soonest go in first."""
    rng = random.Random(7)
    span = spread_minutes * 60
    jobs: list[tuple[datetime, dict[str, Any]]] = []
    for i in range(executions):
        due = first + timedelta(seconds=rng.uniform(0, span))
        jobs.append((due, {"schedule": {"at": rfc3339(due)}, "payload": {"n": i}, "idempotency_key": f"at-{i}"}))
    for i in range(executions // 30):  # recurring: three fires each
        start = first + timedelta(seconds=rng.uniform(0, span - 60))
        jobs.append((start, {"schedule": {"every": "PT30S", "start": rfc3339(start),
                                          "end": rfc3339(start + timedelta(seconds=60))}, "payload": {"r": i},
                             "idempotency_key": f"every-{i}"}))
    return [body for _, body in sorted(jobs, key=lambda job: job[0])]
