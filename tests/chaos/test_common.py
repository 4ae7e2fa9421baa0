"""What the fault suites share (``chaos.common``), without servers."""

from __future__ import annotations

import pytest

from chaos.common import poll


class Clock:
    """A clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_poll_returns_the_first_true_answer() -> None:
    clock = Clock()
    answers = iter([None, None, "a scan"])
    assert poll(lambda: next(answers), within_s=10, every_s=0.5, clock=clock, sleep=clock.sleep) == "a scan"
    assert clock.slept == [0.5, 0.5]


def test_poll_gives_up_at_its_bound_with_the_last_answer() -> None:
    clock = Clock()
    assert poll(lambda: 0, within_s=1.2, every_s=0.5, clock=clock, sleep=clock.sleep) == 0
    assert clock.slept == pytest.approx([0.5, 0.5, 0.2]) and clock.now == pytest.approx(1.2)


def test_poll_ends_early_when_its_wait_is_interrupted() -> None:
    clock = Clock()
    answers = iter([False, True])
    # an Event's wait answers True when the event was set: one more look, then done
    assert poll(lambda: next(answers), within_s=60, clock=clock, sleep=lambda s: True) is True
    assert clock.now == 0
