"""Each function's code paths, run under exactly its role's policies from the synthesized template (moto, IAM
enforced): its DynamoDB heartbeats and quota counters, its wakes of the scan, its read of the result key.

Cassandra and Kafka are the memory adapters (moto emulates neither; ``test_declared_needs`` covers their
grants). The functions share them, as they share the keyspace and the cluster in AWS, and each works through
its own container built from its own environment in the template, so a variable that names a table other than
the one its role may use fails here too.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.leases.dynamodb import DynamoDBLeaseStore
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.quotas.dynamodb import DynamoDBTenantQuotas
from jobrunner.adapters.stores.calendars import MemoryCalendarStore
from jobrunner.adapters.stores.changes import MemoryChangeLog
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.domain.errors import Unavailable
from jobrunner.domain.jobs import JobState
from jobrunner.domain.limits import Limits, QuotaChange
from jobrunner.domain.receipts import result_token
from jobrunner.domain.schedules import At, Every
from jobrunner.domain.segments import segment_of
from jobrunner.domain.spec import JobSpec
from jobrunner.ports import ScanRequest
from jobrunner.services.results import WorkerReport

if TYPE_CHECKING:
    from collections.abc import Callable

    from jobrunner.domain.jobs import Job
    from jobrunner.ports import OutboundMessage
    from jobrunner.wiring import Container
    from tests.infra.rehearsal.stage import Stage

T = TypeVar("T")
TENANT = "alice"
NOW = datetime(2026, 11, 22, 10, 0, 10, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def at(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 11, 22, 10, minute, second, tzinfo=UTC)


class World:
    """The five functions over one memory keyspace and cluster, each with its own container and role."""

    def __init__(self, stage: Stage) -> None:
        self.stage = stage
        self.store, self.publisher, self.clock = MemoryJobStore(), MemoryPublisher(), ManualClock(NOW)
        self.changes, self.calendars = MemoryChangeLog(), MemoryCalendarStore()
        self._containers: dict[str, Container] = {}
        self.segments = stage.settings("Api").segments

    def run(self, unit: str, call: Callable[[Container], T]) -> T:
        """``call`` on the function's container, as the function (its credentials, its policies enforced)."""
        if unit not in self._containers:
            self._containers[unit] = self.stage.container(unit, store=self.store, publisher=self.publisher,
                                                          clock=self.clock, changes=self.changes,
                                                          calendars=self.calendars)
        with self.stage.acting_as(unit):
            return call(self._containers[unit])

    def submit(self, new: JobSpec) -> Job:
        return self.run("Api", lambda c: c.jobs.submit(TENANT, new)[0])

    def scan(self, job: Job, minute: int) -> list[OutboundMessage]:
        """The scan of ``job``'s partition of ``minute``, started half a minute ahead, as the tick starts it."""
        self.clock.set(max(self.clock.now(), at(minute) - timedelta(seconds=30)))
        before = len(self.publisher.sent)
        request = ScanRequest(segment=segment_of(job.job_id, self.segments), bucket=at(minute))
        self.run("Scan", lambda c: c.scans.scan(request))
        return [m for m in self.publisher.sent[before:] if m.topic == "jobs"]

    def answer(self, message: OutboundMessage) -> str:
        """A worker's success, with the token the scan signed, applied by the results function."""
        value = message.value
        report = WorkerReport(execution_id=value["execution_id"], job_id=value["job_id"], success=True,
                              scheduled_at=datetime.fromisoformat(value["scheduled_at"].replace("Z", "+00:00")),
                              attempt=value["attempt"], result_token=value["result_token"])
        return self.run("Results", lambda c: c.results.apply(report))

    def jobs_held(self) -> int:
        """The tenant's standing count of recurring jobs, as the quota table holds it."""
        item = self.stage.item("Quotas", {"tenant": {"S": TENANT}, "window": {"N": "0"}})
        return int(item["jobs"]["N"])

    def deleted(self, job: Job) -> bool:
        stored = self.store.jobs.get((TENANT, job.job_id))
        return stored is not None and stored.state is JobState.DELETED


