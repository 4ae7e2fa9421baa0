"""JobService: validation, the job stored with its first run, idempotent submission, lists and management.

Management stories end with a scan of the partition concerned (memory adapters, manual clock), since
what a change means is what the scan then publishes or drops.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.quotas.memory import MemoryTenantQuotas
from jobrunner.adapters.stores.changes import MemoryChangeLog
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.domain.errors import (
    Conflict,
    Forbidden,
    InvalidField,
    InvalidFields,
    JobNotFound,
    LimitReached,
    Unavailable,
)
from jobrunner.domain.jobs import Job, JobState, JobStatus, Lane, Trigger, due_of, execution_id_for
from jobrunner.domain.limits import minute_of
from jobrunner.domain.placement import LATE_LEAD, LATE_WRITE_WITHIN
from jobrunner.domain.schedules import At, Cron, Every
from jobrunner.domain.segments import segment_of
from jobrunner.domain.spec import JobSpec, RetryChange, RetryPolicy, SpecChange
from jobrunner.domain.targets import HttpsTarget, LambdaTarget
from jobrunner.domain.time import minute_bucket
from jobrunner.domain.topics import TopicGrants
from jobrunner.ports import IdempotencyClaim, Invoker, ScanRequest
from jobrunner.services.jobs import MAX_PAGES_PER_LIST, JobRules, JobService
from jobrunner.services.results import WorkerReport
from tests.support.memory import memory_container

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from jobrunner.domain.changes import JobChange
    from jobrunner.domain.jobs import ScheduledExecution
    from jobrunner.ports import OutboundMessage
    from jobrunner.services.scan import ScanReport

NOW = datetime(2026, 11, 22, 10, 0, 10, tzinfo=UTC)
RULES = JobRules(segment_count=16, topics=TopicGrants("jobs", frozenset({"jobs", "reports"})), max_payload_bytes=100)
#: ``RULES`` as a deployment sets them, for the wiring to build the service from.
SETTINGS = {"JOBRUNNER_SEGMENTS": "16", "JOBRUNNER_ALLOWED_TOPICS": "jobs,reports",
            "JOBRUNNER_MAX_PAYLOAD_BYTES": "100"}


@pytest.fixture
def store() -> MemoryJobStore:
    return MemoryJobStore()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def service(store: MemoryJobStore, clock: ManualClock) -> JobService:
    return memory_container(SETTINGS, clock=clock, store=store).jobs


def test_submit_stores_the_job_and_its_first_run(store: MemoryJobStore, service: JobService) -> None:
    # Given a one-time job due well after the tick that dispatches its minute
    due = datetime(2026, 11, 22, 10, 5, 30, tzinfo=UTC)
    # When it is submitted
    job = service.submit("alice", JobSpec(At(due), {"n": 1}))[0]
    # Then the job and exactly one row for its first run are stored, in its own bucket's planned lane
    assert store.jobs == {("alice", job.job_id): job}
    [row] = store.rows.values()
    assert (row.bucket, row.segment, row.lane) == (
        datetime(2026, 11, 22, 10, 5, tzinfo=UTC), segment_of(job.job_id, 16), Lane.PLANNED
    )
    assert (row.due_at, row.scheduled_at, row.attempt, row.trigger) == (due, due, 1, Trigger.SCHEDULE)
    assert row.execution_id == execution_id_for(job.job_id, due, 1, Trigger.SCHEDULE)
    assert (row.user_id, row.job_id, row.job_version) == ("alice", job.job_id, job.version)
    assert (job.spec.topic, job.next_run_at, job.status) == ("jobs", due, JobStatus.SCHEDULED)


def test_imminent_job_goes_to_the_late_lane_of_the_bucket_being_scanned(
    store: MemoryJobStore, service: JobService
) -> None:
    job = service.submit("alice", JobSpec(At(NOW + timedelta(seconds=20)), {}))[0]
    [row] = store.rows.values()
    assert (row.bucket, row.lane, row.due_at) == (datetime(2026, 11, 22, 10, 0, tzinfo=UTC), Lane.LATE, job.next_run_at)


def test_every_is_stored_anchored_one_interval_after_submission(store: MemoryJobStore, service: JobService) -> None:
    job = service.submit("alice", JobSpec(Every(timedelta(hours=1)), {}))[0]
    assert job.spec.schedule == Every(timedelta(hours=1), start=NOW + timedelta(hours=1))
    assert store.jobs[("alice", job.job_id)].spec.schedule == job.spec.schedule
    [row] = store.rows.values()
    assert row.due_at == job.next_run_at == NOW + timedelta(hours=1)


HOOK = HttpsTarget("https://hooks.example.com/run")


def test_a_job_with_a_target_is_stored_without_a_topic_even_for_a_tenant_granted_none(
    store: MemoryJobStore, clock: ManualClock,
) -> None:
    # Given a stage whose tenant alice is granted no topic, and which allows https targets only
    service = memory_container({**SETTINGS, "JOBRUNNER_TENANT_TOPICS": '{"bob": ["jobs"]}',
                                "JOBRUNNER_TARGET_KINDS": "https"}, clock=clock, store=store).jobs
    # When alice submits a job with an https target: it is kept with its target and no topic
    job = service.submit("alice", JobSpec(At(NOW + timedelta(hours=1)), {}, target=HOOK))[0]
    assert (store.jobs[("alice", job.job_id)].spec.target, job.spec.topic) == (HOOK, None)
    # And a lambda target, or a job of a topic's workers, is refused
    with pytest.raises(InvalidField) as wrong:
        service.submit("alice", JobSpec(At(NOW + timedelta(hours=1)), {},
                                        target=LambdaTarget("arn:aws:lambda:eu-west-1:123456789012:function:f")))
    assert (wrong.value.field, wrong.value.reason) == ("target", "lambda targets are not allowed here; allowed: https")
    with pytest.raises(Forbidden):
        service.submit("alice", JobSpec(At(NOW + timedelta(hours=1)), {}))


def test_a_change_moves_a_job_to_a_target_and_back_to_the_default_topic(service: JobService) -> None:
    # Given a job of the reports topic
    job = service.submit("alice", JobSpec(Every(timedelta(hours=1)), {}, topic="reports"))[0]
    # When a change gives it a target, then another removes it
    moved = service.change("alice", job.job_id, SpecChange(target=HOOK))
    back = service.change("alice", job.job_id, SpecChange(target=None))
    # Then the first has no topic, and the second the default one
    assert (moved.spec.target, moved.spec.topic) == (HOOK, None)
    assert (back.spec.target, back.spec.topic) == (None, "jobs")


def test_a_job_with_a_target_uses_only_the_context_keywords_its_delivery_knows(service: JobService) -> None:
    # Given a payload that names an unknown keyword beside a known one
    payload = {"at": "<jobrunner.scheduled-time>", "n": ["<jobrunner.tries>"]}
    # When it is submitted with a target: refused, naming the payload and the keyword
    with pytest.raises(InvalidField) as wrong:
        service.submit("alice", JobSpec(At(NOW + timedelta(hours=1)), payload, target=HOOK))
    assert (wrong.value.field, wrong.value.reason) == ("payload", (
        "<jobrunner.tries> is not a context keyword; known: <jobrunner.execution-id>, <jobrunner.job-id>, "
        "<jobrunner.scheduled-time>, <jobrunner.attempt>, <jobrunner.trigger>"))
    # And a worker's job keeps such text as written; given a target by a change, it is refused the same way
    job = service.submit("alice", JobSpec(At(NOW + timedelta(hours=1)), payload))[0]
    assert job.spec.payload == payload
    with pytest.raises(InvalidField, match="payload"):
        service.change("alice", job.job_id, SpecChange(target=HOOK))
    # As is a change of the payload of a job with a target
    hooked = service.submit("alice", JobSpec(At(NOW + timedelta(hours=1)), {"at": "<jobrunner.attempt>"},
                                             target=HOOK))[0]
    with pytest.raises(InvalidField, match="payload"):
        service.change("alice", hooked.job_id, SpecChange(payload=payload))


def test_allowed_topic_is_kept(service: JobService) -> None:
    job, _ = service.submit("alice", JobSpec(At(NOW + timedelta(hours=1)), {}, topic="reports"))
    assert job.spec.topic == "reports"


def test_payload_at_the_size_limit_is_accepted(service: JobService) -> None:
    payload = "x" * 98  # 100 bytes once serialized with its quotes
    assert service.submit("alice", JobSpec(At(NOW + timedelta(hours=1)), payload))[0].spec.payload == payload


def test_at_up_to_five_minutes_in_the_past_runs_at_once(store: MemoryJobStore, service: JobService) -> None:
    service.submit("alice", JobSpec(At(NOW - timedelta(minutes=5)), {}))
    [row] = store.rows.values()
    assert (row.bucket, row.lane) == (datetime(2026, 11, 22, 10, 0, tzinfo=UTC), Lane.LATE)


@pytest.mark.parametrize(
    ("new", "field", "reason"),
    [
        (JobSpec(At(NOW + timedelta(hours=1)), {}, topic="payroll"), "topic", "allowed"),
        (JobSpec(At(NOW + timedelta(hours=1)), "x" * 99), "payload", "101 bytes"),
        (JobSpec(At(NOW - timedelta(minutes=5, milliseconds=1)), {}), "schedule.at", "past"),
        (JobSpec(Every(timedelta(hours=1), end=NOW + timedelta(minutes=59)), {}), "schedule", "never fires"),
        (
            JobSpec(Every(timedelta(minutes=5), start=NOW - timedelta(days=2), end=NOW - timedelta(days=1)), {}),
            "schedule", "never fires",
        ),
    ],
    ids=["topic", "payload", "at-in-past", "every-ends-before-first-fire", "every-ended"],
)
def test_rejected_submission_names_the_field_and_writes_nothing(
    store: MemoryJobStore, service: JobService, new: JobSpec, field: str, reason: str
) -> None:
    with pytest.raises(InvalidField, match=reason) as caught:
        service.submit("alice", new)
    assert caught.value.field == field
    assert store.jobs == {} and store.rows == {}


GRANTS = {"JOBRUNNER_ALLOWED_TOPICS": "jobs,payments,reports",
          "JOBRUNNER_TENANT_TOPICS": json.dumps({"payments-team": ["payments", "jobs"], "reporting": ["reports"]})}


@pytest.fixture
def granted(store: MemoryJobStore, clock: ManualClock) -> JobService:
    return memory_container(GRANTS, clock=clock, store=store).jobs


def test_a_topic_not_granted_to_the_tenant_is_forbidden_and_nothing_is_written(
    store: MemoryJobStore, granted: JobService
) -> None:
    # Given topics granted per tenant, when reporting names the payments team's topic
    with pytest.raises(Forbidden) as caught:
        granted.submit("reporting", JobSpec(At(NOW + timedelta(hours=1)), {}, topic="payments"))
    # Then it is refused naming the topic and what the tenant may use, and nothing is stored
    assert (caught.value.field, caught.value.reason) == ("topic", "'payments' is not granted to this tenant; "
                                                                  "granted: ['reports']")
    assert store.jobs == {} and store.rows == {}
    # and a tenant with no grant at all cannot submit even to the default topic
    with pytest.raises(Forbidden, match="no topic is granted to this tenant"):
        granted.submit("newcomer", JobSpec(At(NOW + timedelta(hours=1)), {}))
    # while a topic the deployment does not allow is still a wrong field (422)
    with pytest.raises(InvalidField, match="not an allowed topic"):
        granted.submit("reporting", JobSpec(At(NOW + timedelta(hours=1)), {}, topic="elsewhere"))


def test_a_job_without_a_topic_goes_to_the_default_or_to_its_tenants_first_topic(granted: JobService) -> None:
    due = At(NOW + timedelta(hours=1))
    assert granted.submit("payments-team", JobSpec(due, {}))[0].spec.topic == "jobs"
    assert granted.submit("reporting", JobSpec(due, {}))[0].spec.topic == "reports"


def test_a_change_to_a_topic_not_granted_is_forbidden_and_changes_nothing(
    store: MemoryJobStore, granted: JobService
) -> None:
    job = granted.submit("reporting", JobSpec(Every(timedelta(minutes=5)), {}))[0]
    with pytest.raises(Forbidden, match="'payments' is not granted"):
        granted.change("reporting", job.job_id, SpecChange(topic="payments"))
    assert store.jobs[("reporting", job.job_id)] == job


LIMITS = {"JOBRUNNER_MAX_PAYLOAD_BYTES": "100", "JOBRUNNER_TENANT_LIMITS": json.dumps(
    {"*": {"submissions_per_second": 2}, "small": {"payload_bytes": 20}, "ops": {"submissions_per_second": None}})}


def limited(store: MemoryJobStore, clock: ManualClock, quotas: MemoryTenantQuotas | None = None) -> JobService:
    return memory_container(LIMITS, clock=clock, store=store, quotas=quotas or MemoryTenantQuotas()).jobs


def test_submissions_over_a_tenants_rate_are_refused_for_the_second_and_write_nothing(
    store: MemoryJobStore, clock: ManualClock
) -> None:
    service = limited(store, clock)
    due = At(NOW + timedelta(hours=1))
    # Given a rate of 2 a second for every tenant, a refused request (a bad payload) costs nothing
    with pytest.raises(InvalidField):
        service.submit("alice", JobSpec(due, {"pad": "x" * 200}))
    accepted = [service.submit("alice", JobSpec(due, {}))[0] for _ in range(2)]
    # When alice submits a third job in the same second
    with pytest.raises(LimitReached) as caught:
        service.submit("alice", JobSpec(due, {}))
    # Then it is refused, naming the limit, to retry after a second, and only the first two exist
    assert (caught.value.limit, caught.value.retry_after_s) == ("submissions_per_second", 1)
    assert "at most 2 jobs a second" in caught.value.reason
    assert set(store.jobs) == {("alice", j.job_id) for j in accepted}
    # while another tenant has a rate of its own, an exempt one has none, and the next second admits again
    assert service.submit("bob", JobSpec(due, {}))[1]
    assert all(service.submit("ops", JobSpec(due, {}))[1] for _ in range(5))
    clock.advance(timedelta(seconds=1))
    assert service.submit("alice", JobSpec(due, {}))[1]


def test_a_tenants_payload_limit_is_its_own(store: MemoryJobStore, clock: ManualClock) -> None:
    service = limited(store, clock)
    with pytest.raises(InvalidField, match="the limit is 20"):
        service.submit("small", JobSpec(At(NOW + timedelta(hours=1)), {"pad": "x" * 20}))
    assert service.submit("alice", JobSpec(At(NOW + timedelta(hours=1)), {"pad": "x" * 20}))[1]
    assert [user for user, _ in store.jobs] == ["alice"]


def test_a_quota_counter_that_cannot_be_reached_admits_the_submission(
    store: MemoryJobStore, clock: ManualClock
) -> None:
    class Down(MemoryTenantQuotas):
        def admit(self, tenant: str, window: int, limit: int, count: int = 1) -> bool:
            raise Unavailable("throttled")

    service = limited(store, clock, Down())
    assert all(service.submit("alice", JobSpec(At(NOW + timedelta(hours=1)), {}))[1] for _ in range(3))


STANDING = {"JOBRUNNER_MAX_PAYLOAD_BYTES": "100", "JOBRUNNER_TENANT_LIMITS": json.dumps(
    {"*": {"jobs_held": 2, "executions_per_minute": 8}, "ops": {"jobs_held": None}})}


def standing(store: MemoryJobStore, clock: ManualClock, quotas: MemoryTenantQuotas) -> JobService:
    return memory_container(STANDING, clock=clock, store=store, quotas=quotas).jobs


def test_recurring_jobs_held_are_limited_and_a_cancel_makes_room(store: MemoryJobStore, clock: ManualClock) -> None:
    quotas = MemoryTenantQuotas()
    service = standing(store, clock, quotas)
    hourly = JobSpec(Every(timedelta(hours=1)), {})
    held = [service.submit("alice", hourly)[0] for _ in range(2)]
    # When alice submits a third recurring job
    with pytest.raises(LimitReached) as caught:
        service.submit("alice", hourly)
    # Then it is refused, naming the limit, and nothing is written or counted
    assert caught.value.limit == "jobs_held" and "at most 2 recurring jobs" in caught.value.reason
    assert {job_id for _, job_id in store.jobs} == {job.job_id for job in held}
    assert quotas.standing["alice"].jobs == 2
    # while a one-time job is not held, a pause keeps its place and an exempt tenant holds as many as it likes
    assert service.submit("alice", JobSpec(At(NOW + timedelta(hours=1)), {}))[1]
    service.pause("alice", held[0].job_id)
    with pytest.raises(LimitReached):
        service.submit("alice", hourly)
    assert all(service.submit("ops", hourly)[1] for _ in range(3))
    # and a cancel gives its place back, once however often it is repeated
    service.cancel("alice", held[0].job_id)
    service.cancel("alice", held[0].job_id)
    assert quotas.standing["alice"].jobs == 1
    assert service.submit("alice", hourly)[1]


def test_executions_a_minute_bound_one_time_jobs_runs_now_and_recurring_reservations(
    store: MemoryJobStore, clock: ManualClock
) -> None:
    quotas = MemoryTenantQuotas()
    service = standing(store, clock, quotas)
    # Given a recurring job every 10 s (6 fires a minute reserved) under a limit of 8 a minute
    fast = service.submit("alice", JobSpec(Every(timedelta(seconds=10)), {}))[0]
    # Then a minute ahead takes 2 one-time jobs, not 3, naming the minute
    due = NOW + timedelta(hours=1)
    [service.submit("alice", JobSpec(At(due), {})) for _ in range(2)]
    with pytest.raises(LimitReached) as caught:
        service.submit("alice", JobSpec(At(due), {}))
    assert caught.value.limit == "executions_per_minute" and "2026-11-22T11:00Z is full" in caught.value.reason
    assert caught.value.retry_after_s == 60
    # and the current minute takes 2 runs now, then refuses with the seconds left in the minute
    [service.run_now("alice", fast.job_id) for _ in range(2)]
    with pytest.raises(LimitReached) as now_full:
        service.run_now("alice", fast.job_id)
    assert (now_full.value.limit, now_full.value.retry_after_s) == ("executions_per_minute", 50)
    # and even a recurring job of 1 fire a minute no longer fits beside those full minutes ahead
    with pytest.raises(LimitReached):
        service.submit("alice", JobSpec(Every(timedelta(minutes=1)), {}))
    assert quotas.standing["alice"].per_minute == 6
    # and cancelling a one-time job gives its minute back
    once = next(job for (_, _), job in store.jobs.items() if isinstance(job.spec.schedule, At))
    service.cancel("alice", once.job_id)
    assert service.submit("alice", JobSpec(At(due), {}))[1]


def test_a_patch_moves_what_a_job_holds_and_a_refused_patch_changes_nothing(
    store: MemoryJobStore, clock: ManualClock
) -> None:
    quotas = MemoryTenantQuotas()
    service = standing(store, clock, quotas)
    job = service.submit("alice", JobSpec(Every(timedelta(minutes=5)), {}))[0]
    # When it is made to fire every 10 s (6 a minute): fits under 8
    faster = service.change("alice", job.job_id, SpecChange(schedule=Every(timedelta(seconds=10))))
    assert quotas.standing["alice"].per_minute == 6
    # and a second job of 3 a minute does not fit beside it
    with pytest.raises(LimitReached):
        service.submit("alice", JobSpec(Every(timedelta(seconds=20)), {}))
    # and slowing it again gives the difference back
    service.change("alice", job.job_id, SpecChange(schedule=Every(timedelta(minutes=1))))
    assert quotas.standing["alice"].per_minute == 1
    assert store.jobs[("alice", job.job_id)].version == faster.version + 1
    # and a one-time job moved to another minute counts there instead
    once = service.submit("alice", JobSpec(At(NOW + timedelta(hours=1)), {}))[0]
    service.change("alice", once.job_id, SpecChange(schedule=At(NOW + timedelta(hours=2))))
    hour, two_hours = (minute_of(NOW + timedelta(hours=h)) for h in (1, 2))
    assert (quotas.minutes[("alice", hour)], quotas.minutes[("alice", two_hours)]) == (0, 1)


def test_what_was_taken_is_given_back_when_the_write_fails(store: MemoryJobStore, clock: ManualClock) -> None:
    quotas = MemoryTenantQuotas()
    service = standing(store, clock, quotas)

    def down(*_: object) -> None:
        raise Unavailable("write timeout")

    store.create_job = down  # type: ignore[method-assign]
    with pytest.raises(Unavailable):
        service.submit("alice", JobSpec(Every(timedelta(hours=1)), {}))
    with pytest.raises(Unavailable):
        service.submit("alice", JobSpec(At(NOW + timedelta(hours=1)), {}))
    assert quotas.standing["alice"].jobs == 0 and sum(quotas.minutes.values()) == 0


def test_a_patch_that_loses_its_race_gives_back_what_it_took(store: MemoryJobStore, clock: ManualClock) -> None:
    quotas = MemoryTenantQuotas()
    service = standing(store, clock, quotas)
    job = service.submit("alice", JobSpec(Every(timedelta(minutes=5)), {}))[0]
    update, lost = store.update_job, []

    def racing(updated: Job, rows: Sequence[ScheduledExecution], expected_version: int, *,
               was_one_time: bool = False) -> bool:
        if not lost:  # another change lands first, once
            lost.append(True)
            update(store.jobs[("alice", job.job_id)].with_changes(version=expected_version + 1), [], expected_version)
            return False
        return update(updated, rows, expected_version, was_one_time=was_one_time)

    store.update_job = racing  # type: ignore[method-assign]
    service.change("alice", job.job_id, SpecChange(schedule=Every(timedelta(seconds=20))))
    # the lost attempt's 3 a minute were given back: the tenant holds exactly the schedule that landed
    assert lost and quotas.standing["alice"].per_minute == 3 and quotas.standing["alice"].jobs == 1


def test_get_returns_own_job_and_hides_other_tenants_jobs(service: JobService) -> None:
    job = service.submit("alice", JobSpec(At(NOW + timedelta(hours=1)), {}))[0]
    assert service.get("alice", job.job_id) == job
    with pytest.raises(JobNotFound):
        service.get("mallory", job.job_id)
    with pytest.raises(JobNotFound):
        service.executions("mallory", job.job_id)


# -- helpers --------------------------------------------------------------------------------------------


def at(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 11, 22, 10, minute, second, tzinfo=UTC)


#: A bucket far enough ahead of NOW that rows written now go to its planned lane.
BUCKET = at(10)


def scan(
    store: MemoryJobStore, clock: ManualClock, job: Job, bucket: datetime
) -> tuple[ScanReport, list[OutboundMessage]]:
    """Run the scan of ``bucket`` in ``job``'s segment, started by its tick ahead of time, to its end."""
    clock.set(max(clock.now(), bucket - timedelta(seconds=30)))
    publisher = MemoryPublisher()
    scans = memory_container(SETTINGS, clock=clock, store=store, publisher=publisher).scans
    report = scans.scan(ScanRequest(segment=segment_of(job.job_id, RULES.segment_count), bucket=bucket))
    return report, publisher.sent


