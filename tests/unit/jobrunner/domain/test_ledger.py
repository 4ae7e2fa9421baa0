"""The firing ledger (``domain.ledger``): each fire of the schedule in effect, and what became of it."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobrunner.domain.changes import JobChange
from jobrunner.domain.jobs import ExecutionRecord, ExecutionStatus, Job, JobState, Trigger, due_of, execution_id_for
from jobrunner.domain.ledger import FireOutcome, fires_between, ledger, timeline_of
from jobrunner.domain.policies import SkipReason
from jobrunner.domain.policy_decisions import skip_note
from jobrunner.domain.schedules import Cron, Every
from jobrunner.domain.spec import JobSpec

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


def t(minutes: float) -> datetime:
    return T0 + minutes * MIN


def job(schedule: Any = None, **changes: Any) -> Job:
    made = Job(user_id="alice", job_id="j1",
               spec=JobSpec(schedule=schedule or Every(MIN, start=T0), payload={}, topic="jobs"), created_at=T0,
               updated_at=T0)
    return made.with_changes(**changes)


def change(action: str, at: datetime, version: int, **details: Any) -> JobChange:
    return JobChange(job_id="j1", user_id="alice", changed_at=at, change_id=str(uuid.uuid4()), actor="alice",
                     action=action, version=version, details=details)


def record(fire: datetime, status: ExecutionStatus = ExecutionStatus.SUCCESS, *, late_s: float = 0.02,
           trigger: Trigger = Trigger.SCHEDULE, attempt: int = 1, error: str | None = None) -> ExecutionRecord:
    published = None if status in (ExecutionStatus.SKIPPED, ExecutionStatus.SCHEDULED) else (
        fire + timedelta(seconds=late_s))
    return ExecutionRecord(job_id="j1", scheduled_at=fire, attempt=attempt,
                           execution_id=execution_id_for("j1", fire, attempt, trigger), user_id="alice",
                           status=status, trigger=trigger, due_at=fire, published_at=published, error=error,
                           job_version=1)


def outcomes(page: Any) -> dict[datetime, str]:
    return {f.at: f.outcome.value for f in page.fires}


def test_each_fire_says_what_became_of_it() -> None:
    # Given a job every minute from 10:00, a log of its changes, and the records its scans wrote
    current = job(state=JobState.ACTIVE)
    log = [change("submit", t(0), 1, schedule=current.spec.schedule.to_dict()),
           change("pause", t(5.5), 2), change("resume", t(7.5), 3)]
    records = [
        record(t(0)), record(t(1), ExecutionStatus.FAILED), record(t(1), ExecutionStatus.SUCCESS, attempt=2,
                                                                     trigger=Trigger.RETRY),
        record(t(2), late_s=95),  # published 95 s late: missed, then caught up
        record(t(3), ExecutionStatus.SKIPPED, error=skip_note(SkipReason.OVERLAP, "the execution of 10:02 ran on")),
        replace(record(t(4), ExecutionStatus.SKIPPED, error=skip_note(SkipReason.CATCH_UP, "outside the window")),
                next_fire_at=t(5)),  # (a drop names the fire the schedule resumed from)
        record(t(5), ExecutionStatus.SCHEDULED),  # held by a buffer policy
        # 10:06 and 10:07: paused; 10:08: no record at all; 10:09 a backfill ran it
        record(t(9), trigger=Trigger.BACKFILL),
    ]
    # When the ledger of 10:00-10:12 is read at 10:10:05
    page = ledger(current, timeline_of(current, log), records, start=t(0), end=t(12), now=t(10) + timedelta(seconds=5),
                  kept_since=t(-60), limit=100)
    # Then every fire is listed once, in order, with its outcome
    assert outcomes(page) == {
        t(0): "published", t(1): "published", t(2): "caught_up", t(3): "skipped", t(4): "dropped", t(5): "held",
        t(6): "paused", t(7): "paused", t(8): "missing", t(9): "backfilled", t(10): "due", t(11): "upcoming",
        t(12): "upcoming"}
    fires = {f.at: f for f in page.fires}
    assert [(e.trigger, e.attempt) for e in fires[t(1)].executions] == [(Trigger.SCHEDULE, 1), (Trigger.RETRY, 2)]
    assert fires[t(0)].lateness_ms == pytest.approx(20) and fires[t(2)].lateness_ms == pytest.approx(95_000)
    assert fires[t(3)].detail == "overlap: the execution of 10:02 ran on"
    assert "paused at 2026-11-22T10:05:30.000Z and resumed at 2026-11-22T10:07:30.000Z" in (fires[t(6)].detail or "")
    assert (page.unaccounted, page.summary["upcoming"], page.more_after) == (1, 2, None)


def test_a_cancel_a_change_of_schedule_and_a_resume_with_catch_up() -> None:
    # Given a job every minute, changed at 10:02:03 (before the 10:02 fire went out) to every two minutes from
    # 10:04, cancelled at 10:08:06 (before its 10:08 fire went out)
    first, second = Every(MIN, start=T0), Every(2 * MIN, start=t(4))
    current = job(second, state=JobState.CANCELLED, version=3, updated_at=t(8.1))
    log = [change("submit", t(0), 1, schedule=first.to_dict()),
           change("patch", t(2.05), 2, fields=["schedule"], schedule=second.to_dict()),
           change("cancel", t(8.1), 3)]
    records = [record(t(0)), record(t(1)), record(t(4)), record(t(6))]
    page = ledger(current, timeline_of(current, log), records, start=t(0), end=t(12), now=t(20), kept_since=t(-60),
                  limit=100)
    # Then the first schedule's fires run to the change, the second's from it, and none after the cancel
    # (a cancelled job's schedule calls for nothing after its cancel, bar the fire it stopped in flight)
    assert outcomes(page) == {t(0): "published", t(1): "published", t(2): "replaced", t(4): "published",
                              t(6): "published", t(8): "cancelled"}
    # And a resume with catch-up owes the fires of the pause: one never published is missing, not paused
    current = job(state=JobState.ACTIVE)
    log = [change("submit", t(0), 1), change("pause", t(0.5), 2), change("resume", t(3.5), 3, catch_up=True)]
    page = ledger(current, timeline_of(current, log), [record(t(0)), record(t(1), late_s=160)], start=t(0),
                  end=t(3), now=t(20), kept_since=t(-60), limit=100)
    assert outcomes(page) == {t(0): "published", t(1): "caught_up", t(2): "missing", t(3): "missing"}


def test_without_a_log_the_job_itself_says_when_it_was_paused_and_what_is_older_than_history() -> None:
    current = job(state=JobState.PAUSED, paused_at=t(3.5))
    page = ledger(current, timeline_of(current, []), [record(t(2)), record(t(3))], start=t(0), end=t(5),
                  now=t(30), kept_since=t(1.5), limit=100)
    assert outcomes(page) == {t(0): "expired", t(1): "expired", t(2): "published", t(3): "published", t(4): "paused",
                              t(5): "paused"}
    # and a paused job's schedule calls for nothing after now until it is resumed
    page = ledger(current, timeline_of(current, []), [], start=t(0), end=t(9), now=t(6.5), kept_since=t(-60),
                  limit=100)
    assert max(f.at for f in page.fires) == t(6)


def test_a_page_ends_at_its_limit_and_the_next_one_starts_after_it() -> None:
    current = job()
    timeline = timeline_of(current, [])
    first = ledger(current, timeline, [], start=t(0), end=t(9), now=t(-1), kept_since=t(-60), limit=4)
    assert [f.at for f in first.fires] == [t(0), t(1), t(2), t(3)] and first.more_after == t(3)
    rest = ledger(current, timeline, [], start=first.more_after + timedelta(milliseconds=1), end=t(9), now=t(-1),
                  kept_since=t(-60), limit=10)
    assert [f.at for f in rest.fires] == [t(m) for m in range(4, 10)] and rest.more_after is None


def test_a_fire_recorded_for_a_schedule_the_log_does_not_know_is_listed_and_noted() -> None:
    # Given a schedule changed twice, the first change logged before schedules were written into the log
    current = job(Every(MIN, start=t(6)))
    log = [change("submit", t(0), 1, schedule=Every(MIN, start=T0).to_dict()),
           change("patch", t(2.05), 2, fields=["schedule"]), change("patch", t(5.5), 3, fields=["schedule"])]
    page = ledger(current, timeline_of(current, log), [record(t(3, )), record(t(4) + timedelta(seconds=20))],
                  start=t(0), end=t(7), now=t(8), kept_since=t(-60), limit=100)
    # Then the unknown schedule's executions are listed as they ran, and the gap is said
    assert outcomes(page) == {t(0): "missing", t(1): "missing", t(2): "replaced", t(3): "published",
                              t(4) + timedelta(seconds=20): "published", t(6): "missing", t(7): "missing"}
    assert page.notes == ("the schedule in effect from 2026-11-22T10:02:03.000Z is not in the change log: only its "
                          "executions are listed",)


def test_a_jittered_fire_is_due_within_its_window_and_its_lateness_counts_from_there() -> None:
    current = job(jitter_s=40)
    due = due_of(current, t(1))
    published = ExecutionRecord(job_id="j1", scheduled_at=t(1), attempt=1, execution_id="e", user_id="alice",
                                status=ExecutionStatus.RUNNING, trigger=Trigger.SCHEDULE, due_at=due,
                                published_at=due + timedelta(milliseconds=30))
    page = ledger(current, timeline_of(current, []), [published], start=t(1), end=t(1), now=t(5), kept_since=t(-60),
                  limit=10)
    [fire] = page.fires
    assert (fire.due_at, fire.outcome, fire.lateness_ms) == (due, FireOutcome.PUBLISHED, pytest.approx(30))


def test_one_record_of_a_catch_up_drop_stands_for_every_fire_it_dropped_even_before_the_page() -> None:
    current = job()
    drop = ExecutionRecord(job_id="j1", scheduled_at=t(1), attempt=1, execution_id="d", user_id="alice",
                           status=ExecutionStatus.SKIPPED, trigger=Trigger.SCHEDULE, due_at=t(1), job_version=1,
                           error=skip_note(SkipReason.CATCH_UP, "missed; outside the catch-up window (most 1)"),
                           next_fire_at=t(6))
    records = [record(t(6), late_s=30), record(t(7))]
    page = ledger(current, timeline_of(current, []), records, start=t(3), end=t(7), now=t(8), kept_since=t(-60),
                  limit=10, earlier=[drop])
    assert outcomes(page) == {t(3): "dropped", t(4): "dropped", t(5): "dropped", t(6): "caught_up",
                              t(7): "published"}
    assert "recorded on the fire at 2026-11-22T10:01:00.000Z" in (page.fires[0].detail or "")


def test_fires_between_follows_each_schedule_while_it_was_in_effect() -> None:
    current = job(Every(2 * MIN, start=t(1)))
    log = [change("submit", t(0), 1, schedule=Every(MIN, start=T0).to_dict()),
           change("patch", t(3.5), 2, fields=["schedule"], schedule=current.spec.schedule.to_dict())]
    assert fires_between(timeline_of(current, log), t(0), t(9), 100, t(30)) == [t(m) for m in (0, 1, 2, 3, 5, 7, 9)]


@pytest.mark.parametrize(("expression", "fire", "note"), [
    # Europe/Paris, 2027-03-28: 02:00 CET -> 03:00 CEST; 2027-10-31: 03:00 CEST -> 02:00 CET
    ("30 2 * * *", datetime(2027, 3, 28, 1, 0, tzinfo=UTC),
     "moved: 02:30 did not exist on 2027-03-28 in Europe/Paris (clocks went forward); fired once at 03:00"),
    ("0,30 2,3 * * *", datetime(2027, 3, 28, 1, 0, tzinfo=UTC),
     "merged: 02:00, 02:30 did not exist on 2027-03-28 in Europe/Paris (clocks went forward); fired once at 03:00"),
    ("0 3 * * *", datetime(2027, 3, 28, 1, 0, tzinfo=UTC), None),
    ("30 * * * *", datetime(2027, 10, 31, 1, 30, tzinfo=UTC),
     "02:30 occurred twice on 2027-10-31 in Europe/Paris: its second occurrence"),
    ("30 2 * * *", datetime(2027, 10, 31, 0, 30, tzinfo=UTC),
     "02:30 occurred twice on 2027-10-31 in Europe/Paris: its first occurrence"),
])
def test_the_ledger_says_what_a_clock_change_did_to_a_fire(expression: str, fire: datetime, note: str | None) -> None:
    schedule = Cron(expression, "Europe/Paris")
    assert schedule.next_fire_after(fire - timedelta(milliseconds=1)) == fire  # it is a fire of the schedule
    current = job(schedule, created_at=fire - timedelta(days=1))
    page = ledger(current, timeline_of(current, []), [record(fire)], start=fire, end=fire, now=fire + MIN,
                  kept_since=fire - MIN, limit=1)
    assert page.fires[0].dst == note