@pytest.fixture
def world(stage: Stage) -> World:
    return World(stage)


def every_minute(count: int, **options: Any) -> JobSpec:
    return JobSpec(Every(MINUTE, start=at(1), count=count), {}, delete_after_last=True, **options)


def test_the_api_counts_wakes_and_gives_back_under_its_role(world: World, stage: Stage) -> None:
    # Given the api's role: a recurring job submitted with an idempotency key, and the same request repeated (the
    # create is counted under its job id, in one transaction with its marker, and the repeat counts it once)
    job, created = world.run("Api", lambda c: c.jobs.submit(TENANT, every_minute(count=5), "key-1"))
    again, created_again = world.run("Api", lambda c: c.jobs.submit(TENANT, every_minute(count=5), "key-1"))
    assert (created, created_again, again.job_id) == (True, False, job.job_id)
    assert world.jobs_held() == 1
    marker = stage.item("Quotas", {"tenant": {"S": f"{TENANT}/created/{job.job_id}"}, "window": {"N": "0"}})
    assert marker["counted"] == {"N": "1"}
    # When the tenant runs it now (a late row: the scan of its partition is woken), reads the segments' health
    # and cancels the job
    world.run("Api", lambda c: c.jobs.run_now(TENANT, job.job_id))
    health = world.run("Api", lambda c: c.segments.health())
    world.run("Api", lambda c: c.jobs.cancel(TENANT, job.job_id))
    # Then every call was granted, the count is given back, and each grant was exercised
    assert stage.denied() == []
    assert world.jobs_held() == 0
    assert len(health) == world.segments
    quotas, heartbeats = stage.arn("QuotasTable"), stage.arn("HeartbeatsTable")
    assert {("dynamodb:GetItem", quotas), ("dynamodb:UpdateItem", quotas), ("dynamodb:BatchGetItem", heartbeats),
            ("dynamodb:GetItem", heartbeats), ("dynamodb:UpdateItem", heartbeats),
            ("lambda:InvokeFunction", stage.arn("ScanHandlerFunction"))} <= stage.allowed("Api")


def test_the_tick_dispatches_every_segments_scan_under_its_role(world: World, stage: Stage) -> None:
    report = world.run("Tick", lambda c: c.ticks.tick(at(1), at(0, 20)))

    assert stage.denied() == []
    # every segment, for each minute of its initial lookback up to the next minute (none has a watermark yet)
    assert {r.segment for r in report.dispatched} == set(range(world.segments)) and not report.unavailable
    heartbeats = stage.arn("HeartbeatsTable")
    assert {("dynamodb:BatchGetItem", heartbeats), ("dynamodb:UpdateItem", heartbeats),
            ("lambda:InvokeFunction", stage.arn("ScanHandlerFunction"))} <= stage.allowed("Tick")


def test_the_scan_leases_publishes_and_signs_with_the_result_key_under_its_role(world: World, stage: Stage) -> None:
    job = world.submit(JobSpec(At(at(2, 5)), {"n": 1}))
    [message] = world.scan(job, 2)

    assert stage.denied() == []
    # signed with the key it read from the secret (the secret's value is the rehearsal's)
    key = stage.secret_value("ResultKeySecret").encode()
    assert message.value["result_token"] == result_token(key, tenant=message.value["user_id"],
                                                         execution_id=message.value["execution_id"],
                                                         attempt=message.value["attempt"])
    partition = stage.item("Heartbeats", {"segment": {"N": str(segment_of(job.job_id, world.segments))},
                                          "minute": {"N": str(int(at(2).timestamp() * 1000))}})
    assert partition["owner"]["S"].startswith("scan:") and "lease_expires" in partition  # its lease, taken
    assert ("secretsmanager:GetSecretValue", stage.arn("ResultKeySecret")) in stage.allowed("Scan")


