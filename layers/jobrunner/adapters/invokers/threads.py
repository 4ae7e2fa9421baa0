"""Invoker for the local stack: runs the scan handler on a thread pool, like an async Lambda invoke."""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from jobrunner.adapters.invokers.lambda_ import scan_event
from jobrunner.ports import Invoker, ScanRequest

if TYPE_CHECKING:
    from collections.abc import Callable

log = logging.getLogger(__name__)


class ThreadInvoker(Invoker):
    """Calls ``handler(event, None)`` on a worker thread for every request; errors are logged, as Lambda would."""

    def __init__(
        self, handler: Callable[[dict[str, Any], Any], Any], max_workers: int = 64,
        quiet: tuple[type[BaseException], ...] = (),
    ) -> None:
        self._handler = handler
        self._quiet = quiet
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="scan")
        self.futures: list[Future[Any]] = []

    def invoke_scan(self, request: ScanRequest) -> None:
        future = self._pool.submit(self._run, scan_event(request))
        self.futures = [f for f in self.futures if not f.done()] + [future]

    def _run(self, event: dict[str, Any]) -> Any:
        try:
            return self._handler(event, None)
        except self._quiet:
            return None
        except Exception:
            log.exception("scan %s failed", event)
            raise

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=True)