def rows_of(store: MemoryJobStore, job: Job) -> list[ScheduledExecution]:
    return sorted((r for r in store.rows.values() if r.job_id == job.job_id), key=lambda r: (r.due_at, r.job_version))


def stored(store: MemoryJobStore, job: Job) -> Job:
    return store.jobs[(job.user_id, job.job_id)]


def every_minute(service: JobService, payload: object = None) -> Job:
    return service.submit("alice", JobSpec(Every(timedelta(minutes=1), start=BUCKET), payload or {"n": 1}))[0]


# -- idempotent submission --------------------------------------------------------------------------------


def test_same_key_and_same_request_returns_the_first_job(
    store: MemoryJobStore, service: JobService, clock: ManualClock
) -> None:
    # Given a job submitted with an idempotency key (an every without start: anchored at submission)
    new = JobSpec(Every(timedelta(minutes=5)), {"n": 1}, retry=RetryPolicy(max_retries=2), timeout_s=60)
    first, created = service.submit("alice", new, "key-1")
    # When the client retries the same request later (its first answer was lost)
    clock.advance(timedelta(seconds=30))
    again, created_again = service.submit("alice", new, "key-1")
    # Then it gets the same job, not a second one, and is told it was not created now
    assert (created, created_again) == (True, False)
    assert again == first
    assert list(store.jobs) == [("alice", first.job_id)]
    assert len(store.rows) == 1


