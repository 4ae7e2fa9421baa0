"""What the Cassandra / Keyspaces adapters do with the driver: prepared statements, unlogged batches, and the
driver's errors as ``Unavailable``. No statement of its own: each adapter sends its module's CQL through these.

Why the writes of many rows go in unlogged batches, and why never in a logged one: ``adapters.stores.cassandra``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from cassandra import ConsistencyLevel, DriverException
from cassandra.cluster import NoHostAvailable
from cassandra.concurrent import execute_concurrent
from cassandra.query import UNSET_VALUE, BatchStatement, BatchType, BoundStatement, PreparedStatement

from jobrunner.adapters.stores.session import is_read
from jobrunner.domain.errors import Unavailable

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from cassandra.cluster import Session

T = TypeVar("T")

_DRIVER_ERRORS = (DriverException, NoHostAvailable)

#: Amazon Keyspaces runs at most this many values of an IN (each one a subquery).
KEYSPACES_MAX_IN = 100
#: Amazon Keyspaces takes at most this many statements in an unlogged batch.
KEYSPACES_MAX_BATCH = 30
#: Statements per unlogged batch by default: Cassandra warns of an unlogged batch over more than 10 partitions.
DEFAULT_BATCH_ROWS = 10


def packed(items: Sequence[T], size: int, partition: Callable[[T], Any]) -> list[list[T]]:
    """``items`` in chunks of at most ``size``, each partition's items next to each other (a partition larger
    than ``size`` spans chunks), so that a chunk covers as few partitions as it can; order within a partition
    is kept."""
    groups: dict[Any, list[T]] = {}
    for item in items:
        groups.setdefault(partition(item), []).append(item)
    chunks: list[list[T]] = [[]]
    for group in groups.values():
        for item in group:
            if len(chunks[-1]) >= size:
                chunks.append([])
            chunks[-1].append(item)
    return [chunk for chunk in chunks if chunk]


def unset_nulls(values: Sequence[Any]) -> tuple[Any, ...]:
    """``values`` with None as unset: an insert then writes nothing for it, where a null writes a tombstone."""
    return tuple(UNSET_VALUE if value is None else value for value in values)


def guarded(call: Callable[[], T]) -> T:
    """``call()``, with the driver's errors as ``Unavailable``."""
    try:
        return call()
    except _DRIVER_ERRORS as exc:
        raise Unavailable(f"database unavailable: {type(exc).__name__}: {exc}") from exc


def write_many(session: Session, stmt: PreparedStatement, values: Sequence[Sequence[Any]],
               partition: Callable[[Sequence[Any]], Any], *, batch_rows: int = DEFAULT_BATCH_ROWS,
               concurrency: int = 64) -> None:
    """Write one row per item of ``values`` with ``stmt`` (an unconditional, idempotent write) in unlogged
    batches of at most ``batch_rows`` statements, each partition's rows together, ``concurrency`` at a time."""
    if not values:
        return
    if len(values) == 1 or batch_rows == 1:
        requests: list[tuple[Any, Sequence[Any] | None]] = [(stmt, v) for v in values]
    else:
        requests = []
        for chunk in packed(values, batch_rows, partition):
            batch = BatchStatement(batch_type=BatchType.UNLOGGED, consistency_level=ConsistencyLevel.LOCAL_QUORUM)
            for item in chunk:
                batch.add(stmt, item)
            requests.append((batch, None))
    guarded(lambda: execute_concurrent(session, requests, concurrency=concurrency, raise_on_first_error=True))


class Statements:
    """One session's prepared statements, and the three ways the store's tables send them: one at a time, many
    concurrently, and the writes of many rows in unlogged batches.

    Every statement is prepared once, at LOCAL_QUORUM, and only a read is marked idempotent (only a read may be
    sent twice, by speculative execution). A lightweight transaction's serial consistency is the session
    profile's: LOCAL_SERIAL on Cassandra (its Paxos round stays in the local datacenter), none on Amazon
    Keyspaces, which rejects the serial levels (``adapters/stores/keyspaces.py``)."""

    def __init__(self, session: Session, *, concurrency: int = 64, batch_rows: int = DEFAULT_BATCH_ROWS) -> None:
        self.session = session
        self._concurrency = concurrency
        #: Statements per unlogged batch of the many-row writes.
        self._batch_rows = batch_rows
        self._prepared: dict[str, PreparedStatement] = {}

    def prepared(self, cql: str) -> PreparedStatement:
        """``cql`` prepared on the session (once)."""
        prepared = self._prepared.get(cql)
        if prepared is None:
            prepared = guarded(lambda: self.session.prepare(cql))
            prepared.consistency_level = ConsistencyLevel.LOCAL_QUORUM
            prepared.is_idempotent = is_read(cql)
            self._prepared[cql] = prepared
        return prepared

    def stale(self, cql: str, params: Sequence[Any], fetch_size: int | None = None) -> BoundStatement:
        """``cql`` bound to ``params`` at LOCAL_ONE: half a LOCAL_QUORUM read's price on Keyspaces, and it may miss
        a write that returned just before (for the readers that say they can bear that)."""
        bound = self.prepared(cql).bind(params)
        bound.consistency_level = ConsistencyLevel.LOCAL_ONE
        if fetch_size is not None:
            bound.fetch_size = fetch_size
        return bound

    def run_concurrently(self, statements: Sequence[tuple[Any, Sequence[Any] | None]]) -> list[Any]:
        """The results of ``statements`` ((statement, parameters) each), in their order."""
        if not statements:
            return []
        results = guarded(lambda: execute_concurrent(
            self.session, statements, concurrency=self._concurrency, raise_on_first_error=True
        ))
        return [result for _ok, result in results]

    def write_many(self, cql: str, values: Sequence[Sequence[Any]],
                   partition: Callable[[Sequence[Any]], Any]) -> None:
        """``write_many`` with this session, batch size and concurrency (``cql``: a module constant of the
        adapter, checked as a batch member by ``tests/infra/test_keyspaces_compat.py``)."""
        write_many(self.session, self.prepared(cql), values, partition, batch_rows=self._batch_rows,
                   concurrency=self._concurrency)
