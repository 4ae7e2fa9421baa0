"""The fairness section's arithmetic (no servers): accounting per tenant, lateness, and the light tenant's rank."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

from bench.fairness import HEAVY, LIGHT, _Message, _minute_figures
from bench.report.headline import _fairness_rows
from bench.report.system import fairness_section
from jobrunner.domain.time import to_epoch_ms

MINUTE = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
DUE = to_epoch_ms(MINUTE)
SCAN = {"finished": True, "published": 0, "errors": 0, "crashed": None, "lost_lease": False}


def message(name: str, tenant: str, late_ms: int, copies: int = 1) -> _Message:
    return _Message(name, tenant, DUE, DUE + late_ms, copies)


def test_ranks_lateness_and_accounting_of_a_loaded_minute() -> None:
    # Given a minute where the heavy tenant's 4 executions came out before, between and after the light one's 2,
    # one of them twice, and a message of a tenant that was never seeded
    messages = [message("h1", HEAVY, 10), message("l1", LIGHT, 20), message("h2", HEAVY, 30, copies=2),
                message("h3", HEAVY, 30), message("l2", LIGHT, 40), message("h4", HEAVY, 50),
                message("x1", "someone-else", 60)]

    # When its figures are worked out
    figures = _minute_figures(MINUTE, messages, {LIGHT: 2, HEAVY: 5}, [SCAN, SCAN])

    # Then each tenant's executions are counted once, the missing one and the copy are reported
    assert figures["published"] == {LIGHT: 2, HEAVY: 4}
    assert figures["unpublished"] == 1 and figures["duplicates"] == 1 and figures["foreign"] == 1
    # and the light tenant's lateness is its own, nearest-rank
    assert figures["lateness_ms"][LIGHT] == {"first": 20, "p50": 20, "p99": 40, "max": 40, "count": 2}
    assert figures["lateness_ms"][HEAVY]["max"] == 50
    # and its ranks count every message of the minute published before it (ties share the best rank)
    assert figures["light_rank"] == {"median": 3.5, "max": 5, "of": 7}
    assert figures["scans"] == {"segments": 2, "finished": 2, "published": 0, "errors": 0, "crashed": [],
                                "lost_lease": 0}


def test_a_minute_with_nothing_published_has_no_figures() -> None:
    figures = _minute_figures(MINUTE, [], {LIGHT: 3}, [])

    assert figures["unpublished"] == 3
    assert math.isnan(figures["lateness_ms"][LIGHT]["p99"]) and math.isnan(figures["light_rank"]["max"])


def test_a_run_on_the_skipping_clock_reports_its_counts_and_no_lateness() -> None:
    # Given a run whose minute was scanned on a clock that never waits (the smoke test's): its lateness is the
    # machine's clock minus a far-future due instant
    loaded = _minute_figures(MINUTE, [message("l1", LIGHT, -86_400_000), message("h1", HEAVY, -86_400_000)],
                             {LIGHT: 1, HEAVY: 1}, [SCAN])
    unloaded = _minute_figures(MINUTE, [message("l2", LIGHT, -86_400_000)], {LIGHT: 1}, [SCAN])
    run = {"unloaded": unloaded, "loaded": loaded, "light_p99_delta_ms": 0.0, "met": True}
    fair = {"runs": [run], "tenants": {"light": LIGHT, "heavy": HEAVY}, "heavy": 1, "light": 1, "clock": "skip"}
    bench = cast("Any", SimpleNamespace(results={"fairness": fair}))

    # When the report is written
    section = "\n".join(fairness_section(bench))

    # Then it gives the counts, and no lateness or rank, and the headline leaves the section out
    assert "1 / 1 (0) ; 2 / 2 (0)" in section
    assert "p99" not in section and "| run |" not in section and "median" not in section
    assert _fairness_rows(bench) == []