def test_same_key_with_a_different_request_is_a_conflict(store: MemoryJobStore, service: JobService) -> None:
    first = service.submit("alice", JobSpec(At(BUCKET), {"n": 1}), "key-1")[0]
    for different in (JobSpec(At(BUCKET), {"n": 2}), JobSpec(At(BUCKET + timedelta(seconds=1)), {"n": 1}),
                      JobSpec(At(BUCKET), {"n": 1}, topic="reports"), JobSpec(At(BUCKET), {"n": 1}, timeout_s=5),
                      JobSpec(At(BUCKET), {"n": 1}, retry=RetryPolicy(max_retries=1))):
        with pytest.raises(Conflict):
            service.submit("alice", different, "key-1")
    assert store.jobs == {("alice", first.job_id): first}
    assert len(store.rows) == 1


def test_idempotency_keys_belong_to_their_tenant(store: MemoryJobStore, service: JobService) -> None:
    new = JobSpec(At(BUCKET), {"n": 1})
    alices, _ = service.submit("alice", new, "key-1")
    bobs, created = service.submit("bob", new, "key-1")
    assert created and bobs.job_id != alices.job_id
    assert set(store.jobs) == {("alice", alices.job_id), ("bob", bobs.job_id)}


def test_claimed_key_whose_job_was_never_written_creates_it_under_the_claimed_id(
    store: MemoryJobStore, service: JobService
) -> None:
    # Given a first request that claimed the key and then died before writing its job
    new = JobSpec(At(BUCKET), {"n": 1})
    store.claim_idempotency_key(IdempotencyClaim("alice", "key-1", "job-of-the-first-request", new.digest(), NOW))
    # When the client retries
    job, created = service.submit("alice", new, "key-1")
    # Then the job is created, under the id the key is bound to, with its first run
    assert (job.job_id, created) == ("job-of-the-first-request", True)
    assert store.jobs == {("alice", "job-of-the-first-request"): job}
    [row] = store.rows.values()
    assert (row.job_id, row.due_at) == ("job-of-the-first-request", BUCKET)
    assert row.execution_id == execution_id_for("job-of-the-first-request", BUCKET, 1, Trigger.SCHEDULE)
    assert row.segment == segment_of("job-of-the-first-request", RULES.segment_count)
    # and a further retry finds it
    assert service.submit("alice", new, "key-1") == (job, False)


def test_claimed_key_of_a_different_request_is_a_conflict_even_without_its_job(
    store: MemoryJobStore, service: JobService
) -> None:
    store.claim_idempotency_key(IdempotencyClaim("alice", "key-1", "job-of-the-first-request", "another-fingerprint",
                                                 NOW))
    with pytest.raises(Conflict):
        service.submit("alice", JobSpec(At(BUCKET), {}), "key-1")
    assert store.jobs == {} and store.rows == {}


def test_rejected_request_does_not_claim_the_key(store: MemoryJobStore, service: JobService) -> None:
    with pytest.raises(InvalidField):
        service.submit("alice", JobSpec(At(BUCKET), {}, topic="payroll"), "key-1")
    assert store.idempotency == {}
    _, created = service.submit("alice", JobSpec(At(BUCKET), {}), "key-1")
    assert created


# -- list with a status filter ------------------------------------------------------------------------


class CountingStore(MemoryJobStore):
    def __init__(self) -> None:
        super().__init__()
        self.list_calls: list[int] = []

    def list_jobs(self, user_id: str, limit: int, cursor: str | None) -> tuple[list[Job], str | None]:
        self.list_calls.append(limit)
        return super().list_jobs(user_id, limit, cursor)


def submit_many(service: JobService, count: int) -> list[Job]:
    jobs = [service.submit("alice", JobSpec(At(BUCKET), {"i": i}))[0] for i in range(count)]
    return sorted(jobs, key=lambda j: j.job_id)


def follow(service: JobService, limit: int, status: JobStatus | None) -> tuple[list[Job], int]:
    """Every job of alice's list, following the cursors; and how many requests that took."""
    found: list[Job] = []
    cursor: str | None = None
    requests = 0
    while True:
        page, cursor = service.list_jobs("alice", limit, cursor, status)
        assert len(page) <= limit
        found += page
        requests += 1
        if cursor is None:
            return found, requests


def test_list_without_filter_is_the_stores_pages(service: JobService) -> None:
    jobs = submit_many(service, 5)
    service.submit("bob", JobSpec(At(BUCKET), {}))
    found, requests = follow(service, 2, None)
    assert (found, requests) == (jobs, 3)


