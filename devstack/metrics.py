"""Powertools metrics kept per thread, for the local stack.

Lambda runs one invocation at a time in an execution environment, so Powertools keeps one set of metrics per
process (class-level, shared by every ``Metrics``) and flushes it when the handler returns. The local stack runs
the API, tick, reconcile, results and delivery handlers (and, by default, the scans) in threads of one process:
one handler's flush then wrote metrics another was still adding, or failed iterating a set another thread was
changing ("dictionary changed size during iteration", answered 502 by the local API). ``per_thread`` gives each
thread a set of its own, as each invocation has on AWS; what is deployed is unchanged.
"""

from __future__ import annotations

import threading
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider


class _Sets(threading.local):
    """One thread's metrics, dimensions and metadata (``threading.local`` runs ``__init__`` in each thread)."""

    def __init__(self, defaults: dict[str, Any]) -> None:
        self.metric_set: dict[str, Any] = {}
        self.dimension_set: dict[str, str] = {name: str(value) for name, value in defaults.items()}
        self.dimension_sets: list[dict[str, str]] = []
        self.metadata_set: dict[str, Any] = {}


def _per_thread(name: str) -> property:
    def get(self: PerThreadEMFProvider) -> Any:
        return getattr(self._sets, name)

    def put(self: PerThreadEMFProvider, value: Any) -> None:
        setattr(self._sets, name, value)

    return property(get, put)


class PerThreadEMFProvider(AmazonCloudWatchEMFProvider):
    """The EMF provider with the sets a handler fills and flushes held per thread; the defaults (namespace,
    service, default dimensions) stay shared, as ``set_default_dimensions`` writes them once for all."""

    _sets: _Sets
    metric_set = _per_thread("metric_set")
    dimension_set = _per_thread("dimension_set")
    dimension_sets = _per_thread("dimension_sets")
    metadata_set = _per_thread("metadata_set")


def _of_provider(name: str) -> property:
    def get(self: Metrics) -> Any:
        return getattr(self.provider, name)

    def put(self: Metrics, value: Any) -> None:
        setattr(self.provider, name, value)

    return property(get, put)


class PerThreadMetrics(Metrics):
    """``Metrics`` whose sets, read on it (``metrics.metric_set``), are its provider's: this thread's."""

    metric_set = _of_provider("metric_set")
    dimension_set = _of_provider("dimension_set")
    metadata_set = _of_provider("metadata_set")


def per_thread(metrics: Metrics) -> None:
    """Give every thread its own set of ``metrics`` from now on (idempotent); what was added before is dropped."""
    provider = metrics.provider
    if isinstance(provider, PerThreadEMFProvider):
        return
    if not isinstance(provider, AmazonCloudWatchEMFProvider):
        raise TypeError(f"metrics per thread need the EMF provider, not {type(provider).__name__}")
    provider.__class__ = PerThreadEMFProvider
    provider._sets = _Sets(provider.default_dimensions)  # type: ignore[attr-defined]
    metrics.__class__ = PerThreadMetrics
