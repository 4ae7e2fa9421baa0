"""Faults for the model test: port wrappers that fail, stall, drop acknowledgements or interleave on cue.

``Faulty`` wraps a port and delegates every call to it, whatever its signature; around each call the
``FaultPlan`` of the activity running (a scan, a user operation) may fail the call (before it, or after
it landed), start an outage, slow it (the clock jumps and runs what is due meanwhile), acknowledge only
some published messages, run a user operation in the middle of the scan, or kill the scan (``Crash``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import itertools
import threading
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from jobrunner.domain.errors import Unavailable
from jobrunner.ports import PublishError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from datetime import datetime

    from tests.unit.jobrunner.model.simulation import Simulation
    from tests.unit.jobrunner.model.world import Op


def compact_repr(self: Any) -> str:
    """A dataclass's repr with only the fields that differ from their defaults (the failing steps stay short)."""
    shown = []
    for f in dataclasses.fields(self):
        value = getattr(self, f.name)
        default = f.default if f.default is not dataclasses.MISSING else dataclasses.MISSING
        if value != default:
            shown.append(f"{f.name}={value!r}")
    return f"{type(self).__name__}({', '.join(shown)})"


class Crash(BaseException):
    """The scan's process dies here (a Lambda timeout, out of memory): nothing after this point runs."""


class InjectedUnavailable(Unavailable):
    def __init__(self, target: str) -> None:
        super().__init__(f"injected: {target} unavailable")
        self.port = target.split(".")[0]


@dataclass(frozen=True)
class Fail:
    """The call raises Unavailable: before it (nothing happened) or after it (it landed; the reply was lost)."""


@dataclass(frozen=True)
class Outage:
    """This call and every later store call of the same scan fail for ``seconds`` of clock time."""

    seconds: int


@dataclass(frozen=True)
class Slow:
    """The call takes ``seconds``: the clock jumps before it lands (meanwhile other scans run, ops happen)."""

    seconds: int


@dataclass(frozen=True)
class Die:
    """The scan dies here (``Crash``)."""


@dataclass(frozen=True)
class Unacked:
    """``publish`` raises PublishError for every other message (``some``) or for all of them. Before the call
    only the acknowledged ones are written; after it, all were written anyway (at-least-once)."""

    some: bool


@dataclass(frozen=True)
class Interleave:
    """A user operation or a worker result happens here, in the middle of the scan."""

    op: Op


Action = Fail | Outage | Slow | Die | Unacked | Interleave


@dataclass(frozen=True)
class Fault:
    """``action``, at the ``nth`` call of ``target`` (``port.method``; ``port.*`` is any call to the port) by
    scan number ``scan`` of a minute, ``when`` the call is made."""

    scan: int
    target: str
    nth: int
    when: Literal["before", "after"]
    action: Action


@dataclass(frozen=True)
class Glitch:
    """A store failure on a user operation's first attempt: its ``nth`` store call fails (before or after it
    landed), or is 3 s slow."""

    nth: int
    when: Literal["before", "after"]
    slow: bool = False

    __repr__ = compact_repr

    def fault(self) -> Fault:
        return Fault(0, "store.*", self.nth, self.when, Slow(3) if self.slow else Fail())


class FaultPlan:
    """The faults of one activity (a scan, a user operation), and its counts of calls."""

    def __init__(self, faults: Iterable[Fault] = ()) -> None:
        self.faults = list(faults)
        self.calls: Counter[str] = Counter()  # by target, and by port (``port.*``)
        self.hits: Counter[int] = Counter()  # by fault: the calls so far that concern its job
        self.outage_until: datetime | None = None
        #: The writes that landed (target, when, what they returned, in which order of all the writes that
        #: landed): when a user's change took effect, and, for two at the same instant, which came first.
        self.writes: list[tuple[str, datetime, Any, int]] = []

    def due(self, target: str, call: Call, job_of: Callable[[Fault], str | None]) -> list[Fault]:
        """The faults due at this call of ``target``. A fault counts the calls of its target, or of any
        target of its port; one that runs an operation on a job counts only the calls concerning that job
        (so that a PATCH lands between *that job's* read and its completion)."""
        port = target.split(".")[0] + ".*"
        counts = {target: self.calls[target], port: self.calls[port]}
        self.calls[target] += 1
        self.calls[port] += 1
        due = []
        for index, fault in enumerate(self.faults):
            if fault.target not in counts:
                continue
            nth = counts[fault.target]
            job_id = job_of(fault)
            if job_id is not None:
                if not mentions(call.args, job_id):
                    continue
                nth = self.hits[index]
                self.hits[index] += 1
            if nth == fault.nth:
                due.append(fault)
        return due


