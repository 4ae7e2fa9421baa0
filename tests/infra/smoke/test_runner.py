"""Phases of steps: results in the order declared, a failed needed phase stops the rest but the clean-up."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from infra.smoke.runner import Phase, Step, StepFailed, StepResult, run_phases

if TYPE_CHECKING:
    from infra.smoke.runner import ManualClock


def waits(clock: ManualClock, seconds: float, detail: str = "ok") -> Step:
    def check() -> str:
        clock.sleep(seconds)
        return detail
    return Step(f"waits {seconds:g}", check)


def fails(message: str) -> Step:
    def check() -> str:
        raise StepFailed(message)
    return Step("fails", check)


def test_steps_report_when_they_ended_and_how_long_they_took(clock: ManualClock) -> None:
    heard: list[StepResult] = []
    results = run_phases([Phase([waits(clock, 2), waits(clock, 3)]), Phase([waits(clock, 1)])], clock, heard.append,
                         concurrent=False)
    assert [(r.name, r.ok, r.at_s, r.took_s) for r in results] == [
        ("waits 2", True, 2.0, 2.0), ("waits 3", True, 5.0, 3.0), ("waits 1", True, 6.0, 1.0)]
    assert heard == results


def test_a_failed_needed_phase_skips_the_rest_but_not_the_clean_up(clock: ManualClock) -> None:
    results = run_phases([Phase([fails("no API")], needed=True), Phase([waits(clock, 1)]),
                          Phase([waits(clock, 4, "cleaned")], always=True)], clock, lambda _: None)
    assert [(r.name, r.ok, r.ran, r.detail) for r in results] == [
        ("fails", False, True, "no API"), ("waits 1", False, False, "not run: fails failed"),
        ("waits 4", True, True, "cleaned")]


def test_a_failed_step_of_an_ordinary_phase_lets_the_others_run(clock: ManualClock) -> None:
    results = run_phases([Phase([fails("late"), waits(clock, 1)]), Phase([waits(clock, 2)])], clock, lambda _: None)
    assert [r.ok for r in results] == [False, True, True]


@pytest.mark.parametrize("concurrent", [True, False])
def test_an_unexpected_error_is_the_steps_failure_not_a_traceback(clock: ManualClock, concurrent: bool) -> None:
    def broken() -> str:
        return {}["missing"]  # type: ignore[no-any-return]

    results = run_phases([Phase([Step("broken", broken), waits(clock, 1)])], clock, lambda _: None,
                         concurrent=concurrent)
    assert (results[0].ok, results[0].detail) == (False, "KeyError: 'missing'")
    assert results[1].ok
