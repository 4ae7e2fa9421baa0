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


def _delegated(to: str, name: str) -> property:
    """An attribute ``name`` read and written on the object the attribute ``to`` holds."""

    def get(self: Any) -> Any:
        return getattr(getattr(self, to), name)

    def put(self: Any, value: Any) -> None:
        setattr(getattr(self, to), name, value)

    return property(get, put)


class PerThreadEMFProvider(AmazonCloudWatchEMFProvider):
    """The EMF provider with the sets a handler fills and flushes held per thread; the defaults (namespace,
    service, default dimensions) stay shared, as ``set_default_dimensions`` writes them once for all."""

    _sets: _Sets
    metric_set = _delegated("_sets", "metric_set")
    dimension_set = _delegated("_sets", "dimension_set")
    dimension_sets = _delegated("_sets", "dimension_sets")
    metadata_set = _delegated("_sets", "metadata_set")


class PerThreadMetrics(Metrics):
    """``Metrics`` whose sets, read on it (``metrics.metric_set``), are its provider's: this thread's."""

    metric_set = _delegated("provider", "metric_set")
    dimension_set = _delegated("provider", "dimension_set")
    metadata_set = _delegated("provider", "metadata_set")


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
