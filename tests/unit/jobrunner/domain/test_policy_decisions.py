"""What a job's policies decide for one of its fires (``domain.policy_decisions``): the catch-up window and the
overlap policy, as pure functions of the schedule, the fire, the clock and the records."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from jobrunner.domain.jobs import ExecutionRecord, ExecutionStatus, Trigger, execution_id_for
from jobrunner.domain.policies import CatchUp, Overlap
from jobrunner.domain.policy_decisions import (
    MAX_BUFFERED,
    Decision,
    Dropped,
    Previous,
    PreviousState,
    blocker_of,
    catch_up,
    decide,
    held_fires,
    overlap_note,
    previous_fire,
    recheck_after,
    running_after,
    started_since,
)
from jobrunner.domain.schedules import Every

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
EVERY_MINUTE = Every(timedelta(minutes=1), start=T0)


def t(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def rec(at: datetime, status: ExecutionStatus, attempt: int = 1, trigger: Trigger = Trigger.SCHEDULE,
        error: str | None = None, retry_at: datetime | None = None, version: int = 1,
        origin: Trigger = Trigger.SCHEDULE) -> ExecutionRecord:
    published = None if status in (ExecutionStatus.SKIPPED, ExecutionStatus.SCHEDULED) else at
    return ExecutionRecord(job_id="j", scheduled_at=at, attempt=attempt,
                           execution_id=execution_id_for("j", at, attempt, trigger, origin), user_id="alice",
                           status=status, trigger=trigger, due_at=at, published_at=published, error=error,
                           retry_at=retry_at, job_version=version)


S = ExecutionStatus


@pytest.mark.parametrize(("policy", "state", "decision"), [
    (Overlap.SKIP, PreviousState.RUNNING, Decision.SKIP),
    (Overlap.SKIP, PreviousState.DONE, Decision.RUN),
    (Overlap.BUFFER_ONE, PreviousState.RUNNING, Decision.HOLD),
    (Overlap.BUFFER_ONE, PreviousState.HELD, Decision.SKIP),
    (Overlap.BUFFER_ALL, PreviousState.RUNNING, Decision.HOLD),
    (Overlap.BUFFER_ALL, PreviousState.HELD, Decision.HOLD),
    (Overlap.CANCEL_OTHER, PreviousState.RUNNING, Decision.CANCEL_AND_RUN),
    (Overlap.CANCEL_OTHER, PreviousState.NONE, Decision.RUN),
    (Overlap.ALLOW_ALL, PreviousState.RUNNING, Decision.RUN),
])
def test_each_policy_decides_as_temporals_does(policy: Overlap, state: PreviousState, decision: Decision) -> None:
    assert decide(policy, Previous(state, t(0), "e", 1)) is decision


def test_buffer_all_holds_at_most_ten_fires_then_skips_naming_the_last_held() -> None:
    held = [rec(t(m), S.SCHEDULED) for m in range(10, 0, -1)]  # 10:10 down to 10:01 held, newest first
    previous = previous_fire([*held, rec(t(0), S.RUNNING)], t(11), version=1)
    assert isinstance(previous, Previous) and (previous.state, previous.at) == (PreviousState.HELD, t(10))
    assert held_fires(held, t(11), 1) == MAX_BUFFERED
    assert decide(Overlap.BUFFER_ALL, previous, held=9) is Decision.HOLD
    assert decide(Overlap.BUFFER_ALL, previous, held=10) is Decision.SKIP
    note = overlap_note(Overlap.BUFFER_ALL, previous)
    assert note == ("overlap: buffer_all: the buffer is full (10 fires held), the last for when the fire at "
                    "2026-11-22T10:10:00.000Z is published")
    assert blocker_of(rec(t(11), S.SKIPPED, error=note)) == t(10)


def test_an_execution_of_a_later_fire_still_running_counts_as_the_previous() -> None:
    # (found by the model-based test: a job rescheduled to a fire in the past ran it beside the running one)
    records = [rec(t(5), S.RUNNING), rec(t(4), S.SUCCESS)]
    found = running_after(records, t(1), version=1)
    assert found is not None and (found.state, found.at) == (PreviousState.RUNNING, t(5))
    assert running_after([rec(t(5), S.SUCCESS)], t(1), version=1) is None


def test_a_full_page_passed_over_says_where_to_read_on() -> None:
    # Given a page of fires held under an older version, the running one further back (found by the model test:
    # the walk used to end at the page's end, as if no execution ran)
    stale = [rec(t(m), S.SCHEDULED, version=3) for m in range(20, 0, -1)]
    assert previous_fire(stale, t(21), version=4, more=True) == t(1)
    assert previous_fire(stale, t(21), version=4) == Previous(PreviousState.NONE)  # the first records of all


def test_the_previous_fire_is_found_past_skips_and_other_lineages() -> None:
    # Given, newest first: a run now, fires skipped by the overlap policy naming 10:01, one excluded by a calendar,
    # and the fire of 10:01 whose first attempt failed and whose retry runs
    records = [
        rec(t(5), S.RUNNING, trigger=Trigger.MANUAL),
        rec(t(4), S.SKIPPED, error=overlap_note(Overlap.SKIP, Previous(PreviousState.RUNNING, t(1)))),
        rec(t(3), S.SKIPPED, error="calendar: excluded by calendar holidays (2026-11-22, UTC)"),
        rec(t(2), S.SUCCESS, trigger=Trigger.BACKFILL),
        rec(t(1), S.RUNNING, attempt=2, trigger=Trigger.RETRY),
        rec(t(1), S.FAILED, retry_at=t(1.5)),
        rec(t(0), S.SUCCESS),
    ]
    assert blocker_of(records[1]) == t(1)
    found = previous_fire(records, t(6), version=1)
    assert isinstance(found, Previous)
    assert (found.state, found.at, found.attempt) == (PreviousState.RUNNING, t(1), 2)
    assert found.execution_id == records[4].execution_id  # the retry: the attempt a cancel names
    # When the fire a skip names is not among the records read, its instant is returned, to read it
    assert previous_fire(records[:4], t(6), version=1) == t(1)
    # A failed attempt with its retry still to come is running; one without a retry is done
    assert previous_fire([rec(t(1), S.FAILED, retry_at=t(2))], t(2), 1) == Previous(
        PreviousState.RUNNING, t(1), execution_id_for("j", t(1), 1, Trigger.SCHEDULE), 1)
    assert previous_fire([rec(t(1), S.FAILED)], t(2), 1).state is PreviousState.DONE  # type: ignore[union-attr]
    assert previous_fire([], t(2), 1) == Previous(PreviousState.NONE)


def test_a_skip_passes_over_only_the_fires_of_its_own_schedule_version() -> None:
    # Found by the model's long search (#31): a buffer_one job holds 10:01 behind a long run, and its fires up to
    # 10:06 are skipped naming the held one. A change of schedule that returned late (version 2) has its first fire
    # at 10:03:30, published late and running. The fire of 10:06:30 (version 2) used to walk from the skip of
    # 10:05 to the held 10:01 (stale under version 2) and on, past the running 10:03:30: it ran beside it.
    waits = overlap_note(Overlap.BUFFER_ONE, Previous(PreviousState.HELD, t(1)))
    records = [rec(t(m), S.SKIPPED, error=waits) for m in (6, 5, 4, 3, 2)]
    records.insert(3, rec(t(3.5), S.RUNNING, version=2))  # (newest fire first: 10:03:30 between 10:04 and 10:03)
    records += [rec(t(1), S.SCHEDULED), rec(t(0), S.RUNNING)]
    found = previous_fire(records[1:], t(6.5), version=2)
    assert isinstance(found, Previous) and (found.state, found.at) == (PreviousState.RUNNING, t(3.5))
    # The same when the fire the skips name is not on the page read: the fires of other versions on it count
    found = previous_fire(records[1:6], t(6.5), version=2)
    assert isinstance(found, Previous) and (found.state, found.at) == (PreviousState.RUNNING, t(3.5))
    # and a page of the skip's own version still says where to read on: at the fire it names
    assert previous_fire([records[0], records[1]], t(6.5), version=1) == t(1)


def test_an_execution_started_after_the_fire_before_and_still_running_counts_as_the_previous() -> None:
    # Found by the model's long search (#31): a job every 10 s under buffer_one; its schedule is changed and the
    # change's write returns 35 s late. The new schedule's first fire (10:00:12.75) is published at 10:00:40, after
    # the old schedule's fire of 10:00:19.75 had ended; its next fire (10:00:22.75) used to look only at the fire
    # before it by instant, 10:00:19.75, done, and ran beside 10:00:12.75.
    def published(at: datetime, status: ExecutionStatus, on: datetime, version: int) -> ExecutionRecord:
        return replace(rec(at, status, version=version), published_at=on)

    first = published(t(0.2), S.RUNNING, t(0.67), version=2)
    records = [published(t(0.33), S.FAILED, t(0.41), version=1), first,
               published(t(0.16), S.FAILED, t(0.16), version=1)]
    before = previous_fire(records, t(0.38), version=2)
    assert isinstance(before, Previous) and (before.state, before.at) == (PreviousState.DONE, t(0.33))
    found = started_since(records, t(0.38), before, version=2)
    assert found is not None and (found.state, found.at, found.execution_id) == (
        PreviousState.RUNNING, t(0.2), first.execution_id)
    # Not an execution published before the fire before was: the policy waited for that one only
    assert started_since([records[0], replace(first, published_at=t(0.3))], t(0.38), before, version=2) is None
    assert started_since([records[0], replace(first, status=S.SUCCESS)], t(0.38), before, version=2) is None


def test_a_held_fire_holds_only_under_the_schedule_version_it_was_held_under() -> None:
    held = rec(t(1), S.SCHEDULED, version=3)
    assert previous_fire([held], t(2), version=3).state is PreviousState.HELD  # type: ignore[union-attr]
    # a pause or a change of schedule since (version 4) dropped its row: it holds nothing, and the fire before
    # it, still running, is the previous one (found by the model-based test: the stale hold counted as done)
    running = rec(t(0), S.RUNNING, version=3)
    found = previous_fire([held, running], t(2), version=4)
    assert isinstance(found, Previous) and (found.state, found.at) == (PreviousState.RUNNING, t(0))


def test_the_catch_up_window_keeps_the_latest_missed_fires_and_says_where_the_schedule_resumes() -> None:
    now = t(10) + timedelta(seconds=30)  # the scan reaches the fire of 10:00 at 10:10:30, after an outage
    # the default replays every missed fire
    assert catch_up(CatchUp(), EVERY_MINUTE, t(0), t(0), now) is None
    # only the latest: 10:00 to 10:09 are dropped, the schedule resumes at 10:10
    assert catch_up(CatchUp(most=1), EVERY_MINUTE, t(0), t(0), now) == Dropped(t(10))
    assert catch_up(CatchUp(most=1), EVERY_MINUTE, t(10), t(10), now) is None
    # the latest three: resume at 10:08
    assert catch_up(CatchUp(most=3), EVERY_MINUTE, t(0), t(0), now) == Dropped(t(8))
    # within the last five minutes: 10:06 (10:05:30 is the window's edge) onwards run
    assert catch_up(CatchUp(window_s=300), EVERY_MINUTE, t(0), t(0), now) == Dropped(t(6))
    assert catch_up(CatchUp(window_s=300), EVERY_MINUTE, t(6), t(6), now) is None
    # both: within the window, and of those the latest two
    assert catch_up(CatchUp(window_s=300, most=2), EVERY_MINUTE, t(6), t(6), now) == Dropped(t(9))
    # a fire within MISFIRE_GRACE of its due instant is not missed, whatever the window
    assert catch_up(CatchUp(most=1), EVERY_MINUTE, t(0), t(0), t(0) + timedelta(seconds=9)) is None
    # a window that keeps nothing up to now resumes at the next fire after now
    hourly = Every(timedelta(hours=1), start=T0)
    assert catch_up(CatchUp(window_s=60), hourly, t(0), t(0), t(30)) == Dropped(t(60))


def test_a_held_fire_is_looked_at_again_less_and_less_often() -> None:
    assert recheck_after(t(0), t(0)) == timedelta(seconds=5)
    assert recheck_after(t(0), t(2)) == timedelta(seconds=30)
    assert recheck_after(t(0), t(60)) == timedelta(seconds=60)
