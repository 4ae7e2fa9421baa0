"""Instants: UTC at millisecond precision, minute buckets, epoch ms and RFC 3339."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from jobrunner.domain.time import from_epoch_ms, minute_bucket, rfc3339, to_epoch_ms, utc

PLUS_TWO = timezone(timedelta(hours=2))


def test_minute_bucket_is_the_start_of_the_minute() -> None:
    assert minute_bucket(datetime(2026, 11, 22, 10, 1, 59, 999_999, tzinfo=UTC)) == datetime(
        2026, 11, 22, 10, 1, tzinfo=UTC
    )
    assert minute_bucket(datetime(2026, 11, 22, 10, 1, tzinfo=UTC)) == datetime(2026, 11, 22, 10, 1, tzinfo=UTC)


def test_minute_bucket_is_in_utc() -> None:
    bucket = minute_bucket(datetime(2026, 11, 22, 12, 1, 30, tzinfo=PLUS_TWO))
    assert bucket == datetime(2026, 11, 22, 10, 1, tzinfo=UTC)
    assert bucket.utcoffset() == timedelta(0)


def test_utc_truncates_to_milliseconds_and_takes_naive_as_utc() -> None:
    assert utc(datetime(2026, 11, 22, 10, 0, 0, 123_999)) == datetime(2026, 11, 22, 10, 0, 0, 123_000, tzinfo=UTC)


def test_epoch_ms_known_values() -> None:
    assert to_epoch_ms(datetime(1970, 1, 1, tzinfo=UTC)) == 0
    assert to_epoch_ms(datetime(2026, 11, 22, 12, 0, 0, 5_000, tzinfo=PLUS_TWO)) == 1_795_341_600_005
    assert from_epoch_ms(1_795_341_600_005) == datetime(2026, 11, 22, 10, 0, 0, 5_000, tzinfo=UTC)


@given(st.integers(min_value=0, max_value=2**42))
def test_epoch_ms_round_trip(epoch_ms: int) -> None:
    assert to_epoch_ms(from_epoch_ms(epoch_ms)) == epoch_ms


@given(st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)))
def test_instant_round_trip_keeps_milliseconds(instant: datetime) -> None:
    assert from_epoch_ms(to_epoch_ms(instant)) == utc(instant)


def test_rfc3339_is_utc_with_milliseconds_and_z() -> None:
    assert rfc3339(datetime(2026, 11, 22, 10, 0, tzinfo=UTC)) == "2026-11-22T10:00:00.000Z"
    assert rfc3339(datetime(2026, 11, 22, 12, 0, 1, 987_654, tzinfo=PLUS_TWO)) == "2026-11-22T10:00:01.987Z"
