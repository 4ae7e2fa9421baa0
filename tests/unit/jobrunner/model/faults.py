"""Faults for the model test: port wrappers that fail, stall, drop acknowledgements or interleave on cue.

``Faulty`` wraps a port and delegates every call to it, whatever its signature; around each call the
``FaultPlan`` of the activity running (a scan, a user operation) may fail the call (before it, or after
it landed), start an outage, slow it (the clock jumps and runs what is due meanwhile), slow it and then
fail it, acknowledge only some published messages, run a user operation in the middle of the activity,
kill the scan (``Crash``), or leave a compare-and-set of a job accepted but not committed (``Pending``):
its rows land, the call raises, and the new version shows only once the next compare-and-set of that job
(or a settling read, ``get_job_settled``) commits it, as Cassandra's Paxos does with an accepted proposal.
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
class SlowFail:
    """The call takes ``seconds``, then raises Unavailable: before it (it never landed) or after it (it landed
    late, and its caller is told it failed)."""

    seconds: int


@dataclass(frozen=True)
class Pending:
    """On ``store.update_job`` or ``store.retire_job`` (``before``): the call's rows land, its compare-and-set
    is accepted but not committed, and the call raises Unavailable (an LWT whose outcome is unknown). The
    job's new version shows only once committed: by the next ``update_job``/``retire_job`` of the job (before
    its own condition is checked), or a settling read (``get_job_settled``). A compare-and-set whose
    condition does not hold is simply lost (the call returns False)."""


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


Action = Fail | Outage | Slow | SlowFail | Pending | Die | Unacked | Interleave


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
    """A fault on the first attempt of a user operation (or a result's delivery): at its ``nth`` call of
    ``target`` (any store call by default; one that runs an operation on a job counts only the calls concerning
    that job), ``when`` the call is made, the call fails (before it landed, or after), or is 3 s slow
    (``slow``), or suffers ``action`` (a longer slow, a slow failure, a compare-and-set left pending, another
    operation interleaved there). ``then`` adds a fault to the same attempt; ``retry_in``: the user retries
    only that many seconds after a failure (at once otherwise)."""

    nth: int
    when: Literal["before", "after"]
    slow: bool = False
    action: Action | None = None
    target: str = "store.*"
    then: Glitch | None = None
    retry_in: int = 0

    __repr__ = compact_repr

    def faults(self) -> list[Fault]:
        action = self.action if self.action is not None else Slow(3) if self.slow else Fail()
        fault = Fault(0, self.target, self.nth, self.when, action)
        return [fault, *(self.then.faults() if self.then is not None else [])]

    def retry_delay(self) -> int:
        return max(self.retry_in, self.then.retry_delay() if self.then is not None else 0)


class FaultPlan:
    """The faults of one activity (a scan, a user operation), and its counts of calls."""

    def __init__(self, faults: Iterable[Fault] = ()) -> None:
        self.faults = list(faults)
        self.calls: Counter[str] = Counter()  # by target, and by port (``port.*``)
        self.hits: Counter[int] = Counter()  # by fault: the calls so far that concern its job
        self.outage_until: datetime | None = None
        #: The writes that landed: when a user's change took effect, and, for two at the same instant, which
        #: came first; and the reads of a job (a change that wrote nothing took effect when it read the job).
        self.writes: list[Landing] = []
        self.reads: list[Landing] = []

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


WRITES = ("store.update_job", "store.create_job", "store.create_jobs", "store.write_scheduled",
          "store.write_outcomes", "store.retire_job", "store.settle_published")
#: The calls before which a compare-and-set of their job left pending is committed (``Pending``).
SETTLES = ("store.update_job", "store.retire_job", "store.get_job_settled")


@dataclass(frozen=True)
class Landing:
    """A write that landed (or a read of a job): its target, when, what it returned, its place in the order
    of all writes and reads, and the jobs it names."""

    target: str
    at: datetime
    result: Any
    order: int
    jobs: frozenset[str]
    #: The scheduled rows it wrote (``write_scheduled``).
    rows: tuple[Any, ...] = ()
    #: The job it wrote (``update_job``, ``retire_job``).
    job: Any = None
    #: Whether it landed more than 0.5 s after its call began (``domain.placement.LATE_WRITE_WITHIN``).
    late: bool = False


def jobs_named(target: str, call: Call) -> frozenset[str]:
    """The jobs a store call writes or reads (its job, rows, records or (job, row) pairs)."""
    args = call.args
    if not args:
        return frozenset()
    first = args[0]
    if target in ("store.get_job", "store.get_job_settled") and len(args) > 1:
        return frozenset({args[1]})
    if hasattr(first, "job_id"):
        return frozenset({first.job_id})
    if isinstance(first, list | tuple):
        named = set()
        for item in first:
            named_item: Any = item[0] if isinstance(item, tuple) else getattr(item, "record", item)
            named_item = getattr(named_item, "done", named_item)  # (a completion names the row it settles)
            if hasattr(named_item, "job_id"):
                named.add(named_item.job_id)
        return frozenset(named)
    return frozenset()


def landings(plans: Iterable[FaultPlan], job_id: str | None = None) -> dict[str, tuple[datetime, int]]:
    """When a request's writes first landed, by target (a job update counts only if it won its
    compare-and-set): the moment its change took effect, whenever it was answered, and its place in the
    order of all writes (two requests' writes can land at the same instant of the clock, one after the
    other: the later one is in effect, whichever was answered first). With ``job_id``, only the writes
    naming that job (one job's change in a bulk change). Under ``"read"``: the last read of the job (a
    change that wrote nothing took effect when it read the job as it stood)."""
    first: dict[str, tuple[datetime, int]] = {}
    for plan in plans:
        for landing in plan.writes:
            if landing.result is not False and (job_id is None or job_id in landing.jobs):
                first.setdefault(landing.target, (landing.at, landing.order))
        for landing in plan.reads:
            if job_id is None or job_id in landing.jobs:
                first["read"] = (landing.at, landing.order)
    return first


def job_key(call: Call) -> tuple[str, str] | None:
    """The (user_id, job_id) a job store call names: its job (``update_job``, ``retire_job``), or its key."""
    first: Any = call.args[0] if call.args else call.kwargs.get("job", call.kwargs.get("user_id"))
    if hasattr(first, "job_id"):
        return first.user_id, first.job_id
    job_id = call.args[1] if len(call.args) > 1 else call.kwargs.get("job_id")
    return (first, job_id) if isinstance(first, str) and isinstance(job_id, str) else None


@dataclass
class PendingCas:
    """A compare-and-set accepted but not committed (``Pending``), and the plan of the activity that made it."""

    target: str
    call: Call
    plan: FaultPlan
    #: Told of its landing once it commits, when that comes after its request was answered.
    committed: Callable[[Landing], None] | None = None


class Injector:
    """Applies fault plans around port calls. Each thread (the test's, each scan's) has its own stack of
    plans, and the innermost activity's plan acts: a user operation run inside a scan has its own."""

    def __init__(self, clock: Simulation, run_op: Callable[[Op], None], job_id: Callable[[int], str | None],
                 say: Callable[[str], None], disturbed: Callable[[datetime], None] = lambda _: None,
                 watch: Callable[[str, Call, Any, datetime], None] = lambda *_: None) -> None:
        self.enabled = True
        #: Told of each call made, with what it returned and when it began (the world's clues for a reader).
        self._watch = watch
        #: Told of each fault as it acts (and when a slow call ends): what may delay the scans.
        self._disturbed = disturbed
        #: Numbers the writes that land (and the changes that wrote nothing, when answered), in order.
        self._landed = itertools.count()
        self._clock = clock
        self._run_op = run_op
        self._job_id = job_id  # the job an op's index names, if any yet
        self._say = say
        self._stacks: dict[int, list[FaultPlan]] = {}
        #: Compare-and-sets left pending, by (user_id, job_id).
        self.pending: dict[tuple[str, str], PendingCas] = {}

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
        began = self._clock.now()
        if target in SETTLES:
            self.commit_pending(call)
        if not self.enabled:
            return self._run(target, call, plan, began)
        due = plan.due(target, call, self._job_of)
        if target.startswith("store.") and plan.outage_until is not None and self._clock.now() < plan.outage_until:
            raise InjectedUnavailable(target)
        for fault in due:
            if fault.when == "before":
                self._perform(fault, call)
        result = self._run(target, call, plan, began)
        for fault in due:
            if fault.when == "after":
                self._perform(fault, call)
        return result

    def _run(self, target: str, call: Call, plan: FaultPlan, began: datetime) -> Any:
        result = call.run()
        self._watch(target, call, result, began)
        if target in WRITES:
            rows = tuple(call.args[0]) if target == "store.write_scheduled" and call.args else ()
            job = call.args[0] if target in ("store.update_job", "store.retire_job") and call.args else None
            if target == "store.write_outcomes" and call.args:  # (a fire held: its record SCHEDULED)
                job = next((o.record for o in call.args[0] if o.record.status.value == "SCHEDULED"), None)
            late = self._clock.now() - began > timedelta(milliseconds=500)
            plan.writes.append(Landing(target, self._clock.now(), result, next(self._landed), jobs_named(target, call),
                                       rows, job, late))
        elif target == "store.get_job":
            plan.reads.append(Landing(target, self._clock.now(), result, next(self._landed), jobs_named(target, call)))
        return result

    def commit_pending(self, call: Call) -> None:
        """Commit the compare-and-set left pending on the job ``call`` names, if any (before the call: Paxos
        finishes an accepted proposal before the next round on its partition, or a serial read)."""
        key = job_key(call)
        keys = [key] if key is not None else []
        for key in keys:
            pending = self.pending.pop(key, None)
            if pending is None:
                continue
            held = pending.call
            args = (held.args[0], [], held.args[2]) if pending.target == "store.update_job" else held.args
            result = held.function(*args, **held.kwargs)
            self._say(f"    the pending compare-and-set of {pending.target} on {key[1][:8]} commits: {result}")
            self._watch(f"{pending.target}.commit", held, result, self._clock.now())
            landing = Landing(pending.target, self._clock.now(), result, next(self._landed), frozenset({key[1]}),
                              job=held.args[0])
            pending.plan.writes.append(landing)
            if pending.committed is not None and result is True:
                pending.committed(landing)

    def _leave_pending(self, fault: Fault, call: Call) -> None:
        """``Pending``: the rows land and the compare-and-set is accepted, not committed; raises. A condition
        that does not hold returns at once (the call then runs, and its compare-and-set is lost)."""
        target = fault.target
        if target not in ("store.update_job", "store.retire_job") or len(call.args) < 2:
            return
        job, expected = call.args[0], call.args[2] if target == "store.update_job" else call.args[1]
        store = call.function.__self__  # type: ignore[attr-defined]
        current = store.get_job(job.user_id, job.job_id)
        if current is None or current.version != expected or (job.user_id, job.job_id) in self.pending:
            return
        if target == "store.update_job":
            store.write_scheduled(call.args[1])
        self.pending[(job.user_id, job.job_id)] = PendingCas(target, call, self._stack[-1])
        raise InjectedUnavailable(target)

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
        self._disturbed(self._clock.now())
        if isinstance(action, Fail):
            raise InjectedUnavailable(fault.target)
        if isinstance(action, Outage):
            self._stack[-1].outage_until = self._clock.now() + timedelta(seconds=action.seconds)
            raise InjectedUnavailable(fault.target)
        if isinstance(action, Slow | SlowFail):
            self._clock.sleep_until(self._clock.now() + timedelta(seconds=action.seconds))
            self._disturbed(self._clock.now())
            if isinstance(action, SlowFail):
                raise InjectedUnavailable(fault.target)
        elif isinstance(action, Pending):
            if fault.when == "before":
                self._leave_pending(fault, call)
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
