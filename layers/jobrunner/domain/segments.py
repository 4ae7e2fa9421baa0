"""Segments: the unit of parallelism of the scan.

A job's segment is a stable hash of its id modulo the segment count, so every run of a job lands in
the same segment for a given count. Changing the count, up or down, loses nothing:

- Every writer (the API, the scan planning next runs, retries) puts a new row in
  ``segment_of(job_id, current count)``. Rows already written keep the segment they were written
  with, and some are planned far ahead (an ``at`` job next year).
- The heartbeat table records the highest count ever used (``LeaseStore.record_segment_count``,
  only ever raised). Every writer records its count before it places a row with it (``wiring``: once
  per process), and the tick every minute, so a count raised and lowered again before any tick ran
  still leaves its record. The tick scans every segment below
  ``max(current count, highest on record)``. After the count is lowered, the retired segments are
  still scanned every minute: their rows are published when due, and each next run is planned into a
  segment of the current count, so they drain by themselves. After it is raised, the first writer that
  uses a new segment starts it at the running minute (its watermark just before it:
  ``services.segments.start_segments``), before it writes a row there, so the tick scans it from that
  minute however late its first tick comes.
- The cost: one idle scan per retired segment per minute, for as long as the record stays raised
  (one invocation that waits for its minute and polls an empty late lane about once a second until
  just after it: about 100 small reads and a few heartbeat writes). Nothing can tell that a retired
  segment is empty without reading every future minute of it, so the record is never lowered
  automatically; an operator who has checked that no ``task_schedule_v2`` row has a segment at or
  above the new count may lower ``highest_segment_count`` by hand.
- Re-homing rows at the change (rewriting each row of a retired segment into its new segment) would
  save the idle scans, but needs a full scan of ``task_schedule_v2`` racing the live scans; draining
  needs none.
"""

from __future__ import annotations

import hashlib


def segment_of(job_id: str, segment_count: int) -> int:
    """Stable segment in ``[0, segment_count)`` for ``job_id`` (BLAKE2b, independent of PYTHONHASHSEED)."""
    if segment_count < 1:
        raise ValueError("segment_count must be at least 1")
    digest = hashlib.blake2b(job_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % segment_count
