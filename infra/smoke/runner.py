"""Steps run in phases: every step of a phase at once (each waits on its own jobs), the next phase after. A step
passes when it returns (its detail says what it saw) and fails when it raises; a phase marked ``needed`` stops the
smoke when one of its steps failed (nothing after it could pass), but the ``always`` phase (clean-up) still runs.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


class StepFailed(Exception):
    """A check did not hold; the message says what was seen and, where it can, what to do."""


class Clock(Protocol):
    def now(self) -> datetime:
        """The wall clock, in UTC (due times are wall-clock instants)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (elapsed times)."""
        ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class ManualClock:
    """A clock that moves only when slept on (unit tests: waits take no time)."""

    def __init__(self, start: datetime) -> None:
        self._start = start
        self._elapsed = 0.0
        self._lock = threading.Lock()

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self.monotonic())

    def monotonic(self) -> float:
        with self._lock:
            return self._elapsed

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self._elapsed += max(seconds, 0.0)


@dataclass(frozen=True)
class Step:
    name: str
    check: Callable[[], str]


@dataclass(frozen=True)
class Phase:
    steps: Sequence[Step]
    #: A failed step here stops the smoke: the later phases (but the ``always`` ones) are reported not run.
    needed: bool = False
    #: Runs even after a needed phase failed (clean-up).
    always: bool = False


@dataclass(frozen=True)
class StepResult:
    name: str
    ok: bool
    detail: str
    #: Seconds from the start of the smoke to the end of the step.
    at_s: float
    took_s: float
    ran: bool = True


def run_phases(phases: Sequence[Phase], clock: Clock, on_result: Callable[[StepResult], None],
               *, concurrent: bool = True) -> list[StepResult]:
    """Run ``phases`` in order and return every step's result in the order declared; ``on_result`` hears of each
    step as it ends (from the step's thread: it must be thread-safe). ``concurrent=False`` runs one step at a time
    (unit tests on a manual clock, whose sleeps then add up in a known order)."""
    began = clock.monotonic()
    lock = threading.Lock()
    results: dict[str, StepResult] = {}
    stopped_by: str | None = None

    def run(step: Step) -> None:
        start = clock.monotonic()
        try:
            ok, detail = True, step.check()
        except StepFailed as exc:
            ok, detail = False, str(exc)
        except Exception as exc:  # a bug or an unexpected answer: reported as the step's failure, never a traceback
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        end = clock.monotonic()
        result = StepResult(step.name, ok, detail, at_s=end - began, took_s=end - start)
        with lock:
            results[step.name] = result
            on_result(result)

    for phase in phases:
        if stopped_by is not None and not phase.always:
            for step in phase.steps:
                result = StepResult(step.name, False, f"not run: {stopped_by} failed", at_s=clock.monotonic() - began,
                                    took_s=0.0, ran=False)
                results[step.name] = result
                on_result(result)
            continue
        if concurrent and len(phase.steps) > 1:
            with ThreadPoolExecutor(max_workers=len(phase.steps), thread_name_prefix="smoke") as pool:
                list(pool.map(run, phase.steps))
        else:
            for step in phase.steps:
                run(step)
        failed = [s.name for s in phase.steps if not results[s.name].ok]
        if phase.needed and failed and stopped_by is None:
            stopped_by = failed[0]
    return [results[step.name] for phase in phases for step in phase.steps]
