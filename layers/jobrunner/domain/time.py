"""Instants, minute buckets and RFC 3339 formatting.

All instants in the domain are timezone-aware UTC datetimes truncated to whole milliseconds, the
precision Cassandra's ``timestamp`` keeps, so that a value survives a round trip through the store.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

MINUTE = timedelta(minutes=1)
MINUTE_MS = 60_000


def utc(instant: datetime) -> datetime:
    """Return ``instant`` in UTC at millisecond precision; naive datetimes are taken as UTC."""
    if instant.tzinfo is UTC and not instant.microsecond % 1000:  # already so (most calls: a hot path)
        return instant
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=UTC)
    instant = instant.astimezone(UTC)
    return instant.replace(microsecond=(instant.microsecond // 1000) * 1000)


def to_epoch_ms(instant: datetime) -> int:
    instant = utc(instant)
    return int(instant.timestamp()) * 1000 + instant.microsecond // 1000


def from_epoch_ms(epoch_ms: int) -> datetime:
    return datetime.fromtimestamp(epoch_ms // 1000, tz=UTC) + timedelta(milliseconds=epoch_ms % 1000)


def minute_bucket(instant: datetime) -> datetime:
    """The start of the minute holding ``instant``: a bucket holds every execution due in [M, M+60 s)."""
    return utc(instant).replace(second=0, microsecond=0)


def rfc3339(instant: datetime) -> str:
    """UTC RFC 3339 with millisecond precision, e.g. ``2026-11-22T10:00:00.000Z``."""
    return utc(instant).isoformat(timespec="milliseconds").replace("+00:00", "Z")
