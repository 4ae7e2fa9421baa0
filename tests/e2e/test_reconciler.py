"""The reconciler on the real local stack: rows deleted behind the system's back are re-planned, each once, under
their own execution id, within 5 minutes of their due instant (about 3 minutes of wall time)."""

from __future__ import annotations

import os
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from jobrunner.domain.jobs import Trigger, execution_id_for
from jobrunner.domain.time import minute_bucket, rfc3339
from jobrunner.services.reconcile import ReconcileRules, ReconcileService
from tests.support.stack_api import api, eventually

if TYPE_CHECKING:
    from collections.abc import Iterator

    from devstack.stack import LocalStack
    from jobrunner.domain.jobs import ExecutionRecord

pytestmark = pytest.mark.e2e

MINUTE = timedelta(minutes=1)
#: The reconciler of this test: a short grace and a run every 5 s, so that it is over in about 3 minutes (the
#: production defaults, 120 s and 60 s, through RECONCILE_E2E_GRACE_S and RECONCILE_E2E_EVERY_S: docs/benchmarks-
#: reconciler.md).
GRACE = timedelta(seconds=float(os.environ.get("RECONCILE_E2E_GRACE_S", "20")))
EVERY_S = float(os.environ.get("RECONCILE_E2E_EVERY_S", "5"))


@pytest.fixture
def reconciler(local_stack: LocalStack) -> Iterator[ReconcileService]:
    """A reconciler on the stack's own ports (its state shared with the stack's), run every 5 s in a thread."""
    container = local_stack.container
    rules = ReconcileRules(segment_count=container.start_segments(), grace=GRACE, interval=timedelta(seconds=EVERY_S),
                           budget=timedelta(seconds=EVERY_S))
    service = ReconcileService(container.store, container.leases, container.leases,  # type: ignore[arg-type]
                               container.clock, rules, changes=container.change_book, waker=container.waker)
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(EVERY_S):
            try:
                service.run()
            except Exception:  # a failed run is the next one's to make up for, as in AWS
                continue

    thread = threading.Thread(target=loop, name="test-reconciler", daemon=True)
    thread.start()
    yield service
    stop.set()
    thread.join(timeout=30)


def _submit(stack: LocalStack, body: dict[str, Any]) -> str:
    response = api(stack, "POST", "/jobs", body)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["job_id"]
    return job_id


def _rows(session: Any, bucket: datetime, segment: int) -> list[Any]:
    return list(session.execute("SELECT * FROM task_schedule_v2 WHERE next_execution_time = %s AND segment = %s",
                                (bucket, segment)))


def _delete(session: Any, row: Any) -> None:
    """A straight CQL delete, behind the system's back."""
    session.execute(
        "DELETE FROM task_schedule_v2 WHERE next_execution_time = %s AND segment = %s AND lane = %s AND due_at = %s"
        " AND job_id = %s AND execution_id = %s AND job_version = %s",
        (row.next_execution_time, row.segment, row.lane, row.due_at, row.job_id, row.execution_id, row.job_version))


