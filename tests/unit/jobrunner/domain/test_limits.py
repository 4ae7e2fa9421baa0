"""Per-tenant limits: a default for every tenant and overrides, parsed strictly."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import isodate
import pytest

from jobrunner.domain.jobs import Job, JobState
from jobrunner.domain.limits import (
    DEFAULT_DELIVERY_TENANT_RATE,
    DeliveryRates,
    Holding,
    Limits,
    QuotaChange,
    Standing,
    TenantLimits,
    apply,
    minute_of,
    most_per_minute,
    payload_refusal,
    refusal_reason,
)
from jobrunner.domain.schedules import At, Cron, Every, RepeatingInterval
from jobrunner.domain.spec import JobSpec

if TYPE_CHECKING:
    from jobrunner.domain.schedules import Schedule


def test_a_tenants_entry_overrides_only_the_limits_it_names() -> None:
    limits = TenantLimits.parse({"*": {"submissions_per_second": 20, "payload_bytes": 4096},
                                 "payments": {"submissions_per_second": 200}}, max_payload_bytes=65536)
    assert limits.of("payments") == Limits(submissions_per_second=200, payload_bytes=4096)
    assert limits.of("anyone") == Limits(submissions_per_second=20, payload_bytes=4096)
    assert limits.rate_limited


def test_without_entries_there_is_no_rate_limit_and_the_deployments_payload_bound() -> None:
    limits = TenantLimits.parse({}, max_payload_bytes=1000)
    assert limits.of("anyone") == Limits(submissions_per_second=None, payload_bytes=1000)
    assert not limits.rate_limited
    # a tenant may also be exempted from a default rate
    exempt = TenantLimits.parse({"*": {"submissions_per_second": 5}, "ops": {"submissions_per_second": None}}, 1000)
    assert (exempt.of("ops").submissions_per_second, exempt.of("x").submissions_per_second) == (None, 5)


@pytest.mark.parametrize(("entries", "message"), [
    ({"*": {"submissions_per_second": 0}}, "submissions_per_second must be a positive integer or null"),
    ({"a": {"submissions_per_second": True}}, "submissions_per_second must be a positive integer or null"),
    ({"a": {"payload_bytes": 70000}}, "payload_bytes must be between 1 and 65536"),
    ({"a": {"jobs": 3}}, r"unknown limits \['jobs'\]"),
    ({"a": 3}, "expected an object of limits"),
    ({"a": {"deliveries_per_second": 0}}, "deliveries_per_second must be a positive integer"),
    ({"*": {"deliveries_per_second": None}}, "deliveries_per_second must be a positive integer"),
])
def test_a_wrong_limit_names_the_tenant_and_why(entries: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TenantLimits.parse(entries, max_payload_bytes=65536)


def test_a_tenants_delivery_rate_is_its_own_else_every_tenants_else_the_stages() -> None:
    # Given a stage rate of 20, and limits giving every tenant 10 and one tenant 100
    limits = TenantLimits.parse({"*": {"deliveries_per_second": 10}, "payments": {"deliveries_per_second": 100},
                                 "reports": {"jobs_held": 5}}, 65536)
    rates = DeliveryRates.of_stage(DEFAULT_DELIVERY_TENANT_RATE, limits)
    # Then each tenant gets the most specific one, and a tenant named for another limit gets every tenant's
    assert (rates.of("payments"), rates.of("reports"), rates.of("anyone")) == (100, 10, 10)
    # and without limits of deliveries the stage's rate holds, 0 meaning none
    assert DeliveryRates.of_stage(20, TenantLimits.parse({}, 65536)).of("anyone") == 20
    assert DeliveryRates.of_stage(0, TenantLimits.parse({}, 65536)).of("anyone") is None
    assert DeliveryRates.of_stage(0, limits).of("payments") == 100
    # a rate of deliveries counts nothing in the quota table
    assert not TenantLimits.parse({"*": {"deliveries_per_second": 10}}, 65536).counted


# -- standing limits: jobs held and executions a minute ------------------------------------------------

NOW = datetime(2026, 11, 25, 10, 0, 30, tzinfo=UTC)
HERE = minute_of(NOW)
BOUNDS = Limits(jobs_held=2, executions_per_minute=10)


def test_a_standing_limit_is_parsed_like_a_rate_and_says_what_must_be_counted() -> None:
    limits = TenantLimits.parse({"*": {"jobs_held": 100}, "big": {"executions_per_minute": 6000}}, 65536)
    assert limits.of("big") == Limits(jobs_held=100, executions_per_minute=6000)
    assert (limits.counts_jobs, limits.counts_minutes, limits.rate_limited, limits.counted) == (True, True, False, True)
    assert not TenantLimits.parse({"*": {"payload_bytes": 10}}, 65536).counted
    with pytest.raises(ValueError, match="jobs_held must be a positive integer or null"):
        TenantLimits.parse({"*": {"jobs_held": -1}}, 65536)


@pytest.mark.parametrize(("schedule", "most"), [
    (Every(timedelta(seconds=10)), 6),
    (Every(timedelta(seconds=25)), 3),   # :00 :25 :50 fit in one minute
    (Every(timedelta(seconds=60)), 1),
    (Every(timedelta(hours=1)), 1),
    (Cron("* * * * *", "Europe/Paris"), 1),
    (RepeatingInterval(count=None, start=NOW, duration=timedelta(seconds=15)), 4),
    (RepeatingInterval(count=2, start=NOW, duration=timedelta(seconds=15)), 2),
    (RepeatingInterval(count=5, start=NOW, end=NOW + timedelta(seconds=20)), 3),
    (RepeatingInterval(count=None, start=NOW, duration=isodate.parse_duration("P1M")), 1),
])
def test_a_schedules_most_fires_a_minute(schedule: Schedule, most: int) -> None:
    assert most_per_minute(schedule) == most


def test_the_most_fires_a_minute_is_never_below_what_the_schedule_does_in_any_minute() -> None:
    # checked on the fire times themselves, over the minutes of an hour, for intervals of 10 s to 2 min
    for seconds in range(10, 121, 7):
        schedule = Every(timedelta(seconds=seconds), start=NOW + timedelta(milliseconds=seconds * 37))
        fires, instant = Counter[int](), schedule.first_fire(NOW)
        while instant is not None and instant < NOW + timedelta(hours=1):
            fires[minute_of(instant)] += 1
            instant = schedule.next_fire_after(instant)
        assert max(fires.values()) <= most_per_minute(schedule), seconds


def job(schedule: Schedule, state: JobState = JobState.ACTIVE) -> Job:
    return Job(user_id="t", job_id="j", spec=JobSpec(schedule=schedule, payload={}, topic="jobs"), created_at=NOW,
               updated_at=NOW, state=state, next_run_at=schedule.first_fire(NOW))


def test_what_a_job_holds_and_what_a_change_takes_and_gives() -> None:
    limits = TenantLimits.parse({"*": {"jobs_held": 5, "executions_per_minute": 60}}, 65536)
    every = job(Every(timedelta(seconds=20), start=NOW))
    once = job(At(NOW + timedelta(hours=1, seconds=5)))
    assert limits.holding(every) == Holding(jobs=1, per_minute=3)
    assert limits.holding(once) == Holding(minute=HERE + 3600)
    assert limits.holding(every.with_changes(state=JobState.PAUSED)) == Holding(jobs=1, per_minute=3)
    assert limits.holding(every.with_changes(state=JobState.CANCELLED)) == Holding()
    assert limits.change(None, every) == QuotaChange(jobs=1, per_minute=3)
    assert limits.change(every, every.with_changes(state=JobState.CANCELLED)) == QuotaChange(jobs=-1, per_minute=-3)
    # a one-time job made recurring gives its minute back and holds a job; a move of its minute swaps minutes
    assert limits.change(once, every) == QuotaChange(jobs=1, per_minute=3, drop_minute=HERE + 3600)
    later = once.with_changes(schedule=At(NOW + timedelta(hours=2)))
    assert limits.change(once, later) == QuotaChange(add_minute=HERE + 7200, drop_minute=HERE + 3600)
    assert limits.change(once, once).empty and not limits.change(every, every).grows
    assert limits.run_now(NOW) == QuotaChange(add_minute=HERE)
    # only what some tenant limits is counted: without any standing limit, nothing
    plain = TenantLimits.parse({"*": {"submissions_per_second": 5}}, 65536)
    assert plain.change(None, every).empty and plain.change(None, once).empty and plain.run_now(NOW).empty


def test_jobs_held_refuses_the_one_too_many_and_changes_nothing() -> None:
    standing = Standing(jobs=2)
    assert apply(standing, 0, QuotaChange(jobs=1), BOUNDS, HERE) == ("jobs_held", standing, 0)
    # giving back is never refused, even over a limit lowered since, and never goes below zero
    assert apply(Standing(jobs=4), 0, QuotaChange(jobs=-1), BOUNDS, HERE)[:2] == (None, Standing(jobs=3))
    assert apply(Standing(), 0, QuotaChange(jobs=-1), BOUNDS, HERE)[:2] == (None, Standing())


def test_a_minute_holds_the_recurring_reservations_and_its_one_time_fires_up_to_the_limit() -> None:
    # Given recurring jobs reserving 7 fires in every minute, under a limit of 10
    standing, count, refused, counts = Standing(per_minute=7), 0, None, []
    # When one-time fires are added to a minute ahead, one by one
    for _ in range(4):
        refused, standing, count = apply(standing, count, QuotaChange(add_minute=HERE + 60), BOUNDS, HERE)
        counts.append(count)
    # Then it takes 3 and refuses the fourth
    assert refused == "executions_per_minute" and counts == [1, 2, 3, 3]
    # and the fullest minute ahead (3) is remembered: no recurring job fits any more
    assert (standing.peak, standing.until) == (3, HERE + 60)
    assert apply(standing, 0, QuotaChange(jobs=1, per_minute=1), BOUNDS, HERE)[0] == "executions_per_minute"
    # while a lighter minute further ahead keeps the peak and extends how long it holds
    _, ahead, _ = apply(standing, 0, QuotaChange(add_minute=HERE + 600), BOUNDS, HERE)
    assert (ahead.peak, ahead.until) == (3, HERE + 600)
    # and once those minutes have passed, the recurring jobs may take the whole minute again
    assert apply(ahead, 0, QuotaChange(per_minute=3), BOUNDS, HERE + 660)[0] is None
    assert apply(ahead, 0, QuotaChange(per_minute=3), BOUNDS, HERE + 600)[0] == "executions_per_minute"


def test_a_recurring_job_fits_beside_the_fullest_minute_ahead_to_the_last_fire() -> None:
    standing = Standing(per_minute=5, peak=3, until=HERE + 60)
    assert apply(standing, 0, QuotaChange(jobs=1, per_minute=2), BOUNDS, HERE)[:2] == (
        None, Standing(jobs=1, per_minute=7, peak=3, until=HERE + 60))
    assert apply(standing, 0, QuotaChange(jobs=1, per_minute=3), BOUNDS, HERE)[0] == "executions_per_minute"
    # a past minute (an `at` a little in the past runs at once) is counted but is not ahead
    _, after, count = apply(standing, 4, QuotaChange(add_minute=HERE - 60), BOUNDS, HERE)
    assert (count, after.peak, after.until) == (5, 3, HERE + 60)


def test_a_refusal_names_the_limit_and_a_full_minute() -> None:
    reason = refusal_reason("executions_per_minute", BOUNDS, QuotaChange(add_minute=HERE))
    assert "at most 10 executions due in one minute" in reason and "2026-11-25T10:00Z is full" in reason
    assert "at most 2 recurring jobs" in refusal_reason("jobs_held", BOUNDS, QuotaChange(jobs=1))


def test_history_is_kept_30_days_unless_the_deployment_or_a_tenant_says_otherwise() -> None:
    limits = TenantLimits.parse({"*": {"history_days": 90}, "audit": {"history_days": 3650}}, 65536)
    assert (limits.of("anyone").history_ttl_s, limits.of("audit").history_days) == (90 * 86_400, 3650)
    assert TenantLimits.parse({}, 65536).of("anyone").history_days == 30
    assert not limits.counted  # a retention counts nothing
    for wrong in (1, 3651, "30", True):
        with pytest.raises(ValueError, match="history_days must be between 2 and 3650"):
            TenantLimits.parse({"x": {"history_days": wrong}}, 65536)


def test_a_payload_is_measured_as_its_compact_json() -> None:
    # Given a payload whose compact JSON, non-ASCII escaped as json.dumps writes it, is {"a":"\u00e9\u00e9"}
    payload = {"a": "éé"}

    # Then it fits a limit of its 20 bytes, and a limit one byte smaller refuses it, naming both sizes
    assert payload_refusal(payload, 20) is None
    assert payload_refusal(payload, 19) == "is 20 bytes; the limit is 19"
