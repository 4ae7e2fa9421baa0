"""``make run``'s console: metric records to a file, log records as plain lines, a summary line a minute."""

from __future__ import annotations

import io
import json
import logging
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from devstack.console import MinuteSummary, _Router, plain, route_output

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

MINUTE = datetime(2026, 11, 26, 19, 21, tzinfo=UTC)


def emf(name: str, value: float | list[float], at: datetime = MINUTE, **dimensions: str) -> str:
    """An embedded-metric-format record as Powertools prints it."""
    return json.dumps({"_aws": {"Timestamp": int(at.timestamp() * 1000) + 4_000, "CloudWatchMetrics": [
        {"Namespace": "JobRunner", "Dimensions": [list(dimensions)], "Metrics": [{"Name": name, "Unit": "Count"}]}]},
        name: value, **dimensions}, separators=(",", ":"))


LOG = json.dumps({"level": "WARNING", "location": "scan:88", "message": "lease lost",
                  "timestamp": "2026-11-26 19:21:04,117+0000", "service": "jobrunner", "cold_start": False,
                  "function_name": "jobrunner-scan", "function_request_id": "r-1", "segment": 3})


def test_metric_records_go_to_the_file_log_records_become_plain_lines_the_rest_passes(tmp_path: Path) -> None:
    console, metrics = io.StringIO(), tmp_path / "metrics.jsonl"
    router = _Router(console, metrics)
    # Given a metric, a log record, a banner line and a line written in two pieces
    router.write(emf("ExecutionsPublishedBySegment", [3.0], segment="12") + "\n")
    router.write(LOG + "\nDistributed Job Runner is running.\n")
    router.write('{"not": "a record"')
    router.write("}\n")
    # Then the console reads as words, and the metric is in the file as it was printed
    assert console.getvalue().splitlines() == [
        "19:21:04 WARNING scan: lease lost (segment=3)",
        "Distributed Job Runner is running.",
        '{"not": "a record"}',
    ]
    assert metrics.read_text().splitlines() == [emf("ExecutionsPublishedBySegment", [3.0], segment="12")]


def test_a_plain_line_names_the_fields_beyond_the_message() -> None:
    record = {"level": "ERROR", "message": "scan failed", "timestamp": "2026-11-26 19:22:00,001+0000",
              "function_name": "jobrunner-scan", "error": "NoHostAvailable", "segment": 7}
    assert plain(record) == "19:22:00 ERROR scan: scan failed (error=NoHostAvailable segment=7)"


def test_routing_also_takes_over_the_log_handlers_already_writing_to_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a logger made before the routing, writing to standard output (as Powertools' is)
    original = io.StringIO()
    monkeypatch.setattr(sys, "stdout", original)
    made_before = logging.getLogger("made-before-routing")
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    made_before.addHandler(handler)
    try:
        route_output(tmp_path / "logs" / "metrics.jsonl")
        made_before.warning(LOG)
        print(emf("ScansDispatched", 16.0))
    finally:
        made_before.removeHandler(handler)
    assert original.getvalue() == "19:21:04 WARNING scan: lease lost (segment=3)\n"
    assert json.loads((tmp_path / "logs" / "metrics.jsonl").read_text())["ScansDispatched"] == 16.0


def test_a_minute_is_summed_up_once_it_has_ended_and_a_quiet_one_says_nothing(tmp_path: Path) -> None:
    metrics, printed = tmp_path / "metrics.jsonl", []
    metrics.write_text(emf("ExecutionsPublished", 999.0, MINUTE.replace(minute=5)) + "\n")  # an earlier run's
    summary = MinuteSummary(metrics, printed.append)
    lines = [emf("ExecutionsPublished", 7.0), emf("ExecutionsPublished", 5.0), emf("MaxLatenessMs", 130.0),
             emf("MaxLatenessMs", 90.0), emf("Results_succeeded", 10.0), emf("Results_retrying", 2.0),
             emf("Results_dead_lettered", 1.0), emf("Retries", 2.0), emf("DeadLetters", 1.0),
             emf("ScansDispatched", 16.0, MINUTE.replace(minute=22))]  # a quiet minute: scans, nothing due
    with metrics.open("a") as out:
        out.write("\n".join(lines) + "\n")

    summary.poll(MINUTE.replace(second=30))  # the minute has not ended
    assert printed == []
    summary.poll(MINUTE.replace(minute=23))
    assert printed == ["19:21  published 12 (worst lateness 130 ms); results: 2 retrying, 10 succeeded; "
                       "1 dead-lettered"]


def test_lines_printed_by_threads_at_once_stay_whole(tmp_path: Path) -> None:
    import threading

    console, metrics = io.StringIO(), tmp_path / "metrics.jsonl"
    router = _Router(console, metrics)
    # Given two threads printing a record each, text and newline apart (as print does), interleaved
    first_text_written, second_done = threading.Event(), threading.Event()

    def first() -> None:
        router.write(emf("ExecutionsPublished", 1.0))
        first_text_written.set()
        second_done.wait(5)
        router.write("\n")

    thread = threading.Thread(target=first)
    thread.start()
    first_text_written.wait(5)
    router.write(emf("ExecutionsPublished", 2.0))
    router.write("\n")
    second_done.set()
    thread.join(5)
    # Then each record is a line of its own
    assert sorted(metrics.read_text().splitlines()) == sorted(
        [emf("ExecutionsPublished", 1.0), emf("ExecutionsPublished", 2.0)])


def test_a_minute_of_results_alone_does_not_say_published_nothing(tmp_path: Path) -> None:
    metrics, printed = tmp_path / "metrics.jsonl", []
    summary = MinuteSummary(metrics, printed.append)
    metrics.write_text(emf("ExecutionsPublished", 0.0) + "\n" + emf("Results_succeeded", 4.0) + "\n")
    summary.poll(MINUTE.replace(minute=22))
    assert printed == ["19:21  results: 4 succeeded"]


def test_the_router_answers_for_the_console_it_stands_for(tmp_path: Path) -> None:
    console = open(tmp_path / "console.txt", "w", encoding="utf-8")  # noqa: SIM115 - closed below
    try:
        router = _Router(console, tmp_path / "metrics.jsonl")
        assert (router.fileno(), router.isatty(), router.encoding) == (console.fileno(), False, "utf-8")
    finally:
        console.close()
