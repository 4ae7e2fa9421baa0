"""Instruments the benchmark puts around the real adapters, without changing them.

- ``SkipClock``: the scan's clock for the drain. It starts at the bucket's first instant at an agreed
  real instant and runs at real speed, but ``sleep_until`` jumps instead of waiting, so a scan never
  waits for wall-clock minutes (its late-lane polls and lease renewals still happen).
- ``CountingSession``: a driver ``Session`` proxy that tallies what is sent: statements per (verb,
  table), batches (and how many of them logged) and the bytes of the values written in them.
- ``Timed``: a proxy around any port (store, publisher, leases) that adds up the wall time, calls
  and items of each method, and remembers when the last call of each method ended (the last Kafka ack).
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from cassandra.query import BatchType

from jobrunner.domain.time import utc
from jobrunner.ports import Clock


class SkipClock(Clock):
    """Real-speed time from ``start`` (at monotonic ``origin``); sleeping skips ahead instead of waiting."""

    def __init__(self, start: datetime, origin: float) -> None:
        self._start = utc(start)
        self._origin = origin
        self._skipped = 0.0
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            offset = time.monotonic() - self._origin + self._skipped
        return utc(self._start + timedelta(seconds=offset))

    def sleep_until(self, instant: datetime) -> None:
        gap = (instant - self.now()).total_seconds()
        if gap > 0:
            with self._lock:
                self._skipped += gap

    @property
    def skipped_s(self) -> float:
        return self._skipped


_VERB = re.compile(r"^\s*(SELECT\b.*?\bFROM|INSERT INTO|UPDATE|DELETE\b.*?\bFROM)\s+(\w+)", re.IGNORECASE | re.DOTALL)


def statement_kind(cql: str) -> str:
    """``"INSERT task_history_v2"``, ``"SELECT job_table"``...: the verb and the table of a CQL statement."""
    match = _VERB.match(cql)
    if match is None:
        return "OTHER"
    verb = match.group(1).split()[0].upper()
    return f"{verb} {match.group(2)}"


@dataclass
class Tally:
    """What went over the wire to Cassandra (driver side)."""

    statements: Counter[str] = field(default_factory=Counter)  # kind -> count (inside batches too)
    requests: int = 0  # CQL requests sent (a batch is one request)
    batches: int = 0
    logged_batches: int = 0  # of ``batches``: LOGGED ones (the batch log's extra writes)
    batch_statements: int = 0
    batch_value_bytes: int = 0  # serialized bound values inside batches

    def as_dict(self) -> dict[str, Any]:
        return {"statements": dict(self.statements), "requests": self.requests, "batches": self.batches,
                "logged_batches": self.logged_batches,
                "batch_statements": self.batch_statements, "batch_value_bytes": self.batch_value_bytes}


class CountingSession:
    """Delegates to a driver ``Session`` and tallies each request (thread-safe: the driver's event loop
    thread sends the follow-up statements of ``execute_concurrent``)."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._lock = threading.Lock()
        self._kinds: dict[Any, str] = {}  # prepared query id -> kind
        self.tally = Tally()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def reset(self) -> Tally:
        with self._lock:
            old, self.tally = self.tally, Tally()
        return old

    def prepare(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        prepared = self._session.prepare(query, *args, **kwargs)
        self._kinds[prepared.query_id] = statement_kind(prepared.query_string)
        return prepared

    def _kind_of(self, query: Any) -> str:
        prepared = getattr(query, "prepared_statement", None) or query
        query_id = getattr(prepared, "query_id", None)
        if query_id is not None:
            kind = self._kinds.get(query_id)
            if kind is None:
                kind = self._kinds[query_id] = statement_kind(prepared.query_string)
            return kind
        return statement_kind(getattr(query, "query_string", None) or str(query))

    def _count(self, query: Any) -> None:
        entries = getattr(query, "_statements_and_parameters", None)
        with self._lock:
            tally = self.tally
            tally.requests += 1
            if entries is None:
                tally.statements[self._kind_of(query)] += 1
                return
            tally.batches += 1
            tally.logged_batches += getattr(query, "batch_type", None) is BatchType.LOGGED
            for is_prepared, statement, values in entries:
                kind = self._kinds.get(statement, "OTHER") if is_prepared else statement_kind(statement)
                tally.statements[kind] += 1
                tally.batch_statements += 1
                tally.batch_value_bytes += sum(len(v) for v in values if isinstance(v, bytes | bytearray))

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        self._count(query)
        return self._session.execute(query, *args, **kwargs)

    def execute_async(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        self._count(query)
        return self._session.execute_async(query, *args, **kwargs)


@dataclass
class Phase:
    calls: int = 0
    seconds: float = 0.0
    items: int = 0
    last_end: float = 0.0  # monotonic instant the last successful call returned


class Phases:
    """Wall time per ``<port>.<method>``, shared by the ``Timed`` proxies of one scan. ``at_mark`` holds
    the seconds per method as they stood when the last call of ``mark`` (the publish) returned, so that
    the drain's share of each phase excludes what the scan did after its last ack."""

    def __init__(self, mark: str = "publisher.publish") -> None:
        self.by_name: dict[str, Phase] = {}
        self.at_mark: dict[str, float] = {}
        self._mark = mark
        self._lock = threading.Lock()

    def add(self, name: str, seconds: float, items: int, ok: bool) -> None:
        with self._lock:
            phase = self.by_name.setdefault(name, Phase())
            phase.calls += 1
            phase.seconds += seconds
            phase.items += items
            if ok:
                phase.last_end = time.monotonic()
                if name == self._mark:
                    self.at_mark = {n: p.seconds for n, p in self.by_name.items()}

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {name: {"calls": p.calls, "seconds": p.seconds, "items": p.items, "last_end": p.last_end}
                for name, p in self.by_name.items()}


def _items(args: tuple[Any, ...]) -> int:
    first = args[0] if args else None
    return len(first) if isinstance(first, list | tuple | dict | set | frozenset) else 1


class _TimedIterator:
    """Times each item of ``inner`` into ``phases`` as ``name``, added up here and handed over every
    ``FLUSH_ITEMS`` items and at the end: a lock and a dictionary update per row were a few per cent of
    the drain's scan CPU, the instrument's own cost, not the scan's."""

    FLUSH_ITEMS = 64

    def __init__(self, inner: Iterator[Any], phases: Phases, name: str) -> None:
        self._inner = inner
        self._phases = phases
        self._name = name
        self._seconds = 0.0
        self._items = 0

    def __iter__(self) -> _TimedIterator:
        return self

    def _flush(self) -> None:
        self._phases.add(self._name, self._seconds, self._items, True)
        self._seconds, self._items = 0.0, 0

    def __next__(self) -> Any:
        started = time.perf_counter()
        try:
            item = next(self._inner)
        except StopIteration:
            self._seconds += time.perf_counter() - started
            self._flush()
            raise
        self._seconds += time.perf_counter() - started
        self._items += 1
        if self._items >= self.FLUSH_ITEMS:
            self._flush()
        return item


class Timed:
    """Times every public method of ``inner`` into ``phases`` as ``<label>.<method>``; iterators returned
    by a method are timed item by item (``<label>.<method>.next``)."""

    def __init__(self, inner: Any, phases: Phases, label: str) -> None:
        self._inner = inner
        self._phases = phases
        self._label = label

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name.startswith("_") or not callable(attr):
            return attr
        full = f"{self._label}.{name}"
        phases = self._phases

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            ok = False
            try:
                result = attr(*args, **kwargs)
                ok = True
            finally:
                phases.add(full, time.perf_counter() - started, _items(args), ok)
            if isinstance(result, Iterator):
                return _TimedIterator(result, phases, f"{full}.next")
            return result

        return timed


class CallCounter:
    """Counts the calls of each method of ``inner`` (the DynamoDB client of the lease store)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.calls[name] += 1
            return attr(*args, **kwargs)

        return counted