@pytest.mark.parametrize("limit", [1, 2, 10])
def test_list_by_status_finds_every_matching_job_across_pages(service: JobService, limit: int) -> None:
    jobs = submit_many(service, 7)
    paused = [service.pause("alice", jobs[i].job_id) for i in (1, 4, 5)]
    cancelled = service.cancel("alice", jobs[6].job_id)
    assert follow(service, limit, JobStatus.PAUSED)[0] == paused
    assert follow(service, limit, JobStatus.CANCELLED)[0] == [cancelled]
    assert [j.job_id for j in follow(service, limit, JobStatus.SCHEDULED)[0]] == [jobs[i].job_id for i in (0, 2, 3)]
    assert follow(service, limit, JobStatus.RUNNING)[0] == []


def test_list_by_status_reads_a_bounded_number_of_pages_and_answers_with_a_cursor(clock: ManualClock) -> None:
    # Given many jobs, of which only the last in job_id order is paused
    store = CountingStore()
    service = memory_container(SETTINGS, clock=clock, store=store).jobs
    jobs = submit_many(service, MAX_PAGES_PER_LIST + 5)
    paused = service.pause("alice", jobs[-1].job_id)
    # When the paused jobs are listed one per page
    page, cursor = service.list_jobs("alice", 1, None, JobStatus.PAUSED)
    # Then the first answer is empty, after MAX_PAGES_PER_LIST store reads, and has a cursor to go on with
    assert (page, len(store.list_calls)) == ([], MAX_PAGES_PER_LIST)
    assert cursor is not None
    page, cursor = service.list_jobs("alice", 1, cursor, JobStatus.PAUSED)
    assert (page, cursor) == ([paused], None)


def test_list_by_status_asks_the_store_only_for_what_is_missing(clock: ManualClock) -> None:
    store = CountingStore()
    service = memory_container(SETTINGS, clock=clock, store=store).jobs
    jobs = submit_many(service, 6)
    for job in jobs[:4]:
        service.pause("alice", job.job_id)
    page, cursor = service.list_jobs("alice", 3, None, JobStatus.PAUSED)
    assert [j.job_id for j in page] == [j.job_id for j in jobs[:3]]
    assert cursor is not None and store.list_calls == [3]


# -- preview ------------------------------------------------------------------------------------------


def test_preview_lists_the_next_fires_from_the_next_run(service: JobService) -> None:
    job = every_minute(service)
    assert service.preview(job, 3) == [BUCKET, at(11), at(12)]
    assert service.preview(job, 0) == []


def test_preview_stops_where_the_schedule_ends(service: JobService) -> None:
    ending = service.submit("alice", JobSpec(Every(timedelta(minutes=1), start=BUCKET, end=at(11, 30)), {}))[0]
    assert service.preview(ending, 5) == [BUCKET, at(11)]
    once = service.submit("alice", JobSpec(At(BUCKET), {}))[0]
    assert service.preview(once, 5) == [BUCKET]


def test_preview_of_a_paused_or_cancelled_job_is_empty(service: JobService) -> None:
    paused = service.pause("alice", every_minute(service).job_id)
    cancelled = service.cancel("alice", every_minute(service).job_id)
    assert service.preview(paused, 3) == [] and service.preview(cancelled, 3) == []


# -- cancel ----------------------------------------------------------------------------------------------


def test_cancel_bumps_the_version_and_the_planned_row_is_then_dropped_by_its_scan(
    store: MemoryJobStore, service: JobService, clock: ManualClock
) -> None:
    # Given a job with its first run planned
    job = every_minute(service)
    [planned] = rows_of(store, job)
    # When it is cancelled
    clock.advance(timedelta(seconds=5))
    cancelled = service.cancel("alice", job.job_id)
    # Then it is a new version with no next run; the planned row stays for its scan, which drops it
    assert (cancelled.state, cancelled.status, cancelled.version, cancelled.next_run_at) == (
        JobState.CANCELLED, JobStatus.CANCELLED, 2, None
    )
    assert cancelled.updated_at == clock.now()
    assert stored(store, job) == cancelled
    assert rows_of(store, job) == [planned]
    report, sent = scan(store, clock, job, BUCKET)
    assert (sent, report.dropped, report.finished) == ([], 1, True)
    assert store.records == {}


def test_cancel_is_idempotent(store: MemoryJobStore, service: JobService, clock: ManualClock) -> None:
    job = every_minute(service)
    cancelled = service.cancel("alice", job.job_id)
    clock.advance(timedelta(minutes=1))
    assert service.cancel("alice", job.job_id) == cancelled
    assert stored(store, job).version == 2


def test_another_tenant_cannot_cancel(store: MemoryJobStore, service: JobService) -> None:
    job = every_minute(service)
    with pytest.raises(JobNotFound):
        service.cancel("mallory", job.job_id)
    assert stored(store, job) == job


# -- pause and resume -----------------------------------------------------------------------------------


def test_pause_stops_the_job_and_its_planned_row_is_dropped(
    store: MemoryJobStore, service: JobService, clock: ManualClock
) -> None:
    job = every_minute(service)
    paused = service.pause("alice", job.job_id)
    assert (paused.state, paused.status, paused.version, paused.next_run_at, paused.paused_at) == (
        JobState.PAUSED, JobStatus.PAUSED, 2, None, NOW
    )
    assert stored(store, job) == paused
    assert len(rows_of(store, job)) == 1  # only the row planned under version 1
    assert service.pause("alice", job.job_id) == paused  # idempotent
    report, sent = scan(store, clock, job, BUCKET)
    assert (sent, report.dropped) == ([], 1)


def test_cancelled_job_cannot_be_paused_or_resumed(service: JobService) -> None:
    job = every_minute(service)
    service.cancel("alice", job.job_id)
    with pytest.raises(Conflict):
        service.pause("alice", job.job_id)
    with pytest.raises(Conflict):
        service.resume("alice", job.job_id)


def test_resuming_an_active_job_changes_nothing(store: MemoryJobStore, service: JobService) -> None:
    job = every_minute(service)
    assert service.resume("alice", job.job_id) == job
    assert stored(store, job).version == 1 and len(store.rows) == 1


def test_resume_runs_from_the_first_fire_after_now_without_backlog(
    store: MemoryJobStore, service: JobService, clock: ManualClock
) -> None:
    # Given a job every minute from 10:10, paused before its first fire
    job = every_minute(service)
    service.pause("alice", job.job_id)
    # When it is resumed at 10:15:30
    clock.set(at(15, 30))
    resumed = service.resume("alice", job.job_id)
    # Then it runs again from 10:16; the fires of 10:10 to 10:15 are skipped
    assert (resumed.state, resumed.status, resumed.version, resumed.next_run_at) == (
        JobState.ACTIVE, JobStatus.SCHEDULED, 3, at(16)
    )
    new_row = rows_of(store, job)[-1]
    assert (new_row.due_at, new_row.job_version, new_row.trigger) == (at(16), 3, Trigger.SCHEDULE)
    _, sent = scan(store, clock, job, at(15))
    assert sent == []


class SlowSchedulingStore(MemoryJobStore):
    """Each ``schedule`` takes ``took`` on the clock (a slow write)."""

    def __init__(self, clock: ManualClock, took: timedelta) -> None:
        super().__init__()
        self.clock, self.took = clock, took
        self.written: list[ScheduledExecution] = []

    def write_scheduled(self, rows: Sequence[ScheduledExecution]) -> None:
        super().write_scheduled(rows)
        self.written.extend(rows)
        self.clock.advance(self.took)
        self.took = timedelta(0)  # only the first write is slow


def test_a_late_lane_write_that_returns_too_slowly_is_written_again_keyed_from_its_return(
    store: MemoryJobStore, service: JobService, clock: ManualClock
) -> None:
    # Given a run now at 10:03:20 whose first write takes 1.2 s, longer than LATE_WRITE_WITHIN: it may land
    # after a poll that has already read the window its key (10:03:22) is in
    job = every_minute(service)
    slow = SlowSchedulingStore(clock, timedelta(milliseconds=1200))
    slow.jobs = store.jobs
    clock.set(at(3, 20))
    row = memory_container(SETTINGS, clock=clock, store=slow).jobs.run_now("alice", job.job_id)
    # Then it is written again, keyed LATE_LEAD after the second write's placement: the same execution
    first, second = slow.written
    assert first.due_at == at(3, 20) + LATE_LEAD
    assert second == row and second.due_at == at(3, 21) + timedelta(milliseconds=200) + LATE_LEAD
    assert first.execution_id == second.execution_id and second.lane is Lane.LATE
    # while a write that returns within LATE_WRITE_WITHIN is written once
    quick = SlowSchedulingStore(clock, LATE_WRITE_WITHIN)
    quick.jobs = store.jobs
    memory_container(SETTINGS, clock=clock, store=quick).jobs.run_now("alice", job.job_id)
    assert len(quick.written) == 1


class SlowInvoker(Invoker):
    """Requests scans, each taking ``took`` on the clock (a scan started in a process of its own, locally)."""

    def __init__(self, clock: ManualClock, took: timedelta) -> None:
        self.clock, self.took = clock, took
        self.requests: list[ScanRequest] = []

    def invoke_scan(self, request: ScanRequest) -> None:
        self.requests.append(request)
        self.clock.advance(self.took)


def test_a_slow_wake_does_not_make_a_write_that_returned_in_time_be_written_again(
    store: MemoryJobStore, service: JobService, clock: ManualClock
) -> None:
    # Given a run now whose write returns at once, into a partition no scan holds, whose scan takes 2 s to
    # request (locally a process is started; the cluster suite met 503s "too slowly" that this made)
    job = every_minute(service)
    recording = SlowSchedulingStore(clock, timedelta(0))
    recording.jobs = store.jobs
    invoker = SlowInvoker(clock, timedelta(seconds=2))
    clock.set(at(3, 20))
    row = memory_container(SETTINGS, clock=clock, store=recording, invoker=invoker).jobs.run_now("alice", job.job_id)
    # Then it was written once: what the scans must see in time is the write, not the request for a scan
    assert recording.written == [row]
    assert invoker.requests == [ScanRequest(segment=row.segment, bucket=row.bucket)]


