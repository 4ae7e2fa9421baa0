"""Section 8 of the benchmark report (bench/report/counts.py), from a run's results, without servers."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from bench.report.counts import writes_section


def _run(**extra: Any) -> dict[str, Any]:
    step = {"task_history_v2": 10, "task_schedule_v2": 5}
    return {"fires": 10, "segments": 2, "recurring": 5, "failures_share": 0.0, "failed_first": 0,
            "published_first": 10, "published_retries": 0, "executions": 10,
            "steps": {"scan": step, "results": step, "retry scan": {}, "retry results": {}},
            "counted": {"task_history_v2": 20, "task_schedule_v2": 5}, "server": {"system.batches": 0},
            "driver": {"task_history_v2": 20, "task_schedule_v2": 5}, "expected": {"task_history_v2": 20,
                                                                                   "task_schedule_v2": 5},
            "logged_batches": 0, "scan_errors": 0, "applied_again": [{}], **extra}


def test_the_section_shows_the_sizes_a_run_measured_one_line_each() -> None:
    # Given a run that measured the sizes
    sizes = {"stored_bytes": {"history_row": {"median": 612.0, "min": 600, "max": 640, "count": 10},
                              "one_time_job_row": {"median": 849.0, "min": 849, "max": 851, "count": 100}},
             "result_message_bytes": {"median": 330.0, "min": 300, "max": 380, "count": 10}}
    text = "\n".join(writes_section(SimpleNamespace(results={"writes": [_run(**sizes)]})))  # type: ignore[arg-type]
    # Then each has its line, with its median, its range, how many and the cost input it feeds
    assert ("| a `task_history_v2` row of an execution, stored | 612 B | 600-640 B | 10 | `history_bytes_stored` |"
            in text)
    assert "| a one-time `job_table_v2` row as submitted, stored | 849 B | 849-851 B | 100 | `job_row_bytes` |" in text
    assert "`result_message_bytes` |" in text


def test_a_run_from_before_the_sizes_shows_none() -> None:
    text = "\n".join(writes_section(SimpleNamespace(results={"writes": [_run()]})))  # type: ignore[arg-type]
    assert "Sizes, for the cost model" not in text