def test_the_results_function_gives_a_deleted_jobs_count_back_under_its_role(world: World, stage: Stage) -> None:
    # Given a job of one fire that asked to be deleted after it, counted against its tenant, and its fire published
    job = world.submit(every_minute(count=1))
    assert world.jobs_held() == 1
    [message] = world.scan(job, 1)
    # When its worker reports (the results function: the job is done, and deleted)
    assert world.answer(message) == "succeeded"
    # Then the count it held is given back (finding 2: the results role could not touch the quota table, and the
    # denial was logged as "unavailable", so the tenant's jobs held only ever grew)
    assert world.deleted(job)
    assert stage.denied() == []
    assert world.jobs_held() == 0
    assert ("dynamodb:UpdateItem", stage.arn("QuotasTable")) in stage.allowed("Results")


def test_a_scan_that_skips_a_jobs_last_fire_gives_its_count_back_under_its_role(world: World, stage: Stage) -> None:
    # Given a job of two fires whose second falls in a calendar's excluded minute, its first fire answered
    world.run("Api", lambda c: c.calendar_admin.put(
        TENANT, "off", {"exclude": [{"from": "2026-11-22T10:02", "to": "2026-11-22T10:03"}]}))
    job = world.submit(every_minute(count=2, calendar="off"))
    [first] = world.scan(job, 1)
    assert world.answer(first) == "succeeded" and not world.deleted(job)
    # When the scan of the second fire's minute skips it (nothing left: the scan deletes the job)
    assert world.scan(job, 2) == []
    # Then the scan's role gave the count back
    assert world.deleted(job)
    assert stage.denied() == []
    assert world.jobs_held() == 0
    assert ("dynamodb:UpdateItem", stage.arn("QuotasTable")) in stage.allowed("Scan")


def test_the_reconciler_keeps_its_progress_and_lease_under_its_role(world: World, stage: Stage) -> None:
    world.submit(JobSpec(Every(MINUTE, start=at(1)), {}))
    world.clock.set(at(5))

    report = world.run("Reconcile", lambda c: c.reconciler.run(at(5, 30)))

    assert stage.denied() == []
    assert not report.errors
    state = stage.item("Heartbeats", {"segment": {"N": "-2"}, "minute": {"N": "0"}})
    assert "reconciler_state" in state  # its progress, saved under its own key only
    assert ("dynamodb:UpdateItem", stage.arn("HeartbeatsTable")) in stage.allowed("Reconcile")


def test_a_call_the_role_is_not_granted_is_denied(world: World, stage: Stage) -> None:
    """The rehearsal's own check: enforcement is on, and resources and conditions count, not only actions."""
    quotas, heartbeats = stage.table("QuotasTable"), stage.table("HeartbeatsTable")
    # The tick may not touch the quota table at all
    with stage.acting_as("Tick"), pytest.raises(Unavailable):
        DynamoDBTenantQuotas(quotas, _client()).take(TENANT, QuotaChange(jobs=1), Limits(), 0)
    # The api may update the heartbeat table, but only its watermarks and segment count, not a lease
    with stage.acting_as("Api"):
        store = DynamoDBLeaseStore(heartbeats, _client())
        store.advance_watermark(3, at(1))
        with pytest.raises(Unavailable):
            store.acquire(3, at(1), "api", at(0, 30), 60)

    assert stage.denied() == [f"Tick: DENIED dynamodb:GetItem on {stage.arn('QuotasTable')}",
                              f"Api: DENIED dynamodb:UpdateItem on {stage.arn('HeartbeatsTable')}"]
    assert world.run("Api", lambda c: c.leases.segments([3]))[0].watermark == at(1)


def _client() -> Any:
    import boto3

    return boto3.client("dynamodb", region_name="us-east-1")