def test_resume_with_catch_up_replays_the_fires_missed_while_paused(
    store: MemoryJobStore, service: JobService, clock: ManualClock
) -> None:
    # Given a job every minute from 10:10, paused at 10:00:10 before its first fire
    job = every_minute(service)
    service.pause("alice", job.job_id)
    # When it is resumed with catch_up at 10:15:30
    clock.set(at(15, 30))
    resumed = service.resume("alice", job.job_id, catch_up=True)
    # Then its next run is the first fire after the pause, due at once (late lane of the running minute)
    assert resumed.next_run_at == BUCKET
    new_row = rows_of(store, job)[-1]
    # (keyed LATE_LEAD after the write, so that it lands ahead of the late lane's windows already read)
    assert (new_row.scheduled_at, new_row.due_at, new_row.bucket, new_row.lane, new_row.job_version) == (
        BUCKET, at(15, 30) + LATE_LEAD, at(15), Lane.LATE, 3)
    # and the scan of that minute publishes every missed fire, one after another, oldest first
    _, sent = scan(store, clock, job, at(15))
    assert [m.value["scheduled_at"] for m in sent] == [f"2026-11-22T10:{m}:00.000Z" for m in range(10, 16)]


def test_resume_with_catch_up_does_not_replay_a_fire_that_went_out_at_the_pause_instant(
    store: MemoryJobStore, service: JobService, clock: ManualClock
) -> None:
    # Given a job every minute from 10:10 whose fire of 10:10 went out (a scan on a clock a little ahead published
    # it) and which is paused at 10:10:00.000 on the API's clock (found by the model's long search, #31: the
    # resume with catch-up planned 10:10 again, and the scan's catch-up window then recorded the fire that had run
    # SKIPPED over its RUNNING record; with every missed fire replayed, it went out a second time)
    job = every_minute(service)
    _, sent = scan(store, clock, job, BUCKET)
    assert [m.value["scheduled_at"] for m in sent] == ["2026-11-22T10:10:00.000Z"]
    clock.set(BUCKET)
    service.pause("alice", job.job_id)
    # When it is resumed with catch-up at 10:15:30
    clock.set(at(15, 30))
    resumed = service.resume("alice", job.job_id, catch_up=True)
    # Then the fires missed while paused start after the one that went out
    assert resumed.next_run_at == at(11)
    _, sent = scan(store, clock, job, at(15))
    assert [m.value["scheduled_at"] for m in sent] == [f"2026-11-22T10:{m}:00.000Z" for m in range(11, 16)]


def test_resume_with_catch_up_counts_from_the_pause_even_after_an_edit(
    store: MemoryJobStore, service: JobService, clock: ManualClock
) -> None:
    # Given a job every minute from 10:10, paused at 10:00:10, whose payload is edited at 10:12 while paused
    job = every_minute(service)
    service.pause("alice", job.job_id)
    clock.set(at(12))
    service.change("alice", job.job_id, SpecChange(payload={"n": 2}))
    # When it is resumed with catch_up at 10:15:30
    clock.set(at(15, 30))
    resumed = service.resume("alice", job.job_id, catch_up=True)
    # Then the fires missed while paused still start at the first one after the pause (10:10)
    assert resumed.next_run_at == BUCKET


def test_resume_with_catch_up_counts_from_the_latest_pause(
    store: MemoryJobStore, service: JobService, clock: ManualClock
) -> None:
    # Given a job every minute from 10:10, paused at 10:00:10, resumed at 10:11:30, paused again at 10:13:30
    # and edited at 10:14:30 while paused
    job = every_minute(service)
    service.pause("alice", job.job_id)
    clock.set(at(11, 30))
    service.resume("alice", job.job_id)
    clock.set(at(13, 30))
    assert service.pause("alice", job.job_id).paused_at == at(13, 30)
    clock.set(at(14, 30))
    service.change("alice", job.job_id, SpecChange(payload={"n": 2}))
    assert stored(store, job).paused_at == at(13, 30)  # an edit is not a pause
    # When it is resumed with catch_up at 10:15:30
    clock.set(at(15, 30))
    resumed = service.resume("alice", job.job_id, catch_up=True)
    # Then only the fires missed since the second pause are replayed: from 10:14, not 10:10 nor 10:15
    assert resumed.next_run_at == at(14)


def test_resuming_a_one_time_job_whose_time_has_passed_is_a_conflict(
    store: MemoryJobStore, service: JobService, clock: ManualClock
) -> None:
    job = service.submit("alice", JobSpec(At(BUCKET), {}))[0]
    paused = service.pause("alice", job.job_id)
    clock.set(at(15))
    with pytest.raises(Conflict):
        service.resume("alice", job.job_id)
    assert stored(store, job) == paused
    # with catch_up the missed fire runs at once
    assert service.resume("alice", job.job_id, catch_up=True).next_run_at == BUCKET


def test_resuming_a_one_time_job_before_its_time(
    store: MemoryJobStore, service: JobService, clock: ManualClock
) -> None:
    job = service.submit("alice", JobSpec(At(BUCKET), {}))[0]
    service.pause("alice", job.job_id)
    clock.set(at(5))
    resumed = service.resume("alice", job.job_id)
    assert (resumed.next_run_at, resumed.status) == (BUCKET, JobStatus.SCHEDULED)
    _, sent = scan(store, clock, job, BUCKET)
    assert [(m.value["execution_id"], m.value["payload"]) for m in sent] == [
        (execution_id_for(job.job_id, BUCKET, 1, Trigger.SCHEDULE), {})
    ]


def test_pause_then_resume_shortly_before_the_run_publishes_it_once(
    store: MemoryJobStore, service: JobService, clock: ManualClock
) -> None:
    # Given a job due at 10:10:00 whose row was planned long before
    job = service.submit("alice", JobSpec(At(BUCKET), {"n": 1}))[0]
    # When it is paused and resumed a minute before its run (the new row goes to the late lane)
    clock.set(BUCKET - timedelta(seconds=60))
    service.pause("alice", job.job_id)
    service.resume("alice", job.job_id)
    # Then the scan publishes the run exactly once
    _, sent = scan(store, clock, job, BUCKET)
    assert [m.value["execution_id"] for m in sent] == [execution_id_for(job.job_id, BUCKET, 1, Trigger.SCHEDULE)]


# -- run now ---------------------------------------------------------------------------------------------


def test_run_now_plans_a_manual_run_due_now_in_the_late_lane(
    store: MemoryJobStore, service: JobService, clock: ManualClock
) -> None:
    job = every_minute(service)
    clock.set(at(3, 20))
    row = service.run_now("alice", job.job_id)
    assert (row.trigger, row.due_at, row.scheduled_at, row.attempt, row.job_version) == (
        Trigger.MANUAL, at(3, 20) + LATE_LEAD, at(3, 20), 1, 1
    )
    assert (row.bucket, row.lane) == (minute_bucket(at(3, 25)), Lane.LATE)
    assert row.execution_id == execution_id_for(job.job_id, at(3, 20), 1, Trigger.MANUAL)
    assert row in store.rows.values()
    assert stored(store, job) == job  # the regular schedule is untouched
    # and the scan of the running minute publishes it right away
    _, sent = scan(store, clock, job, at(3))
    assert [(m.value["execution_id"], m.value["trigger"]) for m in sent] == [(row.execution_id, "MANUAL")]
    assert stored(store, job).next_run_at == BUCKET


def test_run_now_is_allowed_on_a_paused_job(store: MemoryJobStore, service: JobService, clock: ManualClock) -> None:
    job = every_minute(service)
    paused = service.pause("alice", job.job_id)
    row = service.run_now("alice", job.job_id)
    _, sent = scan(store, clock, job, row.bucket)
    assert [m.value["execution_id"] for m in sent] == [row.execution_id]
    after = stored(store, job)
    assert (after.state, after.version, after.next_run_at) == (JobState.PAUSED, paused.version, None)


def test_run_now_of_a_cancelled_job_is_a_conflict(store: MemoryJobStore, service: JobService) -> None:
    job = every_minute(service)
    service.cancel("alice", job.job_id)
    before = dict(store.rows)
    with pytest.raises(Conflict):
        service.run_now("alice", job.job_id)
    with pytest.raises(JobNotFound):
        service.run_now("mallory", job.job_id)
    assert store.rows == before


# -- change (PATCH) ----------------------------------------------------------------------------------------


def test_schedule_change_replans_from_now(store: MemoryJobStore, service: JobService, clock: ManualClock) -> None:
    # Given a job every minute from 10:10
    job = every_minute(service)
    # When, at 10:03, it is changed to hourly (without start: the first fire is an interval from now)
    clock.set(at(3))
    changed = service.change("alice", job.job_id, SpecChange(schedule=Every(timedelta(hours=1))))
    # Then its next run is 11:03 under version 2; the 10:10 row is left to be dropped by its scan
    assert changed.spec.schedule == Every(timedelta(hours=1), start=at(3) + timedelta(hours=1))
    assert (changed.next_run_at, changed.version, changed.updated_at) == (at(3) + timedelta(hours=1), 2, at(3))
    old, new = rows_of(store, job)
    assert (old.due_at, old.job_version) == (BUCKET, 1)
    assert (new.due_at, new.job_version, new.lane) == (at(3) + timedelta(hours=1), 2, Lane.PLANNED)
    report, sent = scan(store, clock, job, BUCKET)
    assert (sent, report.dropped) == ([], 1)


