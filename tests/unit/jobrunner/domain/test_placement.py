"""Placement: which (bucket, lane) a writer uses so that the bucket's scan is sure to see the row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from jobrunner.domain.jobs import Lane, ScheduledExecution, Trigger
from jobrunner.domain.placement import (
    CLOCK_SKEW,
    KEEP_ROWS,
    LATE_LEAD,
    LATE_REACH,
    LATE_WRITE_WITHIN,
    LATEST_EXPIRY,
    MAX_TTL_S,
    OPEN_AHEAD,
    SETTLE,
    late_due,
    place,
    placed_anew,
    placed_in_time,
    row_ttl,
    scan_closes_at,
)

BUCKET = datetime(2026, 11, 22, 10, 5, tzinfo=UTC)
MS = timedelta(milliseconds=1)


def test_far_future_execution_goes_to_its_own_bucket_in_the_planned_lane() -> None:
    due = BUCKET + timedelta(seconds=30)
    assert place(due, BUCKET - timedelta(hours=3)) == (BUCKET, Lane.PLANNED)


def test_lane_is_planned_until_open_ahead_before_the_bucket_then_late() -> None:
    due = BUCKET + timedelta(seconds=30)
    assert place(due, BUCKET - OPEN_AHEAD - MS) == (BUCKET, Lane.PLANNED)
    assert place(due, BUCKET - OPEN_AHEAD) == (BUCKET, Lane.LATE)
    assert place(due, BUCKET + timedelta(seconds=20)) == (BUCKET, Lane.LATE)


@pytest.mark.parametrize(
    "due",
    [BUCKET - timedelta(hours=1), BUCKET + timedelta(seconds=20), BUCKET + timedelta(seconds=23)],
    ids=["overdue", "now", "imminent"],
)
def test_overdue_or_imminent_execution_goes_to_the_bucket_of_now_plus_settle(due: datetime) -> None:
    # Given a writer at 10:05:57, whose write may land up to SETTLE later (10:06:02)
    now = BUCKET + timedelta(seconds=57)
    # When it places an execution due before then
    bucket, lane = place(due, now)
    # Then the row goes to the bucket being scanned then (10:06), never to 10:05 whose scan may be over
    assert bucket == BUCKET + timedelta(minutes=1) == (now + SETTLE).replace(second=0)
    assert lane is Lane.LATE


def test_imminent_execution_stays_in_the_current_bucket_while_settle_fits() -> None:
    now = BUCKET + timedelta(seconds=54)
    assert place(now + timedelta(seconds=1), now) == (BUCKET, Lane.LATE)


def test_placement_is_in_utc() -> None:
    due = datetime(2026, 11, 22, 12, 5, 30, tzinfo=timezone(timedelta(hours=2)))
    bucket, _ = place(due, BUCKET - timedelta(hours=3))
    assert bucket == BUCKET and bucket.utcoffset() == timedelta(0)


def test_a_row_is_kept_until_well_after_its_scan_may_close() -> None:
    now = BUCKET - timedelta(hours=3)
    ttl = row_ttl(BUCKET, now)
    assert now + timedelta(seconds=ttl) == scan_closes_at(BUCKET) + KEEP_ROWS
    # a row written while its scan runs (or replayed late) is kept as long after the scan's close
    late = BUCKET + timedelta(seconds=50, milliseconds=300)
    assert late + timedelta(seconds=row_ttl(BUCKET, late)) >= scan_closes_at(BUCKET) + KEEP_ROWS


def test_a_row_further_ahead_than_any_time_to_live_reaches_never_expires() -> None:
    # Cassandra's storage keeps expiries before 2038 only, and no time to live exceeds 20 years
    before_limit = LATEST_EXPIRY - KEEP_ROWS - timedelta(minutes=2)
    assert 0 < row_ttl(before_limit, BUCKET) <= MAX_TTL_S
    assert row_ttl(LATEST_EXPIRY - KEEP_ROWS, BUCKET) == 0
    assert row_ttl(BUCKET + timedelta(days=365 * 25), BUCKET) == 0
    # even the last minute a datetime holds (a schedule may start at 9999-12-31T23:59:59Z)
    assert row_ttl(datetime(9999, 12, 31, 23, 59, tzinfo=UTC), BUCKET) == 0


def row(lane: Lane, due: datetime, bucket: datetime = BUCKET) -> ScheduledExecution:
    return ScheduledExecution(bucket=bucket, segment=0, lane=lane, due_at=due, job_id="j", execution_id="e",
                              user_id="u", scheduled_at=due, attempt=1, job_version=1, trigger=Trigger.MANUAL)


def test_a_late_row_is_keyed_no_earlier_than_the_lead_after_its_placement() -> None:
    now = BUCKET + timedelta(seconds=20)
    assert late_due(now - timedelta(minutes=5), now) == now + LATE_LEAD  # overdue
    assert late_due(now + LATE_LEAD - MS, now) == now + LATE_LEAD  # imminent
    assert late_due(now + timedelta(seconds=30), now) == now + timedelta(seconds=30)  # due later: as it is
    # the lead covers the poll's reach, the clocks' difference and the write's own time
    assert LATE_LEAD == LATE_REACH + CLOCK_SKEW + LATE_WRITE_WITHIN


def test_a_late_write_is_in_time_only_if_it_returned_within_its_allowance() -> None:
    placed_at = BUCKET + timedelta(seconds=20)
    late = row(Lane.LATE, placed_at + LATE_LEAD)
    assert placed_in_time([late], placed_at, placed_at + LATE_WRITE_WITHIN)
    assert not placed_in_time([late], placed_at, placed_at + LATE_WRITE_WITHIN + MS)
    # and never after its scan may have closed
    early = BUCKET - timedelta(minutes=5)
    assert not placed_in_time([late], early, scan_closes_at(BUCKET) + MS)


def test_a_planned_write_is_in_time_only_if_it_returned_before_its_scan_may_have_read_the_lane() -> None:
    # Given a row placed in the planned lane just over OPEN_AHEAD before its bucket (the latest it can be)
    placed_at = BUCKET - OPEN_AHEAD - MS
    planned = row(Lane.PLANNED, BUCKET + timedelta(seconds=20))
    assert place(planned.due_at, placed_at) == (BUCKET, Lane.PLANNED)
    # Then its write is in time if it returned before the scan may start (a minute before its bucket, by the
    # writer's clock half a second earlier), not after: the scan reads that lane once, as it streams it
    # (issue #31: a write that took over 30 s was taken as in time, landed behind the scan's read and never ran)
    assert placed_in_time([planned], placed_at, BUCKET - timedelta(minutes=1) - CLOCK_SKEW)
    assert not placed_in_time([planned], placed_at, BUCKET - timedelta(minutes=1) - CLOCK_SKEW + MS)
    assert not placed_in_time([planned], placed_at, scan_closes_at(BUCKET))


def test_a_write_to_the_last_minute_a_datetime_holds_is_judged_without_overflowing() -> None:
    # a schedule may start at 9999-12-31T23:59:59Z: its scan's close lies past what a datetime holds
    last = datetime(9999, 12, 31, 23, 59, tzinfo=UTC)
    planned = row(Lane.PLANNED, last + timedelta(seconds=59), bucket=last)
    assert placed_in_time([planned], BUCKET, BUCKET + timedelta(seconds=40))
    late = row(Lane.LATE, last + timedelta(seconds=59), bucket=last)
    assert placed_in_time([late], BUCKET, BUCKET + LATE_WRITE_WITHIN)


def test_a_row_placed_anew_late_is_keyed_from_the_new_placement() -> None:
    first = BUCKET + timedelta(seconds=20)
    again = placed_anew(row(Lane.LATE, first + LATE_LEAD), first + timedelta(seconds=3))
    assert (again.bucket, again.lane, again.due_at) == (BUCKET, Lane.LATE, first + timedelta(seconds=3) + LATE_LEAD)
