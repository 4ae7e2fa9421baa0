"""Virtual time for the model test, with the scans running in it concurrently and reproducibly.

Each scan runs on its own thread, but only one thread runs at a time: a scan that sleeps on the clock
hands the turn back to the driver (the test's thread), which moves time forward and wakes whatever is
due next. So scans overlap as they do in production (minute M and M+1, or two scans of one partition
once a stalled one's lease has expired), and every interleaving replays exactly.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
from typing import TYPE_CHECKING

from jobrunner.adapters.clocks.manual import ManualClock
from tests.unit.jobrunner.model.faults import Crash

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime


class Task:
    """A scan running on its own thread, but only while the simulation gives it the turn (its gate)."""

    def __init__(self, name: str, body: Callable[[], None], simulation: Simulation) -> None:
        self.name = name
        self._body = body
        self._simulation = simulation
        self.gate = threading.Lock()
        self.gate.acquire()
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.done = False
        self.killed = False
        self.error: BaseException | None = None

    def _main(self) -> None:
        self._simulation.enter(self)
        try:
            if self.killed:
                raise Crash("the world ended")
            self._body()
        except BaseException as exc:  # handed to the driver, which re-raises it
            self.error = exc
        finally:
            self.done = True
            self._simulation.leave()


class Simulation(ManualClock):
    """Virtual time shared by the driver (the test's thread) and tasks (scans), exactly one running at a time.

    A task that sleeps hands the turn back to the driver. The driver moves time forward with ``sleep_until``,
    running its agenda in time order (then order of entry): timed actions, and the tasks whose sleep ends.
    So scans overlap as they do in production, and every interleaving is reproducible."""

    TURN_TIMEOUT_S = 60.0

    def __init__(self, start: datetime) -> None:
        super().__init__(start)
        self._agenda: list[tuple[datetime, int, Callable[[], None] | Task]] = []
        self._order = itertools.count()
        self._driver_gate = threading.Lock()
        self._driver_gate.acquire()
        self._tasks: dict[int, Task] = {}  # by thread ident
        self.tasks: list[Task] = []

    def at(self, instant: datetime, action: Callable[[], None] | Task) -> None:
        heapq.heappush(self._agenda, (instant, next(self._order), action))

    def spawn(self, name: str, body: Callable[[], None]) -> None:
        """Start ``body`` as a task, now (it first runs when the driver next moves time)."""
        task = Task(name, body, self)
        self.tasks.append(task)
        self.at(self.now(), task)

    def sleep_until(self, instant: datetime) -> None:
        task = self._tasks.get(threading.get_ident())
        if task is not None:  # a task sleeps: the driver runs meanwhile
            self.at(instant, task)
            self._driver_gate.release()
            task.gate.acquire()
            if task.killed:
                raise Crash("the world ended")
            return
        while self._agenda and self._agenda[0][0] <= instant:
            when, _, item = heapq.heappop(self._agenda)
            super().sleep_until(when)
            if isinstance(item, Task):
                self._resume(item)
            else:
                item()
        super().sleep_until(instant)

    def busy(self) -> bool:
        return any(not t.done for t in self.tasks)

    def close(self) -> None:
        """End every task still sleeping (each sees a ``Crash``)."""
        for task in self.tasks:
            if not task.done:
                task.killed = True
                with contextlib.suppress(BaseException):
                    self._resume(task)

    def _resume(self, task: Task) -> None:
        """Driver: give ``task`` the turn until it sleeps or ends; re-raise what it failed with."""
        if not task.thread.is_alive() and not task.done:
            task.thread.start()
        task.gate.release()
        if not self._driver_gate.acquire(timeout=self.TURN_TIMEOUT_S):
            raise RuntimeError(f"the simulation is stuck: {task.name} never handed the turn back")
        if task.error is not None:
            error, task.error = task.error, None
            raise error

    def enter(self, task: Task) -> None:
        """A task's thread starts: it waits for its first turn."""
        self._tasks[threading.get_ident()] = task
        task.gate.acquire()

    def leave(self) -> None:
        """A task ends: the turn goes back to the driver."""
        self._driver_gate.release()