def test_payload_change_keeps_the_next_run_and_its_planned_row(
    store: MemoryJobStore, service: JobService, clock: ManualClock
) -> None:
    job = every_minute(service, payload={"n": 1})
    [before] = rows_of(store, job)
    clock.set(at(2))
    changed = service.change("alice", job.job_id, SpecChange(payload={"n": 2}))
    assert (changed.spec.payload, changed.spec.schedule) == ({"n": 2}, job.spec.schedule)
    assert (changed.next_run_at, changed.version, changed.schedule_version) == (BUCKET, 2, 1)
    # nothing re-planned: the row planned under schedule version 1 is still the job's only one
    assert rows_of(store, job) == [before]
    _, sent = scan(store, clock, job, BUCKET)
    assert [(m.value["execution_id"], m.value["payload"]) for m in sent] == [(before.execution_id, {"n": 2})]


def test_payload_change_shortly_before_the_run_is_published_once_with_the_new_payload(
    store: MemoryJobStore, service: JobService, clock: ManualClock
) -> None:
    # Given a job due at 10:10:00 whose row was planned long before (planned lane)
    job = service.submit("alice", JobSpec(At(BUCKET), {"n": 1}))[0]
    # When its payload changes a minute before the run (the re-planned row goes to the late lane)
    clock.set(BUCKET - timedelta(seconds=60))
    service.change("alice", job.job_id, SpecChange(payload={"n": 2}))
    # Then the scan publishes the run exactly once, with the new payload
    _, sent = scan(store, clock, job, BUCKET)
    assert [(m.value["execution_id"], m.value["payload"]) for m in sent] == [
        (execution_id_for(job.job_id, BUCKET, 1, Trigger.SCHEDULE), {"n": 2})
    ]


def test_other_fields_change_from_the_next_fire(store: MemoryJobStore, service: JobService) -> None:
    job = every_minute(service)
    retry = RetryPolicy(max_retries=3, initial_delay_s=1, multiplier=3, max_delay_s=30)
    changes = SpecChange(topic="reports", retry=RetryChange.whole(retry), timeout_s=30)
    changed = service.change("alice", job.job_id, changes)
    assert (changed.spec.topic, changed.spec.retry, changed.spec.timeout_s) == ("reports", retry, 30)
    assert changed.spec.payload == job.spec.payload
    cleared = service.change("alice", job.job_id, SpecChange(timeout_s=None))
    assert (cleared.spec.timeout_s, cleared.spec.topic, cleared.version) == (None, "reports", 3)


def test_change_of_a_cancelled_job_is_a_conflict(store: MemoryJobStore, service: JobService) -> None:
    job = every_minute(service)
    cancelled = service.cancel("alice", job.job_id)
    with pytest.raises(Conflict):
        service.change("alice", job.job_id, SpecChange(payload={"n": 2}))
    assert stored(store, job) == cancelled


def test_change_of_a_paused_job_plans_no_run(store: MemoryJobStore, service: JobService, clock: ManualClock) -> None:
    job = every_minute(service)
    service.pause("alice", job.job_id)
    changed = service.change("alice", job.job_id, SpecChange(schedule=Every(timedelta(hours=1)),
                                                              payload={"n": 2}))
    assert (changed.state, changed.next_run_at, changed.version, changed.spec.payload) == (
        JobState.PAUSED, None, 3, {"n": 2}
    )
    assert len(rows_of(store, job)) == 1  # still only the row of version 1
    # resuming later plans from the new schedule
    clock.advance(timedelta(minutes=1))
    assert service.resume("alice", job.job_id).next_run_at == NOW + timedelta(hours=1)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        (SpecChange(topic="payroll"), "topic"),
        (SpecChange(payload="x" * 99), "payload"),
        (SpecChange(timeout_s=0), "timeout_s"),
        (SpecChange(timeout_s=24 * 3600 + 1), "timeout_s"),
        (SpecChange(schedule=At(NOW - timedelta(minutes=6))), "schedule"),
        (SpecChange(schedule=Every(timedelta(minutes=1), start=NOW - timedelta(hours=2),
                                   end=NOW - timedelta(hours=1))), "schedule"),
    ],
    ids=["topic", "payload", "timeout-zero", "timeout-too-long", "at-in-past", "every-ended"],
)
def test_rejected_change_names_the_field_and_writes_nothing(
    store: MemoryJobStore, service: JobService, changes: SpecChange, field: str
) -> None:
    job = every_minute(service)
    rows = dict(store.rows)
    with pytest.raises(InvalidField) as caught:
        service.change("alice", job.job_id, changes)
    assert caught.value.field == field
    assert stored(store, job) == job and store.rows == rows


def test_another_tenant_cannot_change_pause_resume_or_run(store: MemoryJobStore, service: JobService) -> None:
    job = every_minute(service)
    rows = dict(store.rows)
    for action in (
        lambda: service.change("mallory", job.job_id, SpecChange(payload={})),
        lambda: service.pause("mallory", job.job_id),
        lambda: service.resume("mallory", job.job_id, catch_up=True),
        lambda: service.run_now("mallory", job.job_id),
    ):
        with pytest.raises(JobNotFound):
            action()
    assert stored(store, job) == job and store.rows == rows


# -- races and faults of everyday operations (#12) ---------------------------------------------------------


