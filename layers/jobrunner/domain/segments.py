"""Segments: the unit of parallelism of the scan.

A job's segment is a stable hash of its id modulo the segment count, so every run of a job lands in
the same segment for a given count. Changing the count moves jobs between segments; rows already
written keep the segment they were written with, and the scan of that (minute, segment) still runs
for every segment below the larger of the old and new counts, so nothing is stranded while both
counts are scanned.
"""

from __future__ import annotations

import hashlib


def segment_of(job_id: str, segment_count: int) -> int:
    """Stable segment in ``[0, segment_count)`` for ``job_id`` (BLAKE2b, independent of PYTHONHASHSEED)."""
    if segment_count < 1:
        raise ValueError("segment_count must be at least 1")
    digest = hashlib.blake2b(job_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % segment_count
