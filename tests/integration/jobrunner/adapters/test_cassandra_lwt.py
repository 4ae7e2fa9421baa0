"""The lightweight transactions of the Cassandra store keep their Paxos round in the local datacenter
(LOCAL_SERIAL, from the session's profile), on a real Cassandra. Amazon Keyspaces' profile sends none
(tests/unit/jobrunner/adapters/stores/test_keyspaces.py)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cassandra import ConsistencyLevel

from jobrunner.adapters.stores.cassandra import CassandraJobStore
from jobrunner.domain.jobs import Job
from jobrunner.domain.schedules import Every
from jobrunner.domain.spec import JobSpec
from jobrunner.ports import IdempotencyClaim

pytestmark = pytest.mark.integration

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


class RecordingSession:
    """The real session, noting the serial consistency each statement it runs is sent with (the statement's, or
    the profile's where the statement sets none)."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.serial: list[tuple[str, Any]] = []

    def execute(self, query: Any, parameters: Any = None, **kwargs: Any) -> Any:
        text = getattr(query, "query_string", None) or getattr(getattr(query, "prepared_statement", None),
                                                               "query_string", str(query))
        future = self.session.execute_async(query, parameters, **kwargs)
        self.serial.append((text, future.message.serial_consistency_level))
        return future.result()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)


def test_every_lightweight_transaction_runs_at_local_serial(cassandra_session: Any) -> None:
    session = RecordingSession(cassandra_session)
    store = CassandraJobStore(session)  # type: ignore[arg-type]
    user = f"user-{uuid.uuid4().hex[:6]}"
    job = Job(user_id=user, job_id=str(uuid.uuid4()),
              spec=JobSpec(schedule=Every(timedelta(minutes=1), start=NOW), payload={}, topic="jobs"), created_at=NOW,
              updated_at=NOW, next_run_at=NOW)
    # When a key is claimed and a job updated (both conditional writes)
    claim = IdempotencyClaim(user, "key-1", job.job_id, "fp", NOW)
    assert store.claim_idempotency_key(claim) == claim
    store.create_job(job, None)
    assert store.update_job(job.with_changes(version=2), [], expected_version=1)
    # Then both ran at LOCAL_SERIAL, and they are the only conditional statements
    conditional = [(text, level) for text, level in session.serial if " IF " in text]
    assert [text.split()[0] for text, _ in conditional] == ["INSERT", "UPDATE"]
    assert {level for _, level in conditional} == {ConsistencyLevel.LOCAL_SERIAL}