class RacingStore(MemoryJobStore):
    """A store that lets another request land right after a read (two API calls interleaving), can defer
    a ``create`` that then fails (a write that times out and lands later), and can be slow to claim."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self.clock = clock
        self.after_get: list[Callable[[], object]] = []
        self.deferred: list[Callable[[], None]] = []
        self.defer_next_create = False
        self.claim_takes = timedelta(0)

    def get_job(self, user_id: str, job_id: str) -> Job | None:
        job = super().get_job(user_id, job_id)
        while self.after_get:
            self.after_get.pop(0)()
        return job

    def create_job(self, job: Job, first: ScheduledExecution | None) -> None:
        if self.defer_next_create:
            self.defer_next_create = False
            self.deferred.append(lambda: super(RacingStore, self).create_job(job, first))
            raise Unavailable("write timeout: the coordinator did not hear back in time")
        super().create_job(job, first)

    def claim_idempotency_key(self, *args: Any) -> Any:
        self.clock.advance(self.claim_takes)
        return super().claim_idempotency_key(*args)


@pytest.fixture
def racing(clock: ManualClock) -> RacingStore:
    return RacingStore(clock)


def test_a_cancel_landing_between_a_patchs_read_and_write_wins(racing: RacingStore, clock: ManualClock) -> None:
    # Given a job, and a PATCH whose read is followed at once by a DELETE of the same job
    service = memory_container(SETTINGS, clock=clock, store=racing).jobs
    job = every_minute(service)
    racing.after_get.append(lambda: service.cancel("alice", job.job_id))
    # When the PATCH writes
    with pytest.raises(Conflict):
        service.change("alice", job.job_id, SpecChange(payload={"n": 2}))
    # Then the job stays cancelled, and nothing is published
    assert stored(racing, job).state is JobState.CANCELLED
    _, sent = scan(racing, clock, job, BUCKET)
    assert sent == []


def test_of_two_concurrent_schedule_changes_only_the_last_one_fires(racing: RacingStore, clock: ManualClock) -> None:
    # Given a job, and two PATCHes of its schedule that both read version 1
    service = memory_container(SETTINGS, clock=clock, store=racing).jobs
    job = every_minute(service)
    racing.after_get.append(lambda: service.change("alice", job.job_id, SpecChange(schedule=At(at(10, 40)))))
    # When the second one writes after the first
    changed = service.change("alice", job.job_id, SpecChange(schedule=At(at(10, 20))))
    # Then only its fire is published, and the job is the second one's (applied over the first)
    _, sent = scan(racing, clock, job, BUCKET)
    assert [m.value["scheduled_at"] for m in sent] == ["2026-11-22T10:10:20.000Z"]
    assert (changed.spec.schedule, changed.version) == (At(at(10, 20)), 3)


def test_a_retry_after_an_ambiguous_failure_builds_the_same_job(racing: RacingStore, clock: ManualClock) -> None:
    # Given a submission with a key whose write timed out but lands later (after the client's retry)
    service = memory_container(SETTINGS, clock=clock, store=racing).jobs
    new = JobSpec(Every(timedelta(minutes=5)), {"n": 1})
    racing.defer_next_create = True
    with pytest.raises(Unavailable):
        service.submit("alice", new, "key-1")
    # When the client retries 30 s later, and then the first write lands
    clock.advance(timedelta(seconds=30))
    job, _ = service.submit("alice", new, "key-1")
    racing.deferred.pop()()
    # Then there is one job with one first fire, as of the first request
    fires = {(r.scheduled_at, r.execution_id) for r in rows_of(racing, job)}
    assert fires == {(NOW + timedelta(minutes=5), execution_id_for(job.job_id, NOW + timedelta(minutes=5), 1,
                                                                   Trigger.SCHEDULE))}
    assert stored(racing, job).spec.schedule == job.spec.schedule
    assert job.spec.schedule == Every(timedelta(minutes=5), start=NOW + timedelta(minutes=5))


def test_a_slow_idempotency_claim_does_not_strand_a_job_due_within_seconds(
    racing: RacingStore, clock: ManualClock
) -> None:
    # Given a job due 3 s from now, whose idempotency claim takes 70 s (a slow lightweight transaction)
    service = memory_container(SETTINGS, clock=clock, store=racing).jobs
    racing.claim_takes = timedelta(seconds=70)
    job, _ = service.submit("alice", JobSpec(At(NOW + timedelta(seconds=3)), {}), "key-1")
    # Then its row is in a bucket whose scan cannot have finished when the write returned
    [row] = rows_of(racing, job)
    assert clock.now() <= row.bucket + timedelta(minutes=1, seconds=5)
    _, sent = scan(racing, clock, job, row.bucket)
    assert [m.key for m in sent] == [job.job_id]


def test_a_pause_keeps_the_retries_of_an_execution_already_published(
    store: MemoryJobStore, service: JobService, clock: ManualClock
) -> None:
    # Given a one-time job whose execution failed and has a retry planned
    job = service.submit("alice", JobSpec(At(at(10, 5)), {}, retry=RetryPolicy(max_retries=1, initial_delay_s=10)))[0]
    _, [message] = scan(store, clock, job, BUCKET)
    results = memory_container(SETTINGS, clock=clock, store=store, jitter=lambda: 1.0).results
    assert results.apply(WorkerReport(message.value["execution_id"], job.job_id, False, "boom",
                                      scheduled_at=at(10, 5), attempt=1,
                                      result_token=message.value["result_token"])) == "retrying"
    # When the job is paused before the retry is due
    service.pause("alice", job.job_id)
    [retry] = [r for r in rows_of(store, job) if r.trigger is Trigger.RETRY]
    _, sent = scan(store, clock, job, retry.bucket)
    # Then the retry still runs (a pause stops the schedule, not the work already in flight)
    assert [(m.value["attempt"], m.value["trigger"]) for m in sent] == [(2, "RETRY")]


def test_a_next_run_older_than_the_history_retention_is_the_schedules_next_fire(
    store: MemoryJobStore, clock: ManualClock
) -> None:
    # Given a yearly job whose fire's record has expired (a retention of 10 days), 40 days after that fire
    service = memory_container({"JOBRUNNER_TENANT_LIMITS": json.dumps({"*": {"history_days": 10}})}, clock=clock,
                               store=store).jobs
    job = service.submit("alice", JobSpec(Cron("0 9 25 12 *", "Europe/Paris"), {}))[0]
    assert job.next_run_at == datetime(2026, 12, 25, 8, 0, tzinfo=UTC)
    clock.advance(timedelta(days=73))
    # Then its next run and preview are next year's, not the fire it had when it was created
    shown = service.get("alice", job.job_id)
    assert shown.next_run_at == datetime(2027, 12, 25, 8, 0, tzinfo=UTC)
    assert service.preview(shown, 1) == [datetime(2027, 12, 25, 8, 0, tzinfo=UTC)]
    # while within the retention the stored next run is shown as it is (a late fire stays visible)
    clock.advance(timedelta(days=-40))
    assert service.get("alice", job.job_id).next_run_at == datetime(2026, 12, 25, 8, 0, tzinfo=UTC)


# -- jitter ---------------------------------------------------------------------------------------------------


def test_a_jittered_job_is_due_within_its_window_after_each_fire_and_keeps_its_fires(
    store: MemoryJobStore, clock: ManualClock, service: JobService
) -> None:
    # Given a job every minute from BUCKET whose executions are spread over 20 s after each fire
    job = service.submit("alice", JobSpec(Every(timedelta(minutes=1), start=BUCKET), {}, jitter_s=20))[0]
    [row] = rows_of(store, job)
    # Then its first row is due at the fire plus the job's offset for that fire, and is still that fire
    assert (row.scheduled_at, row.due_at) == (BUCKET, due_of(job, BUCKET))
    assert BUCKET < row.due_at < BUCKET + timedelta(seconds=20)
    assert row.execution_id == execution_id_for(job.job_id, BUCKET, 1, Trigger.SCHEDULE)
    # When its minute is scanned
    _, sent = scan(store, clock, job, BUCKET)
    # Then it is published for its fire, not before its due instant, and its record says both
    [message] = sent
    assert message.value["scheduled_at"] == "2026-11-22T10:10:00.000Z"
    [record] = [r for r in store.records.values() if r.job_id == job.job_id]
    assert (record.scheduled_at, record.due_at) == (BUCKET, row.due_at)
    assert record.published_at is not None and record.published_at >= row.due_at
    # and the next fire is planned from the fire, due at its own offset
    [following] = [r for r in rows_of(store, job) if r.scheduled_at > BUCKET]  # the done row expires
    following_fire = BUCKET + timedelta(minutes=1)
    assert (following.scheduled_at, following.due_at) == (following_fire, due_of(job, following_fire))
    assert service.get("alice", job.job_id).next_run_at == following_fire  # the fire; the offset is the job's


def test_a_patch_of_the_jitter_applies_from_the_next_fire_planned_and_runs_now_are_never_jittered(
    store: MemoryJobStore, clock: ManualClock, service: JobService
) -> None:
    job = service.submit("alice", JobSpec(Every(timedelta(minutes=1), start=BUCKET), {}, jitter_s=20))[0]
    [planned] = rows_of(store, job)
    # When the window is removed
    changed = service.change("alice", job.job_id, SpecChange(jitter_s=None))
    # Then the fire already planned keeps its due instant, and the job has no window any more
    assert changed.spec.jitter_s is None and rows_of(store, job) == [planned]
    _, sent = scan(store, clock, job, BUCKET)
    assert len(sent) == 1
    [following] = [r for r in rows_of(store, job) if r.scheduled_at > BUCKET]
    assert following.due_at == following.scheduled_at == BUCKET + timedelta(minutes=1)
    # and a run now is due now, whatever the window
    service.change("alice", job.job_id, SpecChange(jitter_s=600))
    manual = service.run_now("alice", job.job_id)
    assert manual.scheduled_at == clock.now() and manual.due_at <= manual.scheduled_at + LATE_LEAD  # the late lane's
    # and a window out of bounds names the field
    for wrong in (0, 3601):
        with pytest.raises(InvalidField, match="jitter_s"):
            service.change("alice", job.job_id, SpecChange(jitter_s=wrong))


# -- backfill -------------------------------------------------------------------------------------------------


def test_a_backfill_runs_the_past_fires_of_a_range_once_each_and_a_dry_run_lists_them(
    store: MemoryJobStore, clock: ManualClock, service: JobService
) -> None:
    # Given a job every 10 minutes since 09:00, now 10:00:10
    job = service.submit("alice", JobSpec(Every(timedelta(minutes=10), start=NOW - timedelta(hours=1, seconds=10)),
                                         {}))[0]
    start, end = NOW - timedelta(minutes=45), NOW - timedelta(minutes=5)
    # When the fires of 09:15-09:55 are listed, then backfilled
    fires = service.backfill("alice", job.job_id, start, end, dry_run=True).fires
    assert fires == [NOW - timedelta(minutes=m, seconds=10) for m in (40, 30, 20, 10)]
    assert not [r for r in rows_of(store, job) if r.trigger is Trigger.BACKFILL]
    assert service.backfill("alice", job.job_id, start, end).queued == fires
    # Then each is queued now, as its own execution of that fire, and published by the scan of now
    backfilled = [r for r in rows_of(store, job) if r.trigger is Trigger.BACKFILL]
    assert sorted(r.scheduled_at for r in backfilled) == fires
    assert {r.execution_id for r in backfilled} == {execution_id_for(job.job_id, f, 1, Trigger.BACKFILL)
                                                    for f in fires}
    assert all(r.due_at <= NOW + LATE_LEAD for r in backfilled)
    # and asking again queues the very same executions (the same rows), not a second run of each
    service.backfill("alice", job.job_id, start, end)
    assert len([r for r in rows_of(store, job) if r.trigger is Trigger.BACKFILL]) == 4
    _, sent = scan(store, clock, job, minute_bucket(NOW))
    assert sorted(m.value["scheduled_at"] for m in sent if m.value["trigger"] == "BACKFILL") == [
        f"2026-11-22T09:{m}:00.000Z" for m in ("20", "30", "40", "50")]
    # and once they have run, asking again for the range (and a wider one) queues only the fires not run yet
    # (issue #31: a repeated backfill, placed anew, published its fires a second time)
    clock.advance(timedelta(minutes=5))
    again = service.backfill("alice", job.job_id, start - timedelta(minutes=10), end)
    assert (again.fires[1:], again.queued) == (fires, [fires[0] - timedelta(minutes=10)])
    _, sent = scan(store, clock, job, minute_bucket(clock.now()))
    assert [m.value["scheduled_at"] for m in sent if m.value["trigger"] == "BACKFILL"] == [
        "2026-11-22T09:10:00.000Z"]


def test_a_backfill_is_of_the_past_bounded_and_refused_for_a_cancelled_job(
    store: MemoryJobStore, clock: ManualClock, service: JobService
) -> None:
    job = service.submit("alice", JobSpec(Every(timedelta(seconds=10), start=NOW - timedelta(days=1)), {}))[0]
    with pytest.raises(InvalidField, match="in the future"):
        service.backfill("alice", job.job_id, NOW - timedelta(hours=1), NOW + timedelta(seconds=30))
    with pytest.raises(InvalidField, match="more than 1000 fires"):
        service.backfill("alice", job.job_id, NOW - timedelta(hours=3), NOW)
    with pytest.raises(InvalidField, match="after to"):
        service.backfill("alice", job.job_id, NOW, NOW - timedelta(hours=1))
    assert len(service.backfill("alice", job.job_id, NOW - timedelta(minutes=10), NOW, dry_run=True).fires) == 61
    service.pause("alice", job.job_id)  # a paused job may be backfilled, as it may be run now
    assert service.backfill("alice", job.job_id, NOW - timedelta(seconds=30), NOW).queued
    service.cancel("alice", job.job_id)
    with pytest.raises(Conflict):
        service.backfill("alice", job.job_id, NOW - timedelta(minutes=10), NOW)
    with pytest.raises(JobNotFound):
        service.backfill("mallory", job.job_id, NOW - timedelta(minutes=10), NOW)


# -- change log -----------------------------------------------------------------------------------------------


def test_every_change_that_lands_is_logged_with_who_asked_and_one_that_changes_nothing_is_not(
    store: MemoryJobStore, clock: ManualClock
) -> None:
    changes = MemoryChangeLog()
    service = memory_container(SETTINGS, clock=clock, store=store, changes=changes).jobs
    ops = "arn:aws:iam::123456789012:role/Ops"
    job = service.submit("alice", JobSpec(Every(timedelta(minutes=5)), {"n": 1}), actor=ops)[0]
    clock.advance(timedelta(seconds=1))
    service.change("alice", job.job_id, SpecChange(payload={"n": 2}, jitter_s=30),
                   actor=ops)
    clock.advance(timedelta(seconds=1))
    service.pause("alice", job.job_id)  # no actor given: the tenant itself
    service.pause("alice", job.job_id, actor=ops)  # already paused: nothing lands, nothing is logged
    clock.advance(timedelta(seconds=1))
    service.resume("alice", job.job_id, catch_up=True, actor=ops)
    clock.advance(timedelta(seconds=1))
    run = service.run_now("alice", job.job_id, actor=ops)
    clock.advance(timedelta(seconds=1))
    service.cancel("alice", job.job_id, actor=ops)
    log = service.changes("alice", job.job_id, limit=50)
    assert [(c.action, c.actor, c.version) for c in reversed(log)] == [
        ("submit", ops, 1), ("patch", ops, 2), ("pause", "alice", 3), ("resume", ops, 4), ("run", ops, 4),
        ("cancel", ops, 5)]
    details = {c.action: c.details for c in log}
    assert details["patch"] == {"fields": ["jitter_s", "payload"]}
    assert details["resume"] == {"catch_up": True} and details["run"] == {"execution_id": run.execution_id}
    assert details["submit"] == {"schedule": job.spec.schedule.to_dict()}
    # and another tenant cannot read it
    with pytest.raises(JobNotFound):
        service.changes("mallory", job.job_id)


def test_a_change_log_that_cannot_be_written_loses_the_entry_not_the_change(
    store: MemoryJobStore, clock: ManualClock
) -> None:
    class Down(MemoryChangeLog):
        def record(self, change: JobChange) -> None:
            raise Unavailable("timeout")

    service = memory_container(SETTINGS, clock=clock, store=store, changes=Down()).jobs
    job = service.submit("alice", JobSpec(Every(timedelta(minutes=5)), {}))[0]
    assert service.pause("alice", job.job_id).state is JobState.PAUSED


# -- submit_many (POST /jobs/batch) ------------------------------------------------------------------------


def test_a_batch_is_written_together_each_job_with_its_first_run_and_no_change_log_entry(
    clock: ManualClock,
) -> None:
    # Given a store and a change log that count their calls
    calls: list[str] = []

    class Counting(MemoryJobStore):
        def create_job(self, job: Job, first: ScheduledExecution | None) -> None:
            calls.append("create")
            super().create_job(job, first)

        def create_jobs(self, jobs: Sequence[tuple[Job, ScheduledExecution | None]]) -> None:
            calls.append("create_many")
            super().create_jobs(jobs)

    store, changes = Counting(), MemoryChangeLog()
    service = memory_container(SETTINGS, clock=clock, store=store, changes=changes).jobs
    ops = "arn:aws:iam::123456789012:role/Ops"
    news = [JobSpec(At(NOW + timedelta(minutes=n + 10)), {"n": n}) for n in range(30)] + [
        JobSpec(Every(timedelta(minutes=5)), {"n": 30})]
    # When they are submitted as one batch
    results = service.submit_many("alice", [(new, None) for new in news], actor=ops)
    # Then every job exists with its first run, in one write of them all, and no change log entry is written
    assert calls == ["create_many"]
    assert [job.spec.payload for job, created in results if created] == [{"n": n} for n in range(31)]
    assert {r.job_id for r in store.rows.values()} == {job.job_id for job, _ in results}
    assert all(store.jobs[("alice", job.job_id)] == job for job, _ in results)
    assert changes.entries == {}
    # yet each job's log shows its submit, by who asked, when, at version 1, with its schedule
    for job, _ in results:
        [submit] = service.changes("alice", job.job_id)
        assert (submit.action, submit.actor, submit.changed_at, submit.version, submit.details) == (
            "submit", ops, NOW, 1, {"schedule": job.spec.schedule.to_dict()})


def test_a_batch_with_a_wrong_job_names_each_and_counts_and_writes_nothing(
    store: MemoryJobStore, clock: ManualClock
) -> None:
    quotas = MemoryTenantQuotas()
    service = limited(store, clock, quotas)
    good, bad = JobSpec(At(NOW + timedelta(hours=1)), {}), JobSpec(At(NOW + timedelta(hours=1)), {"pad": "x" * 200})
    with pytest.raises(InvalidFields) as caught:
        service.submit_many("alice", [(good, None), (bad, None), (replace(good, timeout_s=0), None)])
    assert [(e.field, e.reason) for e in caught.value.errors] == [
        ("jobs.1.payload", "is 210 bytes; the limit is 100"),
        ("jobs.2.timeout_s", "must be between 1 and 86400 seconds")]
    assert store.jobs == {} and store.rows == {} and sum(quotas.admitted.values()) == 0


def test_a_tenants_rate_counts_every_job_of_a_batch_all_or_none(store: MemoryJobStore, clock: ManualClock) -> None:
    service = limited(store, clock)  # 2 a second for alice
    due = JobSpec(At(NOW + timedelta(hours=1)), {})
    with pytest.raises(LimitReached, match="send fewer at once"):
        service.submit_many("alice", [(due, None)] * 3)
    assert len(service.submit_many("alice", [(due, None)] * 2)) == 2
    with pytest.raises(LimitReached):
        service.submit_many("alice", [(due, None)])
    assert len(store.jobs) == 2
    clock.advance(timedelta(seconds=1))
    assert len(service.submit_many("alice", [(due, None)])) == 1


def test_a_batch_counted_against_standing_limits_takes_each_job_as_submit_does(
    store: MemoryJobStore, clock: ManualClock
) -> None:
    # Given at most 2 recurring jobs held per tenant
    service = standing(store, clock, MemoryTenantQuotas())
    hourly = JobSpec(Every(timedelta(hours=1)), {})
    # When a batch of three arrives, Then the third is refused and the first two stand (a 429 part-way)
    with pytest.raises(LimitReached, match="jobs_held"):
        service.submit_many("alice", [(hourly, None)] * 3)
    assert len(store.jobs) == 2


# -- firing ledger --------------------------------------------------------------------------------------------


def test_the_ledger_of_a_job_says_what_became_of_each_fire_after_scans_a_pause_and_a_cancel(
    store: MemoryJobStore, clock: ManualClock
) -> None:
    # Given a job every minute from 10:10, whose scans run for 10:10 and 10:11, and not for 10:12 (an outage)
    service = memory_container(SETTINGS, clock=clock, store=store, changes=MemoryChangeLog()).jobs
    job = every_minute(service)
    for minute in (10, 11):
        scan(store, clock, job, at(minute))
    # When it is paused at 10:13:30 and resumed at 10:15:30, then a scan runs for 10:16, and it is cancelled
    clock.set(at(13, 30))
    service.pause("alice", job.job_id)
    clock.set(at(15, 30))
    service.resume("alice", job.job_id)
    scan(store, clock, job, at(16))
    clock.set(at(16, 30))
    service.cancel("alice", job.job_id)
    clock.set(at(20))
    page = service.fires("alice", job.job_id, at(10), at(18))
    # Then the ledger tells the fires published, the one nothing explains, those paused and cancelled
    assert [(f.at.minute, f.outcome.value) for f in page.fires] == [
        (10, "published"), (11, "published"), (12, "missing"), (13, "missing"), (14, "paused"), (15, "paused"),
        (16, "published")]  # a cancelled job's schedule calls for nothing after its cancel
    assert page.unaccounted == 2
    assert all(f.lateness_ms is not None for f in page.fires if f.outcome.value == "published")
    # and it pages, bounds its range and names the wrong field, and another tenant cannot read it
    first = service.fires("alice", job.job_id, at(10), at(18), limit=4)
    assert len(first.fires) == 4 and first.more_after == at(13)
    rest = service.fires("alice", job.job_id, at(10), at(18), after=first.more_after)
    assert [f.at for f in first.fires + rest.fires] == [f.at for f in page.fires]
    for wrong, field in (({"end": at(9)}, "to"), ({"end": at(10) + timedelta(days=32)}, "to"), ({"limit": 0}, "limit"),
                         ({"after": at(30)}, "cursor")):
        with pytest.raises(InvalidField) as error:
            service.fires("alice", job.job_id, at(10), **{"end": at(18), **wrong})  # type: ignore[arg-type]
        assert error.value.field == field
    with pytest.raises(JobNotFound):
        service.fires("mallory", job.job_id, at(10), at(18))


def test_the_change_log_records_the_schedule_a_patch_sets_so_the_ledger_follows_it(
    store: MemoryJobStore, clock: ManualClock
) -> None:
    changes = MemoryChangeLog()
    service = memory_container(SETTINGS, clock=clock, store=store, changes=changes).jobs
    job = every_minute(service)
    clock.advance(timedelta(seconds=1))
    service.change("alice", job.job_id, SpecChange(schedule=Every(timedelta(minutes=2), start=at(20))))
    [patch, _] = service.changes("alice", job.job_id)
    assert patch.details == {"fields": ["schedule"], "schedule": Every(timedelta(minutes=2), start=at(20)).to_dict()}
    clock.set(at(30))
    page = service.fires("alice", job.job_id, at(10), at(24))
    assert [f.at.minute for f in page.fires] == [20, 22, 24]  # the first schedule never had a fire in effect