def test_rows_deleted_behind_the_systems_back_are_repaired_once_within_five_minutes(
    local_stack: LocalStack, reconciler: ReconcileService, cassandra_session: Any,
) -> None:
    container = local_stack.container
    segments = container.settings.segments
    # Given a minute M at least 15 s ahead (the leases below must be taken before the scans of M + 1 start, up to
    # 59 s early), three jobs firing every minute from M + 5 s, and a one-time job at M + 5 s whose first attempt
    # fails (the example worker's "flaky") and is retried 55 to 110 s later: in minute M + 1, like the others' next
    # fires, so that every lost execution is repaired once that one partition is done (about M + 2:07)
    now = datetime.now(UTC)
    start = minute_bucket(now) + (2 if now.second > 45 else 1) * MINUTE
    fire = start + timedelta(seconds=5)
    every = [_submit(local_stack, {"schedule": {"every": "PT1M", "start": rfc3339(fire)}, "payload": {"type": "echo"}})
             for _ in range(3)]
    retried = _submit(local_stack, {"schedule": {"at": rfc3339(fire)}, "payload": {"type": "flaky", "fail_attempts": 1},
                                    "max_retries": 1, "backoff": {"initial_delay_s": 110, "multiplier": 1,
                                                                  "max_delay_s": 110}})
    # and no scan may take the next two minutes' partitions until we say so: we hold their leases (so the rows
    # written there wait, unread, for us to delete them)
    owner = f"test-{uuid.uuid4()}"
    held = [(segment, start + k * MINUTE) for segment in range(segments) for k in (1, 2)]
    for segment, bucket in held:
        assert container.leases.acquire(segment, bucket, owner, datetime.now(UTC), 240)
    lost: dict[str, tuple[str, datetime]] = {}  # execution id -> (job id, due)
    try:
        # When the first fires have run, their next fires' rows and the retry's row are deleted as they appear
        wanted = {execution_id_for(job, fire + MINUTE, 1, Trigger.SCHEDULE): job for job in every}
        wanted[execution_id_for(retried, fire, 2, Trigger.RETRY)] = retried

        def sweep() -> int:
            for segment, bucket in held:
                for row in _rows(cassandra_session, bucket, segment):
                    if row.execution_id in wanted and row.execution_id not in lost:
                        _delete(cassandra_session, row)
                        lost[row.execution_id] = (row.job_id, row.due_at.replace(tzinfo=UTC))
            return len(lost)

        assert eventually(sweep, len(wanted), timeout_s=(fire - datetime.now(UTC)).total_seconds() + 60) == 4
    finally:
        for segment, bucket in held:
            container.leases.release(segment, bucket, owner, datetime.now(UTC))

    # Then each lost execution is published once, under its own id, within 5 minutes of its due instant
    def record(execution_id: str) -> ExecutionRecord | None:
        job, _ = lost[execution_id]
        return next((r for r in container.store.latest_records([job], 10)[job] if r.execution_id == execution_id), None)

    def published() -> dict[str, datetime]:
        found = {e: record(e) for e in lost}
        return {e: r.published_at for e, r in found.items() if r is not None and r.published_at is not None}

    repaired = eventually(published, lambda p: len(p) == len(lost), timeout_s=330)
    assert set(repaired) == set(lost)
    late = {e: (repaired[e] - due).total_seconds() for e, (_, due) in lost.items()}
    print(f"repaired, seconds after the due instant: {sorted(round(s, 1) for s in late.values())}")
    assert all(seconds <= 300 for seconds in late.values()), late
    # And each was repaired exactly once: one change-log entry per lost execution, naming it and why
    changes = container.changes
    assert changes is not None
    entries = [c for job in {j for j, _ in lost.values()} for c in changes.changes(job, 50) if c.action == "repair"]
    assert sorted(c.details["execution_id"] for c in entries) == sorted(lost)
    assert {c.details["reason"] for c in entries} == {"missed_fire", "missed_retry"}
    # And the firing ledger of a job shows its lost fire repaired, then published
    job = every[0]
    fires = api(local_stack, "GET", f"/jobs/{job}/fires?from={rfc3339(fire)}&to={rfc3339(fire + MINUTE)}").json()
    assert [f["outcome"] for f in fires["items"]] == ["published", "repaired"]
    # And the jobs fire on after it
    eventually(lambda: record_of_fire(container, every[0], fire + 2 * MINUTE), lambda r: r is not None, timeout_s=90)
    for job in [*every, retried]:
        api(local_stack, "DELETE", f"/jobs/{job}")


def record_of_fire(container: Any, job: str, at: datetime) -> Any:
    execution_id = execution_id_for(job, at, 1, Trigger.SCHEDULE)
    return next((r for r in container.store.latest_records([job], 10)[job] if r.execution_id == execution_id), None)
