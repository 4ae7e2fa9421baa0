"""The TenantQuotas contract, on memory and on DynamoDB (moto's server)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from jobrunner.domain.limits import Limits, QuotaChange

if TYPE_CHECKING:
    from jobrunner.ports import TenantQuotas


def test_a_window_admits_up_to_its_limit_then_refuses_without_counting(tenant_quotas: TenantQuotas) -> None:
    assert [tenant_quotas.admit("alice", 100, 3) for _ in range(5)] == [True, True, True, False, False]
    # a refusal counted nothing: a higher limit in the same window admits exactly the difference
    assert [tenant_quotas.admit("alice", 100, 4) for _ in range(2)] == [True, False]


def test_a_window_admits_several_at_once_all_or_none(tenant_quotas: TenantQuotas) -> None:
    # Given a window of 10: 4 and 4 fit, 3 more do not (and count nothing), 2 do, then it is full
    assert [tenant_quotas.admit("dave", 5, 10, count=n) for n in (4, 4, 3, 2, 1)] == [True, True, False, True, False]
    assert not tenant_quotas.admit("erin", 5, 10, count=11)  # more than the limit never fits
    assert tenant_quotas.admit("erin", 5, 10, count=10)


def test_tenants_and_windows_are_counted_apart(tenant_quotas: TenantQuotas) -> None:
    assert tenant_quotas.admit("alice", 100, 1) and not tenant_quotas.admit("alice", 100, 1)
    assert tenant_quotas.admit("bob", 100, 1)
    assert tenant_quotas.admit("alice", 101, 1)


def test_racing_callers_never_get_past_the_limit_together(tenant_quotas: TenantQuotas) -> None:
    # Given 8 threads asking 80 admissions of one tenant in one window whose limit is 25
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: tenant_quotas.admit("carol", 7, 25), range(80)))
    # Then exactly 25 were admitted
    assert answers.count(True) == 25


# -- standing counts: jobs held and executions a minute ------------------------------------------------

HERE = 1_795_000_000 // 60 * 60
LIMITS = Limits(jobs_held=3, executions_per_minute=10)
RECURRING = QuotaChange(jobs=1, per_minute=2)


def test_jobs_are_held_up_to_the_limit_and_a_cancel_frees_one(tenant_quotas: TenantQuotas) -> None:
    assert [tenant_quotas.take("alice", RECURRING, LIMITS, HERE) for _ in range(4)] == [None, None, None, "jobs_held"]
    # another tenant's counts are its own
    assert tenant_quotas.take("bob", RECURRING, LIMITS, HERE) is None
    # giving one back (a cancel) is never refused and makes room for exactly one
    assert tenant_quotas.take("alice", RECURRING.inverse(), LIMITS, HERE) is None
    assert [tenant_quotas.take("alice", RECURRING, LIMITS, HERE) for _ in range(2)] == [None, "jobs_held"]


def test_a_minute_takes_one_time_fires_beside_the_reservations_and_a_move_gives_its_old_minute_back(
    tenant_quotas: TenantQuotas,
) -> None:
    # Given 2 recurring jobs reserving 4 fires a minute
    assert tenant_quotas.take("carol", RECURRING, LIMITS, HERE) is None
    assert tenant_quotas.take("carol", RECURRING, LIMITS, HERE) is None
    # Then a minute ahead takes 6 one-time fires, not 7
    once = QuotaChange(add_minute=HERE + 60)
    assert [tenant_quotas.take("carol", once, LIMITS, HERE) for _ in range(7)] == [None] * 6 + ["executions_per_minute"]
    # and no recurring job fits beside that full minute while it is ahead
    assert tenant_quotas.take("carol", RECURRING, LIMITS, HERE) == "executions_per_minute"
    # and a fire moved out of that minute (a PATCH) frees one place in it
    moved = QuotaChange(add_minute=HERE + 120, drop_minute=HERE + 60)
    assert tenant_quotas.take("carol", moved, LIMITS, HERE) is None
    assert [tenant_quotas.take("carol", once, LIMITS, HERE) for _ in range(2)] == [None, "executions_per_minute"]
    # and once the minutes have passed, a recurring job fits again
    assert tenant_quotas.take("carol", RECURRING, LIMITS, HERE + 180) is None


def test_a_change_given_back_is_undone(tenant_quotas: TenantQuotas) -> None:
    tight = Limits(jobs_held=1, executions_per_minute=3)
    assert tenant_quotas.take("dave", RECURRING, tight, HERE) is None
    assert tenant_quotas.take("dave", QuotaChange(add_minute=HERE), tight, HERE) is None
    assert tenant_quotas.take("dave", QuotaChange(add_minute=HERE), tight, HERE) == "executions_per_minute"
    # When both are given back (their writes failed)
    tenant_quotas.give_back("dave", RECURRING)
    tenant_quotas.give_back("dave", QuotaChange(add_minute=HERE))
    # Then the job and the minute's 3 places are free again (the peak of the minute still stands: it only
    # ever errs on the side of refusing)
    assert [tenant_quotas.take("dave", QuotaChange(add_minute=HERE), tight, HERE) for _ in range(4)] == [
        None, None, None, "executions_per_minute"]


def test_what_is_given_back_never_takes_a_count_below_zero(tenant_quotas: TenantQuotas) -> None:
    # Given a tenant holding one recurring job, given back twice (a cancel whose outcome was in doubt, given back
    # by its first attempt and by its retry: issue #31)
    tight = Limits(jobs_held=1)
    assert tenant_quotas.take("gina", RECURRING, tight, HERE) is None
    tenant_quotas.give_back("gina", RECURRING)
    tenant_quotas.give_back("gina", RECURRING)
    # Then the count is 0, not -1: the tenant holds one job again, and a second is refused
    assert tenant_quotas.take("gina", RECURRING, tight, HERE) is None
    assert tenant_quotas.take("gina", RECURRING, tight, HERE) == "jobs_held"


def test_racing_takes_of_one_tenant_never_pass_its_limits_together(tenant_quotas: TenantQuotas) -> None:
    # Given 8 threads racing 30 recurring jobs (2 fires a minute each) and 30 one-time fires in one minute ahead
    limits = Limits(jobs_held=50, executions_per_minute=30)
    changes = [RECURRING, QuotaChange(add_minute=HERE + 60)] * 30
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda change: tenant_quotas.take("erin", change, limits, HERE), changes))
    recurring = sum(answer is None for answer in answers[0::2])
    once = sum(answer is None for answer in answers[1::2])
    # Then together they fill the minute to the limit at most
    assert 2 * recurring + once <= 30 and set(answers) <= {None, "executions_per_minute"}
    # and what was counted is what was admitted: exactly the room left fits, one more fire does not
    room = 30 - 2 * recurring - once
    if room:
        assert tenant_quotas.take("erin", QuotaChange(per_minute=room), limits, HERE) is None
    assert tenant_quotas.take("erin", QuotaChange(per_minute=1), limits, HERE) == "executions_per_minute"


def test_a_backfill_takes_its_fires_in_one_minute_together_or_not_at_all(tenant_quotas: TenantQuotas) -> None:
    limits = Limits(executions_per_minute=10)
    assert tenant_quotas.take("fay", QuotaChange(add_minute=HERE, fires=6), limits, HERE) is None
    assert tenant_quotas.take("fay", QuotaChange(add_minute=HERE, fires=5), limits, HERE) == "executions_per_minute"
    assert tenant_quotas.take("fay", QuotaChange(add_minute=HERE, fires=4), limits, HERE) is None
    # given back whole (its write failed), the minute has its 6 places again
    tenant_quotas.give_back("fay", QuotaChange(add_minute=HERE, fires=6))
    assert tenant_quotas.take("fay", QuotaChange(add_minute=HERE, fires=6), limits, HERE) is None
    assert tenant_quotas.take("fay", QuotaChange(add_minute=HERE), limits, HERE) == "executions_per_minute"


def test_a_create_counted_under_its_job_id_counts_once_however_often_it_is_taken_or_given_back(
    tenant_quotas: TenantQuotas,
) -> None:
    # Given a tenant holding at most 2 jobs, one of them created under the key "job-1": taken again by a repeat of
    # its request (its first answer a 503), it still counts once
    tight = Limits(jobs_held=2)
    assert tenant_quotas.take("hana", RECURRING, tight, HERE, key="job-1") is None
    assert tenant_quotas.take("hana", RECURRING, tight, HERE, key="job-1") is None
    assert tenant_quotas.take("hana", RECURRING, tight, HERE) is None  # (another job: the tenant is full)
    assert tenant_quotas.take("hana", RECURRING, tight, HERE) == "jobs_held"
    # When it is given back twice (the first request could not tell whether its write landed: issue #31), it frees
    # one place, once
    tenant_quotas.give_back("hana", RECURRING, key="job-1")
    tenant_quotas.give_back("hana", RECURRING, key="job-1")
    assert tenant_quotas.take("hana", RECURRING, tight, HERE) is None
    assert tenant_quotas.take("hana", RECURRING, tight, HERE) == "jobs_held"
    # and a key given back counts again when taken again (the repeat found the job did land)
    tenant_quotas.give_back("hana", RECURRING)
    assert tenant_quotas.take("hana", RECURRING, tight, HERE, key="job-1") is None
    assert tenant_quotas.take("hana", RECURRING, tight, HERE, key="job-1") is None
    assert tenant_quotas.take("hana", RECURRING, tight, HERE) == "jobs_held"
    # A key given back that was never taken frees nothing
    tenant_quotas.give_back("hana", RECURRING, key="job-2")
    assert tenant_quotas.take("hana", RECURRING, tight, HERE) == "jobs_held"