def mentions(value: Any, job_id: str, depth: int = 5) -> bool:
    """Whether a call's arguments name ``job_id`` (rows, records, completions, keys, messages)."""
    if isinstance(value, str):
        return value == job_id
    if depth == 0:
        return False
    if isinstance(value, list | tuple | set | frozenset):
        return any(mentions(v, job_id, depth - 1) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(mentions(getattr(value, f.name), job_id, depth - 1) for f in dataclasses.fields(value))
    return False


@dataclass(frozen=True)
class Call:
    function: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def run(self, *args: Any) -> Any:
        return self.function(*(args or self.args), **self.kwargs)


WRITES = ("store.update_job", "store.create_job", "store.write_scheduled", "store.write_outcomes")


def landings(plans: Iterable[FaultPlan]) -> dict[str, tuple[datetime, int]]:
    """When a request's writes first landed, by target (a job update counts only if it won its
    compare-and-set): the moment its change took effect, whenever it was answered, and its place in the
    order of all writes (two requests' writes can land at the same instant of the clock, one after the
    other: the later one is in effect, whichever was answered first)."""
    first: dict[str, tuple[datetime, int]] = {}
    for plan in plans:
        for target, at, result, order in plan.writes:
            if result is not False:
                first.setdefault(target, (at, order))
    return first


class Injector:
    """Applies fault plans around port calls. Each thread (the test's, each scan's) has its own stack of
    plans, and the innermost activity's plan acts: a user operation run inside a scan has its own."""

    def __init__(self, clock: Simulation, run_op: Callable[[Op], None], job_id: Callable[[int], str | None],
                 say: Callable[[str], None]) -> None:
        self.enabled = True
        #: Numbers the writes that land (and the changes that wrote nothing, when answered), in order.
        self._landed = itertools.count()
        self._clock = clock
        self._run_op = run_op
        self._job_id = job_id  # the job an op's index names, if any yet
        self._say = say
        self._stacks: dict[int, list[FaultPlan]] = {}

    def next_order(self) -> int:
        """The next number in the order of landed writes (a change that wrote nothing takes effect then)."""
        return next(self._landed)

    @property
    def _stack(self) -> list[FaultPlan]:
        return self._stacks.setdefault(threading.get_ident(), [FaultPlan()])

    @contextlib.contextmanager
    def acting(self, plan: FaultPlan) -> Iterator[None]:
        self._stack.append(plan)
        try:
            yield
        finally:
            self._stack.pop()

    def around(self, target: str, call: Call) -> Any:
        """Make ``call`` to ``target``, letting the current fault plan act before and after it."""
        plan = self._stack[-1]
        if not self.enabled:
            return call.run()
        due = plan.due(target, call, self._job_of)
        if target.startswith("store.") and plan.outage_until is not None and self._clock.now() < plan.outage_until:
            raise InjectedUnavailable(target)
        for fault in due:
            if fault.when == "before":
                self._perform(fault, call)
        result = call.run()
        if target in WRITES:
            plan.writes.append((target, self._clock.now(), result, next(self._landed)))
        for fault in due:
            if fault.when == "after":
                self._perform(fault, call)
        return result

    def rows(self, target: str, rows: Iterator[Any]) -> Iterator[Any]:
        while (row := self.around(target, Call(next, (rows, None), {}))) is not None:
            yield row

    def _job_of(self, fault: Fault) -> str | None:
        """The job an interleaved operation is about (None: it is about none, or there is no job yet)."""
        op = fault.action.op if isinstance(fault.action, Interleave) else None
        return self._job_id(op.job) if op is not None and hasattr(op, "job") else None

    def _perform(self, fault: Fault, call: Call) -> None:
        action = fault.action
        self._say(f"  {fault}")
        if isinstance(action, Fail):
            raise InjectedUnavailable(fault.target)
        if isinstance(action, Outage):
            self._stack[-1].outage_until = self._clock.now() + timedelta(seconds=action.seconds)
            raise InjectedUnavailable(fault.target)
        if isinstance(action, Slow):
            self._clock.sleep_until(self._clock.now() + timedelta(seconds=action.seconds))
        elif isinstance(action, Die):
            raise Crash(str(fault))
        elif isinstance(action, Unacked):
            messages = list(call.args[0])
            failed = [i for i in range(len(messages)) if i % 2 or not action.some or len(messages) == 1]
            if fault.when == "before":
                acked = [m for i, m in enumerate(messages) if i not in failed]
                if acked:
                    call.run(acked, *call.args[1:])
            raise PublishError(failed, "injected: not acknowledged")
        elif isinstance(action, Interleave):
            self._run_op(action.op)


class Faulty:
    """A port that delegates every call to ``real`` (whatever its signature), letting the injector's current
    fault plan act around each call, and around each row read from an iterator the call returns."""

    def __init__(self, port: str, real: object, faults: Injector) -> None:
        self._port = port
        self._real = real
        self._faults = faults

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        if name.startswith("_") or not callable(attr):
            return attr
        target = f"{self._port}.{name}"
        faults = self._faults

        if inspect.isgeneratorfunction(attr):  # a lazy read does its I/O, and so fails, when iterated

            def read(*args: Any, **kwargs: Any) -> Iterator[Any]:
                yield from faults.rows(f"{target}.next", faults.around(target, Call(attr, args, kwargs)))

            return read

        def call(*args: Any, **kwargs: Any) -> Any:
            return faults.around(target, Call(attr, args, kwargs))

        return call
