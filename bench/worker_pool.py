"""The parent's side of the worker processes (``bench.workers``): spawning them, sending them commands and
collecting the replies as futures, and starting timed commands in all of them at one instant."""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from bench.workers import serve

if TYPE_CHECKING:
    from jobrunner.config import Settings


class WorkerError(RuntimeError):
    pass


class _Handle:
    def __init__(self, context: Any, settings: Settings, index: int) -> None:
        parent, child = context.Pipe()
        self.conn = parent
        # Not a daemon: a worker may start processes of its own (the submit section's API environments);
        # ``WorkerPool.close`` ends it.
        self.process = context.Process(target=serve, args=(child, settings), name=f"bench-worker-{index}",
                                       daemon=False)
        self.process.start()
        child.close()
        self._ids = itertools.count()
        self._futures: dict[int, Future[Any]] = {}
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                request_id, ok, value = self.conn.recv()
            except (EOFError, OSError):
                with self._lock:
                    for future in self._futures.values():
                        future.set_exception(WorkerError("worker process ended"))
                    self._futures.clear()
                return
            with self._lock:
                future = self._futures.pop(request_id)
            if ok:
                future.set_result(value)
            else:
                future.set_exception(WorkerError(value))

    def call(self, op: str, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            request_id = next(self._ids)
            self._futures[request_id] = future
            self.conn.send((request_id, op, kwargs))
        return future


class WorkerPool:
    """``count`` spawned worker processes (spawn, not fork: the parent holds driver threads)."""

    def __init__(self, settings: Settings, count: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.workers = [_Handle(context, settings, i) for i in range(count)]
        self.pids = [w.call("ping").result(timeout=120)["pid"] for w in self.workers]

    def __len__(self) -> int:
        return len(self.workers)

    def call(self, index: int, op: str, **kwargs: Any) -> Future[Any]:
        return self.workers[index].call(op, **kwargs)

    def all(self, op: str, per_worker: list[dict[str, Any]], timeout: float | None = None) -> list[Any]:
        futures = [self.workers[i].call(op, **kwargs) for i, kwargs in enumerate(per_worker)]
        return [f.result(timeout=timeout) for f in futures]

    def synchronized(self, jobs: list[tuple[int, str, dict[str, Any]]], lead_s: float = 0.5,
                     timeout: float | None = None) -> tuple[float, list[Any]]:
        """Prepare each (worker, what, kwargs) job, then start them all at one instant; returns it and
        the results in job order."""
        tokens = [self.workers[i].call("prepare", what=what, **kw) for i, what, kw in jobs]
        ready = [t.result(timeout=timeout) for t in tokens]
        start_at = time.monotonic() + lead_s
        futures = [self.workers[i].call("go", token=token, start_at=start_at)
                   for (i, _, _), token in zip(jobs, ready, strict=True)]
        return start_at, [f.result(timeout=timeout) for f in futures]

    def close(self) -> None:
        for worker in self.workers:
            with contextlib.suppress(OSError):
                worker.conn.send(None)
        for worker in self.workers:
            worker.process.join(timeout=20)
            if worker.process.is_alive():  # only our own child, by its handle
                worker.process.kill()
                worker.process.join(timeout=5)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def split(items: list[Any], parts: int) -> list[list[Any]]:
    """Round-robin ``items`` into ``parts`` lists (segments over processes)."""
    return [items[i::parts] for i in range(parts)]

